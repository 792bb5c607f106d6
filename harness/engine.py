"""Runs one scenario end to end and judges it: the core every front end (pytest, CLI) calls.

destinations (own process) + fault proxy (embedded, shared per process) + agent (own process, or a container)
-> evidence folder (agent log, proxy journal, ledger, context) -> checker -> verdict.

The engine knows nothing of pytest or argparse. Whatever happens, the processes it started are
stopped and the evidence gathered so far stays on disk.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import secrets as secrets_module
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import interrupt
from harness.agent_process import run_agent
from harness.chain import forget_run_key, keep_run_key, new_run_key, write_checkpoint, write_checkpoints
from harness.contract import (
    AGENT_LOGS,
    BLACK_BOX_MODE,
    CHECKPOINT_FILE,
    CHECKPOINTS_KEY,
    COMPLETENESS_KEY,
    EVENTS_MODE,
    INTERRUPTED_KEY,
    LEDGER_CHECKPOINT_FILE,
    LEDGER_DUMP_FILE,
    LEDGER_SEAL_KEY,
    LIMITS_KEY,
    MCP_ENDPOINT,
    MCP_STDIO,
    OTEL_AGENT_LOG,
    PROBE_FAILURES_KEY,
    PROBE_KEY,
    REFERENCE_AGENT,
    TEARDOWN_PROBLEMS_KEY,
    VERDICT_JSON_FILE,
    ContextKey,
    EvidenceLayout,
    agent_env,
    destination_env,
    env_suffix,
    mcp_server_env_name,
)
from harness.errors import AgentError, ContainerError, HarnessError
from harness.limits import EvidenceLimits, collector_paused
from harness.ndjson import write_json_file
from harness.results.scenario_result import AgentRun, ScenarioResult
from harness.safe_files import remove_tree
from harness.sandbox import Sandbox, choose_sandbox, hidden_paths
from harness.scenario import ContainerAgent, Scenario, agent_label, chosen_agent, with_mcp_transport

if TYPE_CHECKING:
    from harness.writers import ResultWriter


def caller_folder() -> Path:
    """The folder the harness was started from (`python -m harness run`, pytest): the agent's working folder."""
    try:
        return Path.cwd()
    except FileNotFoundError:
        raise HarnessError("the current folder no longer exists (removed after the harness started): the agent "
                           "runs in the caller's folder and relative paths start there; cd to a folder "
                           "that exists") from None


