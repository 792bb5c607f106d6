"""One scenario run as data: how each run of the agent ended, and the run's result (the verdict, the
scenario's expectations, the evidence folder). What the engine returns, what crosses pytest-xdist as JSON, and
what every renderer reads."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.results.verdict import Verdict


@dataclass
class AgentRun:
    """How one run of the agent process ended."""

    command: str
    exit_status: int | None
    timed_out: bool
    killed_by_harness: bool
    seconds: float
    # wall clock (the log's and the journal's): what a later run logs about an attempt the harness's
    # kill interrupted (the checker reads it)
    started_at: float | None = None
    ended_at: float | None = None
    # the size of the audit log when this run ended (once nothing of it was left running): a killed run's
    # session writing past it is proof the crash did not stop the agent (``harness.evidence``); None when
    # not measured (an older folder)
    log_bytes_at_end: int | None = None
    # a container agent's container (its name), None for a process
    container: str | None = None
    # how the run was confined (``harness.sandbox``): bubblewrap's words, a container's, or "unsandboxed: why;
    # what that gives up"; None in an older folder
    sandbox: str | None = None
    # when the agent's own process exited (wall clock), and how many processes it left running then (they get a
    # bounded moment before they are killed: what they send meanwhile is a finding, H062); None when killed
    exited_at: float | None = None
    left_running: int | None = None
    # processes that carried this run's contract environment after its group or sandbox was gone (a setsid
    # double fork, unsandboxed): said here and killed; the run is INCOMPLETE (``harness.checker.judge``)
    survivors: list[str] = field(default_factory=list)


@dataclass
class ScenarioResult:
    """The outcome of one scenario run: the checker's verdict plus the scenario's own expectations."""

    scenario: str
    agent: str
    passed: bool
    verdict: Verdict
    evidence_dir: Path
    agent_runs: list[AgentRun]
    timings: dict[str, float] = field(default_factory=dict)
    expectation_failures: list[str] = field(default_factory=list)
    evidence_kept: bool = True
    # why the harness lost evidence of this run; when not empty the agent is not judged (``verdict`` is empty)
    incomplete: list[str] = field(default_factory=list)
    # what the wire and the ledger show, whatever the mode (``Attribution.facts``): effects committed, write
    # attempts, key behaviour, per intent; what a certification table shows (empty when evidence is incomplete)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def sandbox(self) -> str | None:
        """How the agent was confined (``AgentRun.sandbox``; its runs' one way, or each said in run order, ";"
        between): what the verdict can vouch for. None when no run says (an older folder)."""
        said = list(dict.fromkeys(run.sandbox for run in self.agent_runs if run.sandbox))
        return "; ".join(said) if said else None

    def to_dict(self, *, streamed: bool = False) -> dict[str, Any]:
        """The result as JSON-able data: the evidence folder's verdict file, and what crosses pytest-xdist.

        ``passed`` is the run's; ``verdict_passed`` the verdict's, which holds the scenario's
        expectations as X001 findings (so it never reads passed when an expectation failed);
        ``rules_passed`` the checker's rules alone (what ``verdict_passed`` meant before X001 joined it).
        ``streamed``: the verdict's operations, intents and findings made as verdict.json is written
        (``Verdict.to_dict``)."""
        verdict = self.verdict.document(streamed=streamed)
        return {"scenario": self.scenario, "agent": self.agent, "passed": self.passed,
                "expectation_failures": list(self.expectation_failures), "timings": dict(self.timings),
                "evidence_dir": str(self.evidence_dir), "evidence_kept": self.evidence_kept,
                "incomplete": list(self.incomplete), "facts": dict(self.facts), "sandbox": self.sandbox,
                "agent_runs": [asdict(run) for run in self.agent_runs], **verdict}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScenarioResult:
        verdict = Verdict.from_dict(data)
        verdict.add_expectation_failures(list(data.get("expectation_failures", [])))  # an older file's strings
        return cls(data["scenario"], data["agent"], data["passed"], verdict,
                   Path(data["evidence_dir"]), [AgentRun(**run) for run in data.get("agent_runs", [])],
                   dict(data.get("timings", {})), list(data.get("expectation_failures", [])),
                   data.get("evidence_kept", True), list(data.get("incomplete", [])), dict(data.get("facts", {})))
