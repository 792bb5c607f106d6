"""What a run, a matrix, an exploration and an audit produce, as data: the verdicts, the scenario results
and the agent runs, the matrix's cells, the audit's summary. Every renderer (text, HTML, JSON, JUnit, OTel)
reads these and nothing of the engine; they import only the contract and each other."""

from harness.results.audit import AuditSummary
from harness.results.exploration import Exploration, Flake, Found, ScheduleRun
from harness.results.matrix import REFERENCE, Cell, Matrix, as_dict
from harness.results.scenario_result import AgentRun, ScenarioResult
from harness.results.verdict import (
    EXPECTATION_CODE,
    EXPECTATION_RULE,
    AttemptVerdict,
    Finding,
    IntentVerdict,
    OperationVerdict,
    Verdict,
)

__all__ = [
    "EXPECTATION_CODE",
    "EXPECTATION_RULE",
    "REFERENCE",
    "AgentRun",
    "AttemptVerdict",
    "AuditSummary",
    "Cell",
    "Exploration",
    "Finding",
    "Flake",
    "Found",
    "IntentVerdict",
    "Matrix",
    "OperationVerdict",
    "ScenarioResult",
    "ScheduleRun",
    "Verdict",
    "as_dict",
]