def new_evidence_dir(root: Path, scenario: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = root / f"{scenario}-{stamp}-{uuid.uuid4().hex[:6]}"
    path.mkdir(parents=True)
    return path


def run_scenario(scenario: Scenario, *, agent: str | ContainerAgent | None = None, evidence_root: Path,
                 proxy: Any = None, pool: Any = None, keep_evidence: str = "all",
                 black_box: bool = False, agent_log: str | None = None,
                 limits: Mapping[str, int] | None = None, agent_timeout: float | None = None,
                 writers: Sequence[ResultWriter] | None = None, sandbox: str | None = None,
                 mcp_transport: str | None = None) -> ScenarioResult:
    """Run `scenario` with `agent` (default: the scenario's, else the reference agent) and judge it. `agent`: a
    command, run as a process, or a ``ContainerAgent``, each run a container (``harness.containers.agent``).

    `agent_log`: what the agent writes, when not what the scenario says (`otel`: a trace-only agent's spans).
    `limits`: evidence limits (harness.limits) over the scenario's own `limits`, e.g. `{"operations": 500}`.
    `agent_timeout`: the agent's wall-clock limit in seconds, over the scenario's `agent_timeout_seconds`.
    `mcp_transport`: how the agent reaches every MCP destination (http | stdio), over what each declares.
    `sandbox`: how a process agent is confined, one of ``harness.sandbox.SANDBOX_SETTINGS`` (default:
    ``HARNESS_SANDBOX``, else ``auto``: bubblewrap where it works); each run's verdict says which it got.

    `keep_evidence`: "all" keeps every run's evidence folder, "failed" deletes it when the run passed.
    `writers`: what is written of the result into a kept folder (``harness.writers``; default
    ``evidence_writers()``: verdict.json, a failed run's report.html, verdict.txt); the engine renders nothing.
    `black_box`: judge the run from the proxy journal and the ledger alone, as for a scenario whose
    `agent_log` is `none` (a program that writes no audit log); `context.json` keeps the mode, so
    `check` judges the folder the same way.

    Destinations come from `pool` (default: this process's warm pool) and the proxy is `proxy`
    (default: this process's shared embedded mitmproxy): start-up is paid once per process.

    SIGINT and SIGTERM stop the run (``harness.interrupt``): its evidence is saved, marked interrupted (never
    judged), and ``interrupt.Interrupted`` names the folder; a second signal stops at once.
    """
    if agent_timeout is not None:
        if not agent_timeout > 0:
            raise HarnessError(f"the agent's time limit must be a number of seconds above 0, got {agent_timeout!r}")
        scenario = scenario.model_copy(update={"agent_timeout_seconds": float(agent_timeout)})
    if mcp_transport is not None:
        scenario = with_mcp_transport(scenario, mcp_transport)
    confined = choose_sandbox(sandbox)  # a setting that cannot be had is an error before anything starts
    with interrupt.handling():
        return _run_scenario(scenario, agent=agent, evidence_root=evidence_root, proxy=proxy, pool=pool,
                             keep_evidence=keep_evidence, black_box=black_box, agent_log=agent_log, limits=limits,
                             writers=writers, sandbox=confined)


def _run_scenario(scenario: Scenario, *, agent: str | ContainerAgent | None, evidence_root: Path, proxy: Any,
                  pool: Any, keep_evidence: str, black_box: bool, agent_log: str | None,
                  limits: Mapping[str, int] | None, writers: Sequence[ResultWriter] | None,
                  sandbox: Sandbox) -> ScenarioResult:
    if agent_log is not None and agent_log != scenario.agent_log:
        if agent_log not in AGENT_LOGS:
            raise HarnessError(f"agent_log {agent_log!r} is not one of {', '.join(AGENT_LOGS)}")
        scenario = scenario.model_copy(update={"agent_log": agent_log})
    chosen = chosen_agent(agent, None, scenario.agent, default=REFERENCE_AGENT)
    assert chosen is not None  # the default is one
    label = agent_label(chosen)
    # the agent works in the caller's folder, so that `--agent "python my_agent.py"` finds its file; every
    # path handed to it (intents, audit log, state dir, CA) is absolute, so it holds wherever the agent looks
    workdir = caller_folder()
    evidence_dir = new_evidence_dir(Path(evidence_root).resolve(), scenario.name)
    layout = EvidenceLayout(evidence_dir)
    contracts = {name: contract.to_dict() for name, contract in scenario.contracts().items()}
    canaries = {name: f"hsk_canary_{secrets_module.token_hex(12)}" for name in scenario.destinations}
    intents = [intent.model_dump() for intent in scenario.intents]
    keys = ContextKey
    context: dict[str, Any] = {
        # written first and marked complete last: a run stopped in between (killed, crashed) is known
        # incomplete, and is never judged as if its evidence were whole
        COMPLETENESS_KEY: {keys.COMPLETE: False},
        keys.SCENARIO: scenario.name,
        keys.SCENARIO_FILE: str(scenario.source) if scenario.source else None,
        keys.DESTINATIONS: {name: {"spec": spec.model_dump(mode="json"), "contract": contracts[name]}
                            for name, spec in scenario.destinations.items()},
        keys.INTENTS: intents,
        keys.SECRETS: {env_suffix(name): canary for name, canary in canaries.items()},
        keys.AGENT: {keys.COMMAND: label, keys.CWD: str(workdir), keys.EXIT_STATUS: None, keys.TIMED_OUT: False,
                     **_container_record(chosen)},
        keys.EXPECT: expectations_of(scenario),
        keys.AGENT_LOG: scenario.agent_log,
        keys.MODE: BLACK_BOX_MODE if black_box or scenario.agent_log == "none" else EVENTS_MODE,
        # what the run was set to do, as declared: `reproduce` rebuilds the position the agent was put in from it
        keys.FAULTS: [rule.model_dump(mode="json", exclude_defaults=True) for rule in scenario.faults],
        keys.RESTART_AGENT: scenario.restart_agent.model_dump() if scenario.restart_agent else None,
        keys.RESTART_DESTINATIONS: (scenario.restart_destinations.model_dump() if scenario.restart_destinations
                                    else None),
        keys.PROXY: scenario.proxy.model_dump(mode="json"),
        keys.AGENT_TIMEOUT: scenario.agent_timeout_seconds,
        keys.NOT_APPLICABLE: dict(scenario.not_applicable),
        # how much of the agent's log is read to judge it; kept, so that `check` judges the folder alike
        LIMITS_KEY: run_limits(scenario, limits).to_dict(),
    }
    write_json_file(layout.context, context)
    write_json_file(layout.intents, {"intents": intents, "destinations": contracts})
    layout.state_dir.mkdir()
    # the key the run's evidence is sealed with: in memory (and the proxy's, over its pipe) while the agent runs
    seal = new_run_key(evidence_dir)

    def mark_interrupted(signal_name: str) -> None:  # in the signal handler: the folder says why, whatever follows
        write_json_file(layout.context, {**context, COMPLETENESS_KEY: {
            ContextKey.COMPLETE: False, INTERRUPTED_KEY: interrupt.describe_signal(signal_name)}})

    with interrupt.when_signalled(mark_interrupted):
        return _run_and_save(scenario, chosen, label, workdir, layout, context, canaries, pool, proxy,
                             keep_evidence, writers, sandbox, seal)


def _run_and_save(scenario: Scenario, chosen: str | ContainerAgent, label: str, workdir: Path,
                  layout: EvidenceLayout, context: dict[str, Any], canaries: dict[str, str], pool: Any, proxy: Any,
                  keep_evidence: str, writers: Sequence[ResultWriter] | None, sandbox: Sandbox,
                  seal: tuple[bytes, str]) -> ScenarioResult:
    """Start the destinations and the proxy, run the agent, save every source (``_teardown``) and judge."""
    from fake_destinations.host import DestinationError
    from fake_destinations.ledger import count_effects
    from harness.containers.service import acquire_destinations, release_destinations
    from harness.proxy.host import ProxyHost, ProxyHostError

    evidence_dir = layout.folder
    timings: dict[str, float] = {}
    runs: list[AgentRun] = []
    t0 = time.perf_counter()
    host = None
    try:
        # the fake destinations from the warm pool; a team's own services (image:) started for this run alone
        host = acquire_destinations(pool or destination_pool(), scenario.destinations, evidence_folder=evidence_dir)
        proxy = proxy or ProxyHost.shared()
    except (DestinationError, ProxyHostError, ContainerError) as exc:
        release_destinations(host, evidence_dir)
        raise HarnessError(f"scenario {scenario.name}: cannot start the harness: {exc}\n"
                           f"evidence so far: {evidence_dir}") from None
    except BaseException as exc:  # a signal while starting: nothing ran, the folder says why
        release_destinations(host, evidence_dir)
        context[COMPLETENESS_KEY] = {ContextKey.COMPLETE: False, INTERRUPTED_KEY: interrupt.reason(exc)}
        write_json_file(layout.context, context)
        if isinstance(exc, KeyboardInterrupt):
            raise _interrupted(exc, evidence_dir) from None
        raise
    live_ledger = host.ledger_path
    agent_running = False
    stopped_by: str | None = None  # why the run ended before its agent did (a signal): never judged then
    start_failed: AgentError | None = None
    try:
        # this run's secret between the proxy and the destinations: what does not cross the proxy is refused,
        # whoever sends it (this run's agent, another run's, any process of the user)
        gate = secrets_module.token_hex(16)
        host.gate(gate)
        http_routes = {n: u for n, u in host.urls.items() if u.startswith("http")}
        routes = proxy.configure(http_routes, scenario.faults, layout.journal,
                                 secrets=canaries, mode=scenario.proxy.mode, seed=scenario.proxy.seed,
                                 har_path=layout.traffic_har, flows_path=layout.traffic_flows, gate=gate,
                                 seal=seal)
        urls = {**host.urls, **routes.urls}
        # the scenario's own names first: the contract's and the proxy mode's win (HARNESS_* are refused at load)
        env = {**_destination_env(scenario, urls, canaries), **agent_env(layout, urls, canaries), **routes.env,
               **_mcp_servers_env(scenario, urls, routes.env.get("HTTP_PROXY"))}
        timings["startup"] = time.perf_counter() - t0

        t1 = time.perf_counter()
        agent_running = isinstance(chosen, ContainerAgent)  # a ContainerError from here on is the agent's container
        start_agent = _agent_runner(chosen, env, timeout=scenario.agent_timeout_seconds, cwd=workdir,
                                    stdout=layout.agent_stdout, stderr=layout.agent_stderr,
                                    ca_cert=routes.ca_cert, sandbox=sandbox, destinations=host)
        with _restart_when(host, live_ledger, scenario.restart_destinations) as restarts:
            if scenario.restart_agent is not None:
                wanted = scenario.restart_agent.after_effects
                runs.append(start_agent(kill_when=lambda: count_effects(live_ledger) >= wanted))
            runs.append(start_agent())
        context[ContextKey.DESTINATION_RESTARTS] = restarts
        timings["agent"] = time.perf_counter() - t1
    except (DestinationError, ProxyHostError) as exc:
        raise HarnessError(f"scenario {scenario.name}: the harness failed mid-run: {exc}\n"
                           f"evidence so far: {evidence_dir}") from None
    except ContainerError as exc:  # the agent's image is missing, the engine refused a container, a service failed
        what = "cannot run the agent's container" if agent_running else "the harness failed mid-run"
        raise ContainerError(f"scenario {scenario.name}: {what}: {exc}\n"
                             f"evidence so far: {evidence_dir}") from None
    except AgentError as exc:  # the agent's command cannot start: its failure, judged as such (X001), then said
        context[ContextKey.AGENT][ContextKey.START_ERROR] = str(exc)
        start_failed = exc
    except BaseException as exc:  # Ctrl-C, SIGTERM (harness.interrupt), a bug: said first, then saved
        stopped_by = interrupt.reason(exc)
        context[COMPLETENESS_KEY] = {ContextKey.COMPLETE: False, INTERRUPTED_KEY: stopped_by}
        write_json_file(layout.context, context)
        if isinstance(exc, KeyboardInterrupt):
            raise _interrupted(exc, evidence_dir) from None
        raise
    finally:
        t2 = time.perf_counter()
        with interrupt.deferred():  # a first signal now waits for the evidence to be saved
            effects = _teardown(scenario, host, proxy, layout, context, runs, stopped_by, seal)
        timings["teardown"] = time.perf_counter() - t2

    result = judge_run(evidence_dir, scenario=scenario.name, label=label, expect=context[ContextKey.EXPECT], runs=runs,
                       effects=effects, timings=timings, keep_evidence=keep_evidence, agent_log=scenario.agent_log,
                       writers=writers, seal=seal)
    if start_failed is not None:  # the folder has its verdict; the front end says why nothing ran (exit 2)
        raise AgentError(f"{start_failed}\nevidence: {evidence_dir}") from None
    return result


def _interrupted(exc: KeyboardInterrupt, evidence_dir: Path) -> interrupt.Interrupted:
    """What a run stopped by a signal raises: an ``Interrupted`` naming its folder."""
    signal_name = exc.signal_name if isinstance(exc, interrupt.Interrupted) else "SIGINT"
    return interrupt.Interrupted(signal_name, evidence_dir)


def _teardown(scenario: Scenario, host: Any, proxy: Any, layout: EvidenceLayout, context: dict[str, Any],
              runs: list[AgentRun], stopped_by: str | None, seal: tuple[bytes, str]) -> list[dict[str, Any]]:
    """Close every source and save it into the folder, the agent having exited (or been stopped): the journal,
    the checkpoints, the ledger held to its writers' account; returns the ledger's effects. Each step that fails
    is said in the completeness mark (``TEARDOWN_PROBLEMS_KEY``) and the next still runs: the ledger is saved
    whatever came before it. The folder is marked complete last, and only if nothing stopped the run
    (``stopped_by``, a signal meanwhile) and every step held; then context.json is sealed and the run's key kept
    (``seal``: never in the folder)."""
    from fake_destinations.host import DestinationError
    from fake_destinations.ledger import save_run_ledger, verify_ledger
    from harness.containers.service import final_probe, release_destinations, seal_destinations
    from harness.journal import read_journal

    evidence_dir = layout.folder
    key, kind = seal
    problems: list[str] = []  # what the teardown could not do: each a reason the run is INCOMPLETE
    effects: list[dict[str, Any]] = []

    def attempt(what: str, step: Callable[[], Any], default: Any = None) -> Any:
        try:
            return step()
        except Exception as exc:  # noqa: BLE001 - said in the folder, never a lost ledger
            problems.append(f"{what}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            return default

    try:
        if attempt("proxy journal: the fault proxy did not finish (its journal is not sealed)",
                   lambda: proxy.finish(timeout=PROXY_FINISH_SECONDS), default=False) is False:
            abandon = getattr(proxy, "abandon", None)  # a stopped or dead proxy: the next run gets a new one
            if abandon is not None:
                attempt("fault proxy", abandon)
        journal_seal = getattr(proxy, "journal_seal", None)
        last = runs[-1] if runs else None
        context[ContextKey.AGENT].update({ContextKey.EXIT_STATUS: last.exit_status if last else None,
                                          ContextKey.TIMED_OUT: any(r.timed_out for r in runs),
                                          ContextKey.RUNS: [r.__dict__ for r in runs]})
        attempt("context", lambda: write_json_file(layout.context, context))
        # before the copy: what the ledger cannot hold yet. A slow destination (processing_delay_seconds)
        # may still be committing a write the agent gave up on: wait for it, as long as one write takes
        busy = _writes_in_progress(host, within=_longest_write(scenario))
        # the agent has exited: its log (and its trace, which it may write whatever agent_log says) is complete;
        # one over the log's bound is measured, not read (it is not judged either)
        bound = run_limits(scenario).agent_log_bytes
        made = attempt("agent log: its checkpoint", lambda: write_checkpoints(
            evidence_dir, key, kind, {layout.agent_log.name: CHECKPOINT_FILE,
                                      layout.trace.name: layout.trace_checkpoint.name},
            limits={layout.agent_log.name: bound, layout.trace.name: bound}), default={})
        if journal_seal is not None:
            attempt("proxy journal: its checkpoint", lambda: write_checkpoint(layout.journal_checkpoint, journal_seal))
            made[layout.journal.name] = layout.journal_checkpoint.name
        elif getattr(proxy, "journal_seal", False) is None:
            problems.append("proxy journal: the fault proxy signed none of it, so it cannot be shown to be what the "
                            "proxy wrote")
        # a team's services: their probes' last listing into the live ledger, flow ids from the closed journal
        probe_failures, probes = attempt("proxy journal: unreadable for the services' probes",
                                         lambda: final_probe(host, read_journal(layout.journal)), default=({}, {}))
        if probes:
            context[PROBE_KEY] = probes
        # each writer's own account of the rows it wrote, then the copy held to it: an agent that edited,
        # cut or cleared the ledger file is found here, and the run is not judged (fake_destinations.ledger)
        tampering: list[str] = []
        try:
            written: dict[str, dict[str, int]] | None = seal_destinations(host)
        except DestinationError as exc:
            written, tampering = None, [f"the destinations could not say what they wrote: {exc}".splitlines()[0]]
        # the pooled process keeps serving other scenarios: keep a copy of this run's ledger
        effects = attempt("effect ledger: not saved", lambda: save_run_ledger(host.ledger_path, evidence_dir),
                          default=[])
        if written is not None:
            tampering = list(host.seal_problems) + attempt(
                "effect ledger: not verified", lambda: verify_ledger(layout.ledger_db, host.ledger_key, written),
                default=[])
        made |= attempt("effect ledger: its checkpoint", lambda: write_checkpoints(
            evidence_dir, key, kind, {LEDGER_DUMP_FILE: LEDGER_CHECKPOINT_FILE}), default={})
        if busy:  # its late commits must not land in the next scenario's ledger: the pool starts a fresh one
            host.stop()
        # a team's containers and their network, never pooled (the reaper takes what cannot go now)
        left = release_destinations(host, evidence_dir)
        if left:
            context[ContextKey.CONTAINERS_LEFT] = left
        # a signal while saving is held until here (interrupt.deferred): the run did not end as it should
        stopped_by = stopped_by or (interrupt.describe_signal(signal_name) if (signal_name := interrupt.pending())
                                    else None)
        # the very last write: every source (log, journal, ledger, context) is closed and on disk
        context[COMPLETENESS_KEY] = {
            ContextKey.COMPLETE: stopped_by is None and not problems, ContextKey.SAVED: True,
            ContextKey.WRITES_IN_PROGRESS: busy, CHECKPOINTS_KEY: made,
            LEDGER_SEAL_KEY: tampering, **({INTERRUPTED_KEY: stopped_by} if stopped_by else {}),
            **({TEARDOWN_PROBLEMS_KEY: problems} if problems else {}),
            **({PROBE_FAILURES_KEY: probe_failures} if probe_failures else {})}
        write_json_file(layout.context, context)
        write_checkpoints(evidence_dir, key, kind, {layout.context.name: layout.context_checkpoint.name})
        keep_run_key(evidence_dir, key, kind)  # only now, the agent long gone: a later `check` verifies with it
    finally:
        release_destinations(host, evidence_dir)  # after a failure too (once released, nothing to do)
    return effects


PROXY_FINISH_SECONDS = 10.0  # how long the proxy waits for flows still in flight once the agent has exited


@collector_paused()  # judged and written: a large run's verdict is millions of objects
def judge_run(evidence_dir: Path, *, scenario: str, label: str, expect: Mapping[str, Any], runs: list[AgentRun],
              effects: list[dict[str, Any]], timings: dict[str, float] | None = None, keep_evidence: str = "all",
              agent_log: str | None = None, writers: Sequence[ResultWriter] | None = None,
              seal: tuple[bytes, str] | None = None) -> ScenarioResult:
    """What the engine does once the agent has exited and every source is on disk: read the evidence folder,
    judge it by the rules and the scenario's expectations (``expect``, with the agent's ``runs`` and the ledger's
    ``effects``), and hand the result to ``writers`` (default ``harness.writers.evidence_writers()``: verdict.json,
    a failed run's investigation page, verdict.txt), unless its folder is not kept. A run whose evidence is
    incomplete is not judged. ``seal``: the run's key, which signs the verdict.json written (``harness report``
    prints it only if it verifies)."""
    from harness.checker import judge
    from harness.evidence import load_evidence

    timings = {} if timings is None else timings
    layout = EvidenceLayout(evidence_dir)
    t3 = time.perf_counter()
    evidence = load_evidence(evidence_dir)
    if agent_log == OTEL_AGENT_LOG:  # what the checker judged, readable beside the trace it came from
        write_trace_events(evidence, layout.trace_events)
    judged = judge(evidence, expect=expect, runs=runs, effects=effects)  # in the run's mode (context.json)
    timings["check"] = time.perf_counter() - t3
    result = ScenarioResult(scenario, label, judged.passed, judged.verdict, evidence_dir, runs, timings,
                            judged.expectation_failures, incomplete=judged.incomplete, facts=judged.facts)
    passed = result.passed
    if passed and keep_evidence == "failed":
        remove_tree(evidence_dir)  # the agent's state dir in it may be a tree of any depth
        forget_run_key(evidence_dir)
        result.evidence_kept = False
    else:
        if writers is None:
            from harness.writers import evidence_writers

            writers = evidence_writers()
        for write in writers:
            write(result, evidence)
        if seal is not None and layout.verdict_json.exists():
            write_checkpoints(evidence_dir, *seal, {VERDICT_JSON_FILE: layout.verdict_checkpoint.name})
    return result


def _agent_runner(agent: str | ContainerAgent, env: dict[str, str], *, timeout: float, cwd: Path, stdout: Path,
                  stderr: Path, ca_cert: Path | None = None, sandbox: Sandbox | None = None,
                  destinations: Any = None) -> Callable[..., AgentRun]:
    """``start_agent(kill_when=None) -> AgentRun``: one run of the agent, a process or a container (one path
    for the engine either way). A process runs in ``sandbox`` (default ``choose_sandbox()``), where the
    evidence root (this run's harness files, other runs'), the proxy's CA folder (its key) and the harness's
    own places are out of sight (``harness.sandbox``); a container shows the contract's files alone
    (``harness.containers.agent``), and ``destinations`` are told its id (what it sends past the proxy is the
    agent's)."""
    if isinstance(agent, ContainerAgent):
        from harness.containers.agent import run_container_agent

        return functools.partial(run_container_agent, agent, env, timeout=timeout, stdout=stdout, stderr=stderr,
                                 readable=[ca_cert] if ca_cert else [],
                                 on_start=destinations.agent_containers if destinations is not None else None)
    evidence_root = stdout.parent.parent  # stdout is kept in the run's folder, whose parent holds every run's
    hidden = hidden_paths(evidence_root, [ca_cert.parent] if ca_cert else [])
    return functools.partial(run_agent, agent, env, timeout=timeout, cwd=cwd, stdout=stdout, stderr=stderr,
                             sandbox=sandbox or choose_sandbox(), hidden=hidden,
                             readable=[ca_cert] if ca_cert else [])


def _destination_env(scenario: Scenario, urls: Mapping[str, str], secrets: Mapping[str, str]) -> dict[str, str]:
    """The variables the destinations' ``agent_env`` sets for this run (no two set one name: the loader refuses
    it)."""
    env: dict[str, str] = {}
    for name, spec in scenario.destinations.items():
        env |= destination_env(name, spec.agent_env, url=urls[name], secret=secrets[name],
                               base_path=getattr(spec.api, "base_path", ""))  # an api declaration's, when it has one
    return env


def _mcp_servers_env(scenario: Scenario, urls: Mapping[str, str], proxy: str | None) -> dict[str, str]:
    """The command that starts each stdio MCP destination's server (``mcp_transport: stdio``): a relay to its
    endpoint through the fault proxy, so its calls are journaled and faulted as over HTTP."""
    from fake_destinations import mcp_stdio  # stdlib only until it runs

    return {mcp_server_env_name(name): shlex.join(mcp_stdio.command(urls[name].rstrip("/") + (spec.endpoint or
                                                                                            MCP_ENDPOINT), proxy=proxy))
            for name, spec in scenario.destinations.items() if spec.mcp_transport == MCP_STDIO}


def _container_record(agent: str | ContainerAgent) -> dict[str, Any]:
    """What ``context.json`` keeps of a container agent beside its label: the image, the command run in it
    (None: the image's own) and the names of the variables it set (not their values)."""
    if not isinstance(agent, ContainerAgent):
        return {}
    return {ContextKey.IMAGE: agent.image, ContextKey.CONTAINER_COMMAND: agent.argv,
            ContextKey.CONTAINER_ENV: sorted(agent.env),
            ContextKey.CWD: None}  # the image's working folder, not the caller's


def run_limits(scenario: Scenario, overrides: Mapping[str, int] | None = None) -> EvidenceLimits:
    """The evidence limits of a run: the harness's defaults, the scenario's `limits`, then `overrides` (a front
    end's `--limit NAME=N`). A bad override is a HarnessError naming it."""
    try:
        return EvidenceLimits.from_dict(scenario.limits.given()).with_values((overrides or {}).items())
    except ValueError as exc:
        raise HarnessError(f"scenario {scenario.name}: {exc}") from None


def write_trace_events(evidence: Any, path: Path) -> None:
    """The events read from the agent's trace, line n the item findings call ``agent.trace.events.ndjson:n``
    (a span the reader could not map is a line ``{"problem": ...}``, a line it could not read is kept as it was)."""
    path.write_text("".join(text + "\n" for text in evidence.raw_log), encoding="utf-8")


_POOL: Any = None


def destination_pool() -> Any:
    """This process's warm destination pool, stopped at exit (or by `close_destination_pool`)."""
    global _POOL
    if _POOL is None:
        from fake_destinations.host import DestinationPool

        _POOL = DestinationPool()
        atexit.register(close_destination_pool)
    return _POOL


def close_destination_pool() -> None:
    """Stop the pool's processes; a Ctrl-C meanwhile does not cut it short (a second one stops at once)."""
    global _POOL
    if _POOL is not None:
        with interrupt.deferred(raise_after=False):
            _POOL.close()
        _POOL = None


def expectations_of(scenario: Scenario) -> dict[str, Any]:
    """The scenario's own expectations as data (kept in context.json, so ``check`` applies them too)."""
    return {"states": scenario.expect.allowed_states(), "effects": dict(scenario.expect.effects),
            "agent_timeout_seconds": scenario.agent_timeout_seconds}


@contextlib.contextmanager
def _restart_when(host: Any, ledger: Path, restart: Any) -> Iterator[list[float]]:
    """While the block runs, crash and restart the destinations once the ledger holds enough effects."""
    from fake_destinations.ledger import count_effects

    restarts: list[float] = []
    if restart is None:
        yield restarts
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.02):
            if count_effects(ledger) >= restart.after_effects:
                began = time.perf_counter()
                host.restart()
                restarts.append(time.perf_counter() - began)
                return

    watcher = threading.Thread(target=watch, name="destination-restart", daemon=True)
    watcher.start()
    try:
        yield restarts
    finally:
        done.set()
        watcher.join(timeout=30)


MAX_WRITE_WAIT = 5.0  # the teardown waits at most this long for a slow destination's writes (then: INCOMPLETE)


def _longest_write(scenario: Scenario) -> float:
    longest = max((spec.processing_delay_seconds for spec in scenario.destinations.values()), default=0.0)
    return min(longest, MAX_WRITE_WAIT)


def _writes_in_progress(host: Any, *, within: float = 0.0) -> dict[str, list[str]]:
    """Per destination, the writes it was still processing when the run ended, once they had `within`
    seconds to finish (the effects of those left come after the ledger copy: that evidence is incomplete)."""
    from fake_destinations.host import DestinationError

    deadline = time.monotonic() + within + 0.5 if within else 0.0
    while True:
        try:
            in_flight = host.state().get("in_flight", {})
        except DestinationError as exc:
            return {"(destinations)": [f"cannot ask: {exc}".splitlines()[0]]}
        busy = {name: list(keys) for name, keys in in_flight.items() if keys}
        if not busy or time.monotonic() >= deadline:
            return busy
        time.sleep(0.02)
