"""Command line: `python -m harness {run,audit,verify,check,report,explore,matrix,reproduce,scenarios,schema,api,images,
containers}`.

A thin front end over the engine, the checker and the offline audit. Exit status (``EXIT_STATUS_HELP``):
0 all healthy / passed, 1 a verdict failed (the agent is wrong), 2 unusable input or usage (with a
message naming the file and line), 3 incomplete evidence (``run``, ``check``: the harness lost
evidence of a run, so it gives no verdict on the agent).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TextIO, cast

from harness.contract import (
    AGENT_LOGS,
    CHECKPOINT_FILE,
    CHECKPOINT_KEY_FILE_ENV,
    MCP_TRANSPORTS,
    MITMPROXY_TOOLS,
    PROXY_PYTHON_ENV,
    TRACE_FILE_ENV,
    agent_option_problem,
)
from harness.errors import EvidenceError, HarnessError
from harness.explore_defaults import (
    DATABASE_FOLDER,
    DEFAULT_CLIENT_TIMEOUT,
    DEFAULT_EXAMPLES,
    DEFAULT_MAX_FAULTS,
    DEFAULT_MAX_SHRINK_RUNS,
)
from harness.interrupt import Interrupted
from harness.limits import BLOCKS_SHOWN, FINDINGS_SHOWN, collector_paused, parse_limit

if TYPE_CHECKING:
    from harness.audit.output import KeptVerdicts
    from harness.project import Project

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_INCOMPLETE = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports it
IMAGE_KINDS = ("base", "runtime", "harness", "ssh-worker")  # harness.containers.images.ENSURE's keys, in build order
BLACK_BOX_HELP = ("judge from the proxy journal and the effect ledger alone, for a program that writes no audit "
                  "log (as a scenario's agent_log: none does; docs/checker.md, 'Black-box mode')")
OTEL_OUT_HELP = ("also append the verdict to FILE as OpenTelemetry spans (OTLP JSON lines, the format the harness "
                 "reads; needs the otel extra; docs/otel.md)")
AGENT_IMAGE_HELP = ("run the agent in a container of IMAGE (present on the Docker engine; the harness never pulls), "
                    "host networking, the evidence folder mounted at its own path: --agent is the command run in it "
                    "(default: the image's own); replaces the scenario's agent; docs/containers.md")
FINDINGS_SHOWN_HELP = ("findings shown in full in the text report (default {default}; 0: all of them): past that, or "
                       "past {blocks} operations, the findings are counted per rule and the first of each rule, "
                       "then the first ones, are shown; verdict.json and --format json keep every one")
LIMIT_HELP = ("read at most N of the agent's log to judge a run, over the scenario's own limits (repeatable; NAME: "
              "agent_log_bytes, default 256 MiB; line_bytes, default 1 MiB; operations, default 100000); a log "
              "beyond one is not judged (INCOMPLETE, exit status 3) and stays on disk; docs/checker.md, 'Limits'")
EXIT_STATUS_HELP = ("exit status: 0 passed / healthy; 1 a verdict failed (the agent is wrong); 2 unusable input "
                    "or usage; 3 incomplete evidence (run, check: the harness lost evidence of a run, e.g. it was "
                    "killed, so the agent is not judged)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness",
        description="Fault-injection harness for agent retry behaviour.", epilog=EXIT_STATUS_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run scenarios against an agent and print the verdict",
                         epilog="exit status: 0 every run passed; 1 a run failed; 2 usage or a bad scenario; "
                                "3 no run failed but the harness lost evidence of one (INCOMPLETE)")
    run.add_argument("scenario", nargs="+", help="scenario name, glob, 'all', or path to a .yaml file")
    run.add_argument("--agent", type=_agent_command,
                     help="agent command, run in the current folder (default: the scenario's, else the reference "
                          "agent); an empty value is an error")
    run.add_argument("--agent-image", type=_agent_image, metavar="IMAGE", help=AGENT_IMAGE_HELP)
    run.add_argument("--evidence-dir", type=Path, default=Path("evidence"),
                     help="folder that keeps each run's evidence (default: ./evidence)")
    run.add_argument("--format", choices=("text", "json"), default="text")
    run.add_argument("--keep-evidence", choices=("all", "failed"), default="all",
                     help="keep the evidence of every run (default) or only of failed runs")
    run.add_argument("--black-box", action="store_true", help=BLACK_BOX_HELP)
    run.add_argument("--agent-timeout", type=_positive_float, default=None, metavar="SECONDS",
                     help="the agent's wall-clock limit (default: each scenario's agent_timeout_seconds); an agent "
                          "still running then is stopped, its evidence judged (X001 names the limit)")
    run.add_argument("--mcp-transport", choices=MCP_TRANSPORTS, default=None,
                     help="reach every MCP destination over this transport (default: what each declares, its "
                          "mcp_transport; http unless stdio): the catalogue's MCP scenarios run over either")
    run.add_argument("--no-sandbox", action="store_true",
                     help="run the agent unsandboxed (as HARNESS_SANDBOX=off; default: in bubblewrap where it works); "
                          "the verdict says so, and what that gives up")
    run.add_argument("--agent-log", choices=AGENT_LOGS, default=None,
                     help="what the agent writes, instead of the scenario's agent_log: otel for a trace-only agent "
                          f"(OpenTelemetry spans in ${TRACE_FILE_ENV}, judged by the same rules; docs/otel.md)")
    run.add_argument("--otel-out", type=Path, metavar="FILE", help=OTEL_OUT_HELP)
    _add_findings_shown(run)
    _add_limit(run)

    audit = sub.add_parser("audit", help="audit an agent's event log (or an effect-ledger NDJSON, or an "
                                         "OpenTelemetry trace) offline",
                           epilog="exit status: 0 every operation healthy and no finding; 1 a finding, or an "
                                  "operation not healthy; 2 usage, or a file that cannot be read or holds no "
                                  "usable line; 130 interrupted")
    audit.add_argument("file", type=Path, help="the log, or a glob of logs (quoted: 'logs/2026-12-01/*.ndjson'), "
                                               "audited as one in name order")
    audit.add_argument("--format", choices=("text", "json", "otlp"), default="text",
                       help="the report's format; otlp: FILE is an OpenTelemetry trace (OTLP JSON), reported as text "
                            "(--input otlp --format json for JSON)")
    audit.add_argument("--input", choices=("events", "otlp"), default=None,
                       help="what FILE holds: events (an audit log; the default) or otlp (OTLP JSON spans, read as "
                            "events: docs/otel.md)")
    audit.add_argument("-q", "--quiet", action="store_true", help="no progress line (a large file shows one on a "
                                                                  "terminal)")
    audit.add_argument("--engine", choices=("typed", "duckdb", "spark", "stream"), default="typed",
                       help="where it runs: typed (each line decoded once into typed records, the log read by one "
                            "process a core; the default), duckdb (embedded SQL), spark (a Spark session: --master; "
                            "docs/spark.md) or stream (line by line, this process alone); same verdicts")
    audit.add_argument("--workers", type=int, metavar="N", default=None,
                       help="with --engine typed: the processes that read the log (default: one a core, up to 4, "
                            "for a log of 16 MB or more; 1 for a smaller one)")
    audit.add_argument("--master", metavar="URL", default=None,
                       help="with --engine spark: the Spark master (local[2] by default, spark://host:7077, yarn, ...)")
    audit.add_argument("--html", type=Path, metavar="FILE",
                       help="also write the investigation report as HTML to FILE (pages beside it for a large log)")

    report = sub.add_parser(
        "report", help="the investigation report of an evidence folder: text, and HTML with --html",
        epilog="exit status: 0 the run passed; 1 it failed; 2 not an evidence folder (or FILE cannot be written); "
               "3 INCOMPLETE: the harness lost evidence of that run")
    report.add_argument("folder", type=Path, help="an evidence folder (its verdict.json, else judged again)")
    report.add_argument("--html", type=Path, metavar="FILE",
                        help="write the HTML report to FILE (one section per operation; pages beside it for a "
                             "large run)")
    _add_findings_shown(report)

    verify = sub.add_parser("verify", help="verify the hash chain of an audit log (or an evidence folder's)",
                            description="What each mode proves: docs/checker.md, 'Tamper evidence'.")
    verify.add_argument("file", type=Path, help="an audit log, or an evidence folder (uses its checkpoint)")
    heads = verify.add_mutually_exclusive_group()
    heads.add_argument("--head", metavar="SEQ:HASH",
                       help="last known head: the log may have grown since; later events are reported uncovered")
    heads.add_argument("--final-head", metavar="SEQ:HASH",
                       help="head of the finished log: any event after it is reported as appended")
    heads.add_argument("--checkpoint", type=Path, metavar="FILE",
                       help="a signed checkpoint (harness.chain.checkpoint); needs --key-file")
    verify.add_argument("--key-file", type=Path, metavar="K",
                        help=f"the checkpoint's key (default for a folder: ${CHECKPOINT_KEY_FILE_ENV}, "
                             "else the folder's per-run key)")

    check = sub.add_parser("check", help="judge an evidence folder again (after a run)",
                           epilog="exit status: 0 passed (the verdict and the scenario's expectations); "
                                  "1 failed; 2 not a usable evidence folder; 3 INCOMPLETE: the harness lost "
                                  "evidence of that run (which source and why is printed), so no verdict")
    check.add_argument("folder", type=Path)
    check.add_argument("--format", choices=("text", "json"), default="text")
    check.add_argument("--black-box", action="store_true",
                       help="judge the folder from its proxy journal and ledger alone, its audit log ignored "
                            "(default: as the run was judged; docs/checker.md, 'Black-box mode')")
    check.add_argument("--otel-out", type=Path, metavar="FILE", help=OTEL_OUT_HELP)
    _add_findings_shown(check)
    _add_limit(check)
    check.add_argument("--key-file", type=Path, metavar="K",
                       help="the key of the agent log's checkpoint, when the run used the operator's (default: "
                            f"${CHECKPOINT_KEY_FILE_ENV}); a log changed since its checkpoint is INCOMPLETE")

    explore = sub.add_parser(
        "explore", help="let Hypothesis search fault schedules over a scenario; shrink a failure to a reproducer",
        epilog="exit status: 0 no schedule made the agent fail; 1 one did (shrunk, written to --reproducer), or a "
               "failure was flaky; 2 usage or a bad scenario; 130 interrupted")
    explore.add_argument("scenario", help="the base scenario: a name or a path to a .yaml file (its destinations, "
                                          "contracts and intents are kept; its faults are replaced)")
    explore.add_argument("--agent", type=_agent_command,
                         help="agent command, run in the current folder (default: the scenario's, else the reference "
                              "agent)")
    explore.add_argument("--examples", type=_positive_int, default=DEFAULT_EXAMPLES,
                         help=f"schedules to draw (default {DEFAULT_EXAMPLES}); shrinking runs come on top")
    explore.add_argument("--seed", type=int, default=None,
                         help="fix the draws: the same seed, the same schedules (the example database is then left "
                              "out, as with Hypothesis' @seed)")
    explore.add_argument("--reproducer", type=Path, default=None, metavar="FILE",
                         help="where the shrunk failing scenario goes (default: found.yaml in the exploration's "
                              "evidence folder); further failures beside it as FILE.2.yaml...")
    explore.add_argument("--max-seconds", type=_positive_float, default=None,
                         help="stop drawing new schedules after this long (shrinking what was found winds down)")
    explore.add_argument("--max-shrink-runs", type=_positive_int, default=DEFAULT_MAX_SHRINK_RUNS,
                         help=f"runs spent shrinking (default {DEFAULT_MAX_SHRINK_RUNS})")
    explore.add_argument("--agent-timeout", type=_positive_float, default=None,
                         help="wall-clock limit of one agent run (default: the scenario's agent_timeout_seconds)")
    explore.add_argument("--client-timeout", type=_positive_float, default=DEFAULT_CLIENT_TIMEOUT,
                         help=f"the agent's own timeout, around which hold times are drawn (default "
                              f"{DEFAULT_CLIENT_TIMEOUT:g} s, the reference agent's)")
    explore.add_argument("--max-faults", type=int, choices=range(0, 7), default=DEFAULT_MAX_FAULTS, metavar="N",
                         help=f"proxy faults per schedule, 0-6 (default {DEFAULT_MAX_FAULTS})")
    explore.add_argument("--evidence-dir", type=Path, default=Path("evidence"),
                         help="folder that keeps the exploration's evidence (default: ./evidence)")
    explore.add_argument("--database", type=Path, default=None, metavar="DIR",
                         help=f"Hypothesis example database (default: ./{DATABASE_FOLDER}); without --seed it "
                              "replays the last failure first")
    explore.add_argument("--no-database", action="store_true", help="no example database (nothing replayed or saved)")
    explore.add_argument("--format", choices=("text", "json"), default="text")
    explore.add_argument("-q", "--quiet", action="store_true", help="no progress line")

    sub.add_parser("scenarios", help="list the scenarios of the catalogue")
    sub.add_parser("agents", help="list the bundled agents (the reference and every wrong one, with its flaw and "
                                  "the scenarios that catch it), each with the --agent command that runs it")
    coverage = sub.add_parser(
        "coverage", help="which scenarios exercise which checks and rows of the operation model",
        description="Run the reference agent over the catalogue and say, per check, which scenarios exercise it "
                    "(the reports' 'not exercised ... see' names come from this measurement).")
    coverage.add_argument("--write", action="store_true",
                          help="store the measurement as the package's catalogue_coverage.json")
    coverage.add_argument("--evidence", default=None, metavar="DIR",
                          help="where the runs' evidence goes (default: a temporary folder, removed after)")
    coverage.add_argument("-q", "--quiet", action="store_true", help="no announcement and no progress line")

    matrix = sub.add_parser(
        "matrix", help="run every agent against every scenario and print the table",
        description="Certify agents against the catalogue (or your scenario files): the bundled ones against their "
                    "expected outcomes, your own on their verdict; every cell also shows the effects committed, the "
                    "attempts on the wire and the key behaviour.",
        epilog="exit status: 0 every wrong agent caught where targeted, no false alarm, and every cell of your "
               "own agents passed; 1 otherwise (or a cell could not run); 2 usage or a bad scenario")
    matrix.add_argument("--agent", action="append", dest="agents", metavar="AGENT",
                        help="'reference', a wrong agent's name, your agent's command ('python my_agent.py', run in "
                             "the current folder) or LABEL=COMMAND to name its row (repeatable; default: the bundled "
                             "agents)")
    matrix.add_argument("--agent-image", type=_agent_image, metavar="IMAGE",
                        help="run every agent of the matrix in a container of IMAGE (present on the Docker engine; "
                             "never pulled): each --agent is the command run in it, the bundled agents as "
                             "'python3 -m harness.agents...' (the image needs the harness: "
                             "python -m harness images build runtime); docs/containers.md")
    matrix.add_argument("--scenario", action="append", dest="scenarios", metavar="NAME",
                        help="scenario name, glob, 'all', a .yaml file or a glob of files ('path/*.yaml') "
                             "(repeatable; default: all)")
    matrix.add_argument("--black-box", action="store_true", help=BLACK_BOX_HELP)
    matrix.add_argument("--markdown", type=Path, metavar="FILE",
                        help="also write the certification table (agent x scenario: verdict, effects, attempts, key "
                             "behaviour) as Markdown to FILE")
    matrix.add_argument("--json", type=Path, metavar="FILE", dest="json_file",
                        help="also write the matrix as JSON to FILE (what --format json prints)")
    matrix.add_argument("--html", type=Path, metavar="FILE", dest="html_file",
                        help="also write the certification matrix as a self-contained HTML page to FILE (agent x "
                             "scenario cells: verdict and rule codes, effects, attempts, key behaviour; the rates)")
    matrix.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    matrix.add_argument("--jobs", "-j", type=int, default=None,
                        help="scenario runs in parallel (default: CPU count, at most 4)")
    matrix.add_argument("--evidence-dir", type=Path, default=Path("evidence"),
                        help="evidence of the runs that failed (default: ./evidence)")
    matrix.add_argument("--format", choices=("text", "json"), default="text")

    reproduce = sub.add_parser(
        "reproduce", help="write the scenario that reproduces an incident (evidence folder, audit log, HAR, flow dump)",
        epilog="exit status: 0 written (the scenario loads); 2 not an incident this command reads, an unknown "
               "operation, or a scenario it cannot write")
    reproduce.add_argument("incident", type=Path,
                           help="an evidence folder, an audit log (ours or the article's effect-ledger NDJSON), a HAR "
                                "file, or a mitmproxy flow dump (mitmdump -w)")
    reproduce.add_argument("--output", "-o", type=Path, required=True, metavar="FILE",
                           help="the scenario file to write")
    reproduce.add_argument("--operation", metavar="ID",
                           help="reproduce this operation only (its intent and its faults)")
    reproduce.add_argument("--name", help="the scenario's name (default: reproduce_<incident>)")
    on_project = reproduce.add_mutually_exclusive_group()
    on_project.add_argument("--project", type=Path, default=None, metavar="FILE",
                            help="the project configuration (pyproject.toml with [tool.retry-harness], or "
                                 "retry-harness.toml) whose destinations the traffic lands on (default: the one "
                                 "that applies in the current folder)")
    on_project.add_argument("--no-project", action="store_true",
                            help="infer every destination from the traffic, whatever configuration applies here")

    api = sub.add_parser("api", help="generic destinations: an api declaration inferred from an OpenAPI document "
                                     "(docs/destinations.md, 'From an OpenAPI document')")
    api_actions = api.add_subparsers(dest="action", required=True, metavar="ACTION")
    from_openapi = api_actions.add_parser(
        "from-openapi", help="print the api declaration an OpenAPI 3.0/3.1 document describes, each inference "
                             "commented, for review",
        epilog="exit status: 0 printed; 2 a document that cannot be read, validated or inferred from, or a bad "
               "--override (the message names the file, the place in it and what is valid)")
    from_openapi.add_argument("document", type=Path, help="the OpenAPI document (YAML or JSON)")
    from_openapi.add_argument("--override", type=_override, action="append", default=[], metavar="KEY=VALUE",
                              help="say what the document cannot (repeatable): idempotency={style: ietf, header: "
                                   "X-Key}, client_reference=external_id, lookup=listTickets, lookup_param=ref, "
                                   "effect_ref={createTicket: body.ticket.id}, writes=[createTicket], "
                                   "retention_seconds=86400, lookup_lag_seconds=2; VALUE is read as YAML, a dotted "
                                   "KEY (idempotency.style=ietf) sets one key of a table")

    proxy = sub.add_parser(
        "proxy", help="run mitmproxy's own programs from the fault proxy's runtime, e.g. to open a run's traffic.mitm",
        description="mitmproxy lives in the fault proxy's own runtime (this interpreter when it has mitmproxy 11, "
                    f"else a venv made once under ~/.cache/retry-harness/; ${PROXY_PYTHON_ENV} to choose one), not "
                    "on your PATH. `proxy mitmweb -r traffic.mitm` opens a run's traffic in mitmproxy's web UI; "
                    "`proxy mitmdump -n -r traffic.mitm` prints it.",
        epilog="exit status: the program's own; 2 when the runtime cannot be found or made")
    proxy.add_argument("tool", choices=MITMPROXY_TOOLS, help="the program to run")
    proxy.add_argument("args", nargs=argparse.REMAINDER, help="its arguments, as mitmproxy's docs give them")

    schema = sub.add_parser("schema", help="print a published JSON Schema")
    schema.add_argument("which", choices=("scenario", "api", "audit-event"))

    images = sub.add_parser("images", help="build or list the images the harness makes itself (docs/containers.md)",
                            epilog="exit status: 0 done; 2 no Docker engine answers, or an image cannot be built")
    images_actions = images.add_subparsers(dest="action", required=True, metavar="ACTION")
    images_build = images_actions.add_parser(
        "build", help="build what is missing: the base (debootstrap, root), the runtime agents run on, the "
                      "harness's side (with the fault proxy); an image already built for this tree is kept")
    images_build.add_argument("which", nargs="?", choices=(*IMAGE_KINDS, "all"), default="all")
    images_actions.add_parser("list", help="the images of ours the Docker engine has")
    images_actions.add_parser("prune", help="remove our runtime and harness images (each source change makes new "
                                            "ones; a run builds the one it needs again); the base stays")

    containers = sub.add_parser("containers", help="list or remove the containers, networks and volumes the harness "
                                                   "made (labelled io.retry-harness)",
                                epilog="exit status: 0 done; 2 no Docker engine answers, or one cannot be removed")
    containers_actions = containers.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, what in (("list", "list ours (role, owner, run)"),
                         ("clean", "remove ours (force) and say what was removed")):
        parser_ = containers_actions.add_parser(action, help=f"{what}, whatever harness process made them")
        parser_.add_argument("--owner", help="only those of this harness process (the io.retry-harness.owner label, "
                                             "as `containers list` shows it)")
    return parser


def _add_findings_shown(command: argparse.ArgumentParser) -> None:
    command.add_argument("--findings-shown", type=_count, default=FINDINGS_SHOWN, metavar="N",
                         help=FINDINGS_SHOWN_HELP.format(default=FINDINGS_SHOWN, blocks=BLOCKS_SHOWN))


def _add_limit(command: argparse.ArgumentParser) -> None:
    command.add_argument("--limit", type=_limit, action="append", default=[], metavar="NAME=N", help=LIMIT_HELP)


def _limit(value: str) -> tuple[str, int]:
    """``--limit``'s type: ``NAME=N``, else a usage error naming the limits."""
    try:
        return parse_limit(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(kind: type[int] | type[float], expected: str) -> Callable[[str], Any]:
    """An argparse type: a finite number above 0 (whole numbers: at least 1), else a usage error naming it."""
    def parse(value: str) -> Any:
        try:
            number = kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {value!r}") from None
        if not 0 < number < float("inf"):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {value!r}")
        return number

    return parse


_positive_int = _positive(int, "a whole number of at least 1")


def _count(value: str) -> int:
    """An argparse type: a whole number of 0 or more, else a usage error naming it."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of 0 or more, got {value!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number of 0 or more, got {value!r}")
    return number
_positive_float = _positive(float, "a number of seconds above 0")


def _agent_image(value: str) -> str:
    """``--agent-image``'s type: an image reference; empty or blank is a usage error (exit 2)."""
    from harness.scenario import agent_image_problem

    problem = agent_image_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


def _agent_command(value: str) -> str:
    """``--agent``'s type: a command as shell words; empty or blank is a usage error (exit 2), not the default."""
    problem = agent_option_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM: the engine stopped what it started on the way out
        if isinstance(exc, Interrupted):
            print(f"interrupted: {exc}", file=sys.stderr)
            return 128 + exc.signal_number  # as a shell reports a process the signal ended
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `... | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def project_here() -> Project | None:
    """The project configuration that applies in the current folder (harness.project), or None."""
    from harness.engine import caller_folder
    from harness.project import find_project, load_project

    path = find_project(caller_folder())
    return load_project(path) if path is not None else None


def _run(args: argparse.Namespace) -> int:
    from harness.catalogue import NotApplicable, scenario_for
    from harness.colour import paint_for
    from harness.engine import caller_folder, run_scenario
    from harness.resources import catalogue_dir
    from harness.scenario import chosen_agent, resolve
    from harness.writers import VerdictText, evidence_writers

    project = project_here()
    dirs = [*(project.scenario_dirs if project else ()), caller_folder() / "scenarios", catalogue_dir()]
    paths = list(dict.fromkeys(p for selector in args.scenario for p in resolve(selector, dirs)))
    placed = [scenario_for(p, project) for p in paths]  # validate all before running any
    scenarios = [s for s in placed if not isinstance(s, NotApplicable)]
    for skipped in placed:
        if isinstance(skipped, NotApplicable):
            print(f"scenario {skipped.name}: not applicable to this project: {skipped.reason}", file=sys.stderr)
    agent = chosen_agent(args.agent, args.agent_image, None)  # None: each scenario's own
    export = _otel_out(args.otel_out)
    paint = paint_for(sys.stdout)
    failed = incomplete = 0
    judged = []
    text = VerdictText()  # verdict.txt, rendered once and printed as it is when it shows as many findings
    for scenario in scenarios:
        result = run_scenario(scenario, agent=agent, evidence_root=args.evidence_dir,
                              keep_evidence=args.keep_evidence, black_box=args.black_box, agent_log=args.agent_log,
                              limits=dict(args.limit), agent_timeout=args.agent_timeout,
                              sandbox="off" if args.no_sandbox else None, mcp_transport=args.mcp_transport,
                              writers=evidence_writers(text))
        if export is not None:
            export.export_result(result, args.otel_out)
        incomplete += bool(result.incomplete)
        failed += not result.passed and not result.incomplete
        if not result.incomplete:
            judged.append(result.verdict)
        if args.format == "json":
            print(json.dumps({"scenario": result.scenario, "passed": result.passed, "mode": result.verdict.mode,
                              "incomplete": result.incomplete, "evidence": str(result.evidence_dir),
                              "facts": result.facts, "checks": result.verdict.checks}))
        else:
            print(paint.lines(text.text_for(result, shown=args.findings_shown)), end="\n\n")
    if args.format != "json" and len(judged) > 1:
        from harness.coverage import coverage_line

        said = coverage_line(judged)
        if said:
            print(said)
    return EXIT_FAILED if failed else EXIT_INCOMPLETE if incomplete else EXIT_PASSED


# `audit`: every operation healthy / a finding or an unhealthy operation / no usable line
AUDIT_EXIT_STATUS = {"healthy": EXIT_PASSED, "unhealthy": EXIT_FAILED, "unusable": EXIT_USAGE}


# an audit of a file this large shows a progress line on a terminal (a smaller one is over in about a second)
AUDIT_PROGRESS_MIN_BYTES = 8_000_000


def run_audit(path: Path | str, *, format: str = "text", out: TextIO | None = None, err: TextIO | None = None,
              window: int = 10_000, engine: str = "typed", master: str | None = None, quiet: bool = True,
              input: str | None = None, keep: KeptVerdicts | None = None, workers: int | None = None) -> int:
    """``python -m harness audit FILE``: the audit's output on ``out``, problems with the file on ``err``
    (default: the streams of the moment, so that redirect_stdout works), and the exit status. ``quiet=False``:
    a file of ``AUDIT_PROGRESS_MIN_BYTES`` or more shows a progress line on a terminal's stderr. ``keep``: the
    verdicts and lines, for ``--html`` (``audit_file``)."""
    from harness.audit import audit_file
    from harness.colour import paint_for
    from harness.progress import progress_line

    path = Path(path)
    try:
        size = path.stat().st_size if path.is_file() else 0
    except OSError:
        size = 0
    quiet = quiet or size < AUDIT_PROGRESS_MIN_BYTES
    err = err or sys.stderr
    if format == "otlp" or input == "otlp":
        return _audit_otlp(path, "json" if format == "json" else "text", out or sys.stdout, err, keep)
    try:
        with progress_line(f"audit {path.name}", size, quiet=quiet, unit="bytes", failures="unhealthy") as update:
            out = out or sys.stdout  # inside: on a terminal, what goes to stdout goes above the line
            paint = paint_for(out) if format == "text" else None
            shown = cast(TextIO, _Painted(out, paint)) if paint is not None and paint.enabled else out
            summary = audit_file(path, format=format, out=shown, window=window, engine=engine, master=master,
                                 progress=None if quiet else update, keep=keep, workers=workers)
    except (EvidenceError, ValueError) as exc:
        print(f"audit: {exc}", file=err)
        return EXIT_USAGE
    if summary.outcome == "unusable":
        hint = ("; it looks like an OpenTelemetry trace: give --format otlp" if _looks_like_otlp(path)
                else "")
        print(f"audit: {summary.file} holds no usable audit event ({summary.malformed_lines} malformed line(s)); "
              f"expected NDJSON with 'event' or 'type' per line{hint}", file=err)
    return AUDIT_EXIT_STATUS[summary.outcome]


def _looks_like_otlp(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return '"resourceSpans"' in handle.read(4096)
    except OSError:
        return False


def _audit_otlp(path: Path, format: str, out: TextIO, err: TextIO, keep: KeptVerdicts | None) -> int:
    """``audit FILE --format otlp``: the trace's spans read as events and audited (``harness.audit.otlp``)."""
    from harness.audit.otlp import audit_trace

    try:
        summary = audit_trace(path, format=format, out=out, keep=keep)
    except EvidenceError as exc:
        print(f"audit: {exc}", file=err)
        return EXIT_USAGE
    if summary.outcome == "unusable":
        print(f"audit: {summary.file} holds no span the harness reads as an event ({summary.malformed_lines} "
              f"problem(s)); expected OTLP JSON ({{\"resourceSpans\": [...]}} a line) with the attributes of "
              f"docs/otel.md", file=err)
    return AUDIT_EXIT_STATUS[summary.outcome]


class _Painted:
    """A text stream whose writes (whole lines: the audit writes an operation's report at once) get the
    terminal's colours."""

    def __init__(self, stream: TextIO, paint: Any) -> None:
        self.stream, self.paint = stream, paint

    def write(self, text: str) -> int:
        return self.stream.write(self.paint.lines(text))

    def flush(self) -> None:
        self.stream.flush()


def _audit(args: argparse.Namespace) -> int:
    if args.html is not None:
        _writable(args.html)
        if any(c in str(args.file) for c in "*?["):
            raise HarnessError(f"--html {args.html}: the investigation report is written for one log, not a glob "
                               f"({args.file}); give one file")
    if args.workers is not None and (args.engine != "typed" or args.workers < 1):
        raise HarnessError(f"--workers {args.workers}: give 1 or more, with --engine typed (the engine is "
                           f"{args.engine})")
    if args.master is not None and args.engine != "spark":
        raise HarnessError(f"--master {args.master}: a Spark master is for --engine spark "
                           f"(the engine is {args.engine})")
    if args.html is not None and args.engine == "spark":
        raise HarnessError(f"--html {args.html}: the page is made from every operation's verdict in this process, "
                           f"which --engine spark leaves on the cluster; give --engine typed, stream or duckdb")
    from harness.audit.output import KeptVerdicts

    keep = KeptVerdicts(str(args.file)) if args.html is not None else None
    status = run_audit(args.file, format=args.format, quiet=args.quiet, input=args.input, engine=args.engine,
                       master=args.master, keep=keep, workers=args.workers)
    if keep is not None and status != EXIT_USAGE:
        from harness.html_report import RunInfo, write_html_report

        # the verdict the audit judged and wrote, gathered: the log is not judged again for the page
        write_html_report(args.html, keep.verdict(), evidence=keep.evidence,
                          run=RunInfo(evidence_dir=str(args.file), title=f"audit of {args.file}", source="audit"))
        print(f"html report: {args.html}", file=sys.stderr)
    return status


def _writable(target: Path) -> None:
    if not target.parent.is_dir():
        raise HarnessError(f"cannot write {target}: folder {target.parent} does not exist")


def _report(args: argparse.Namespace) -> int:
    from harness.colour import paint_for
    from harness.contract import EvidenceLayout
    from harness.evidence import load_evidence, verdict_doubt
    from harness.html_report import RunInfo, write_html_report, write_result_report
    from harness.report import render_incomplete, render_result, render_text, render_untrusted
    from harness.results.scenario_result import ScenarioResult
    from harness.safe_files import read_regular

    folder = args.folder
    layout = EvidenceLayout(folder)
    if not folder.is_dir() or not any(p.exists() for p in (layout.context, layout.verdict_json, layout.agent_log)):
        raise EvidenceError(f"{folder} is not an evidence folder (it holds no {layout.context.name}, "
                            f"{layout.verdict_json.name} or {layout.agent_log.name})")
    if args.html is not None:
        _writable(args.html)
    evidence = load_evidence(folder)
    # the run's own verdict is shown only when its seal holds and its evidence is still whole; else judged again
    doubt = verdict_doubt(layout) if layout.verdict_json.exists() else None
    if doubt is not None:
        print(render_untrusted(layout.verdict_json.name, doubt))
    elif layout.verdict_json.exists() and not evidence.incomplete:
        try:
            result = ScenarioResult.from_dict(json.loads(read_regular(layout.verdict_json)))
        except (ValueError, KeyError, TypeError) as exc:
            raise EvidenceError(f"{layout.verdict_json}: not a verdict file this harness reads ({exc})") from None
        if args.html is not None:
            write_result_report(result, evidence, args.html)
        print(paint_for(sys.stdout).lines(render_result(result, shown=args.findings_shown)))
        if args.html is not None:
            print(f"html report: {args.html}")
        return EXIT_INCOMPLETE if result.incomplete else EXIT_PASSED if result.passed else EXIT_FAILED
    from harness.checker import judge

    run = RunInfo(scenario=evidence.scenario, agent=str(evidence.agent.get("command") or "-"),
                  evidence_dir=str(folder), incomplete=list(evidence.incomplete))
    verdict = judge(evidence, facts=False).verdict  # judged again, as `check` judges it
    if evidence.incomplete:
        print(paint_for(sys.stdout).lines(render_incomplete(evidence.incomplete)))
    else:
        print(paint_for(sys.stdout).lines(render_text(verdict, shown=args.findings_shown)))
    if args.html is not None:
        write_html_report(args.html, verdict, evidence=evidence, run=run)
        print(f"html report: {args.html}")
    return EXIT_INCOMPLETE if evidence.incomplete else EXIT_PASSED if verdict.passed else EXIT_FAILED


def _verify(args: argparse.Namespace) -> int:
    from harness.chain import verify_checkpoint_file, verify_file

    path, checkpoint = args.file, args.checkpoint
    if path.is_dir():  # an evidence folder: its agent log against the checkpoint the engine recorded
        from harness.contract import EvidenceLayout

        path = EvidenceLayout(args.file).agent_log
        if checkpoint is None and args.head is None and args.final_head is None:
            checkpoint = EvidenceLayout(args.file).checkpoint
            if not checkpoint.exists():
                raise EvidenceError(f"{args.file} holds no {CHECKPOINT_FILE} (a run before checkpoints?); "
                                    f"verify {path} itself, with --final-head if you kept its head")
    if checkpoint is not None:
        intact, message = verify_checkpoint_file(path, checkpoint, args.key_file, folder=args.file.is_dir())
    elif args.final_head is not None:
        intact, message = verify_file(path, head=args.final_head, final=True)
    else:
        intact, message = verify_file(path, head=args.head)
    print(f"{path}: {message}")
    if args.file.is_dir() and args.checkpoint is None and args.head is None and args.final_head is None:
        from harness.contract import EvidenceLayout

        layout = EvidenceLayout(args.file)  # the agent's trace, signed beside its log (agent_log: otel)
        if layout.trace.exists() and layout.trace_checkpoint.exists():
            unchanged, said = verify_checkpoint_file(layout.trace, layout.trace_checkpoint, args.key_file, folder=True)
            print(f"{layout.trace}: {said.replace('log ', 'trace ', 1)}")
            intact = intact and unchanged
    return EXIT_PASSED if intact else EXIT_FAILED


def _otel_out(target: Path | None) -> ModuleType | None:
    """``--otel-out``'s exporter (``harness.otel.verdict``: ``export_result``, ``export_verdict``), checked before any
    run; None without it."""
    if target is None:
        return None
    _writable(target)
    try:
        from harness.otel import verdict
    except ImportError as exc:
        raise HarnessError(f"--otel-out needs the OpenTelemetry SDK ({exc.name} is not installed): "
                           "pip install 'retry-harness[otel]'") from None
    return verdict


def _print_document(value: Any) -> None:
    """A large JSON document to stdout as the bytes ``json_document`` makes, with no text copy of them."""
    from harness.ndjson import json_document

    data = json_document(value)
    binary = getattr(sys.stdout, "buffer", None)
    if binary is None:  # a text-only stream (a StringIO)
        sys.stdout.write(data.decode("utf-8"))
    else:
        sys.stdout.flush()
        binary.write(data)
        binary.flush()


@collector_paused()  # the report and its JSON too: a large verdict is millions of objects
def _check(args: argparse.Namespace) -> int:
    from harness.checker import judge
    from harness.colour import paint_for
    from harness.evidence import load_evidence
    from harness.report import render_check, render_incomplete

    export = _otel_out(args.otel_out)
    evidence = load_evidence(args.folder, key_file=args.key_file, limits=dict(args.limit))
    # None: as the run was judged; the wire's facts are the certification table's, not check's
    judged = judge(evidence, black_box=True if args.black_box else None, facts=False)
    if judged.incomplete:  # lost evidence, or a process that outlived the agent: never judged as if whole
        if args.format == "json":
            print(json.dumps({"outcome": "incomplete", "passed": False, "incomplete": judged.incomplete}, indent=2))
        else:
            print(paint_for(sys.stdout).lines(render_incomplete(judged.incomplete)))
        return EXIT_INCOMPLETE
    verdict, failures, passed = judged.verdict, judged.expectation_failures, judged.passed
    if export is not None:
        export.export_verdict(verdict, args.otel_out, scenario=evidence.scenario, agent=evidence.agent.get("command"),
               evidence_dir=str(args.folder))
    if args.format == "json":
        _print_document({"outcome": "passed" if passed else "failed", "passed": passed,
                         "expectation_failures": failures, **verdict.document()})
    else:
        print(paint_for(sys.stdout).lines(render_check(verdict, failures, shown=args.findings_shown)))
    return EXIT_PASSED if passed else EXIT_FAILED


def _matrix(args: argparse.Namespace) -> int:
    from harness.colour import paint_for
    from harness.engine import caller_folder
    from harness.matrix import agent_specs, default_jobs, load_expectations, run_matrix, unexpected
    from harness.progress import progress_line
    from harness.report import render_matrix, render_matrix_html, render_matrix_markdown
    from harness.resources import catalogue_dir
    from harness.results.matrix import as_dict
    from harness.scenario import load, resolve

    dirs = [caller_folder() / "scenarios", catalogue_dir()]
    paths = list(dict.fromkeys(p for s in (args.scenarios or ["all"]) for p in resolve(s, dirs)))
    for path in paths:
        load(path)  # validate every scenario before running any
    expected = load_expectations()
    # a bad --agent is a usage error, before any run
    agents = agent_specs(args.agents or expected.agents, expected, in_image=args.agent_image is not None)
    for target in (args.markdown, args.json_file, args.html_file):
        if target is not None and not target.parent.is_dir():
            raise HarnessError(f"cannot write {target}: folder {target.parent} does not exist")
    done: list[bool] = []  # per cell ended: whether it failed the matrix
    with progress_line("matrix", len(agents) * len(paths), quiet=args.quiet, failures="unexpected") as update:
        def told(cell: Any) -> None:
            done.append(unexpected(cell))
            update(len(done), sum(done))

        matrix = run_matrix(agents, paths, args.evidence_dir, jobs=args.jobs or default_jobs(),
                            black_box=args.black_box, progress=told, image=args.agent_image)
    data = as_dict(matrix)
    if args.format == "json":
        print(json.dumps(data, indent=2))
    else:
        print(render_matrix(matrix, paint_for(sys.stdout)))
    if args.json_file is not None:
        args.json_file.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if args.markdown is not None:
        args.markdown.write_text(render_matrix_markdown(matrix), encoding="utf-8")
    if args.html_file is not None:
        args.html_file.write_text(render_matrix_html(matrix), encoding="utf-8")
    return EXIT_PASSED if matrix.ok else EXIT_FAILED


def _explore(args: argparse.Namespace) -> int:
    from harness.colour import paint_for
    from harness.contract import REFERENCE_AGENT
    from harness.engine import caller_folder
    from harness.explore import explore
    from harness.progress import progress_line
    from harness.report import exploration_dict, render_exploration
    from harness.resources import catalogue_dir
    from harness.scenario import load, resolve

    paths = resolve(args.scenario, [caller_folder() / "scenarios", catalogue_dir()])
    if len(paths) != 1:
        raise HarnessError(f"explore starts from one scenario; {args.scenario!r} names {len(paths)}: "
                           f"{', '.join(p.stem for p in paths)}")
    base = load(paths[0])
    agent = args.agent or base.agent or REFERENCE_AGENT
    database = None if args.no_database else (args.database or caller_folder() / DATABASE_FOLDER)
    with progress_line(f"explore {base.name}", args.examples, quiet=args.quiet or args.format == "json") as update:
        state = explore(base, agent=agent, evidence_root=args.evidence_dir, examples=args.examples, seed=args.seed,
                        max_seconds=args.max_seconds, database=database, client_timeout=args.client_timeout,
                        max_faults=args.max_faults, max_shrink_runs=args.max_shrink_runs,
                        agent_timeout=args.agent_timeout, reproducer=args.reproducer,
                        progress=lambda s: update(s.runs, len(s.failing) + len(s.flaky)))
    if args.format == "json":
        print(json.dumps(exploration_dict(state), indent=2))
    else:
        print(paint_for(sys.stdout).lines(render_exploration(state)))
    if state.stopped_by == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_FAILED if state.failed else EXIT_PASSED


def _scenarios(args: argparse.Namespace) -> int:
    from harness.catalogue import NotApplicable, scenario_for
    from harness.report import render_catalogue
    from harness.resources import catalogue

    project = project_here()  # in a project: where each scenario runs on its destinations, or why it cannot
    placed = [scenario_for(path, project) for path in catalogue()]
    print(render_catalogue([s for s in placed if not isinstance(s, NotApplicable)],  # an empty one is an error
                           {s.name: s.reason for s in placed if isinstance(s, NotApplicable)}))
    return 0


def _agents(args: argparse.Namespace) -> int:
    from harness.matrix import load_expectations

    expected = load_expectations()
    width = max(map(len, expected.agents))
    print(f"{'reference':<{width}}  a correct agent; --agent \"{expected.reference}\"")
    for name, flaw in expected.flaws.items():
        caught = ", ".join(sorted(expected.caught_by.get(name, {}))) or "no scenario"
        print(f"{name:<{width}}  {' '.join(flaw.split())}; caught by {caught}; "
              f"--agent \"{expected.command(name)}\"")
    return 0


# what one catalogue scenario takes the reference agent, one after another: 26 in 32-33 s on this 2-core machine
# idle, 75 s on a busy one (issue 42)
COVERAGE_SECONDS_A_SCENARIO = (1.25, 2.9)


def coverage_announcement(scenarios: int) -> str:
    """What `coverage` says first, on stderr: it runs for a minute or so with nothing else to show off a terminal."""
    low, high = (round(scenarios * seconds) for seconds in COVERAGE_SECONDS_A_SCENARIO)
    took = f"about {low}-{high} s" if high < 120 else f"about {round(low / 60)}-{round(high / 60)} minutes"
    return f"running the reference agent over {scenarios} scenarios, one after another ({took})..."


def _coverage(args: argparse.Namespace) -> int:
    import tempfile

    from harness import coverage
    from harness.checker import RULES
    from harness.matrix import coverage_scenarios, measure_coverage
    from harness.model.operation import TRANSITIONS
    from harness.progress import progress_line

    planned = len(coverage_scenarios())
    if not args.quiet:
        print(coverage_announcement(planned), file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="retry-harness-coverage-") as scratch, \
            progress_line("coverage", planned, quiet=args.quiet) as update:
        measured = measure_coverage(Path(args.evidence or scratch), progress=update)
    checks = [r.label for r in RULES.values() if "black_box" not in r.requires]
    for label in checks:
        names = coverage.scenarios_exercising(label, measured)
        said = (f"every scenario ({len(names)})" if len(names) == len(measured) else ", ".join(names)
                or "(no scenario exercises it)")
        print(f"{label:45} {said}")
    rows = {t.label for t in TRANSITIONS}
    taken = {t for seen in measured.values() for t in seen["transitions"]} & rows
    print(f"\n{len(taken)}/{len(rows)} transitions of the operation model taken over {len(measured)} scenarios; "
          f"never: {', '.join(sorted(rows - taken)) or 'none'}")
    if args.write:
        print(f"written: {coverage.write(measured)}")
    return EXIT_PASSED


def _proxy(args: argparse.Namespace) -> int:
    from harness.proxy.runtime import RuntimeError_, tool_command

    try:
        argv, env = tool_command(args.tool, args.args)
    except RuntimeError_ as exc:
        raise HarnessError(f"cannot run {args.tool}: {exc}") from None
    sys.stdout.flush()
    sys.stderr.flush()
    try:  # the program takes this process over: its terminal, Ctrl-C and exit status are the user's
        os.execve(argv[0], argv, env)
    except OSError as exc:
        raise HarnessError(f"cannot run {args.tool} with {argv[0]}: {exc}") from None


def _reproduce(args: argparse.Namespace) -> int:
    from harness.errors import ScenarioError
    from harness.incident.model import IncidentError
    from harness.incident.readers import read_incident
    from harness.incident.reproduce import reproduce
    from harness.project import load_project
    from harness.scenario import load

    project = None if args.no_project else load_project(args.project) if args.project is not None else project_here()
    try:
        text = reproduce(read_incident(args.incident), operation=args.operation, name=args.name, project=project,
                         base_dir=args.output.resolve().parent)
    except IncidentError as exc:
        raise HarnessError(str(exc)) from None
    try:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.output.with_name(args.output.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise HarnessError(f"{args.output}: cannot write the scenario: {exc.strerror}") from None
    try:  # what is written must load: a reproducer that does not run is no reproducer
        scenario = load(tmp)
    except ScenarioError as exc:
        raise HarnessError(f"the scenario written from {args.incident} does not load (kept in {tmp} to look at): "
                           f"{exc}") from None
    tmp.replace(args.output)
    print(f"wrote {args.output}: scenario {scenario.name}, {len(scenario.intents)} intent(s), "
          f"{len(scenario.faults)} fault(s), destinations {', '.join(scenario.destinations)}")
    if project is not None and any(d in project.destinations for d in scenario.destinations):
        print(f"on the destinations of {project.path}: run it in {project.folder} (its agent and mode apply): "
              f"python -m harness run {os.path.relpath(args.output.resolve(), project.folder)}")
    else:
        print(f"run it: python -m harness run {args.output} --agent \"YOUR AGENT\"")
    return 0


def _override(value: str) -> tuple[list[str], Any]:
    """``--override``'s type: ``KEY=VALUE``, the value read as YAML (a number, a list, a table); else a usage error."""
    import yaml

    key, sep, text = value.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (e.g. client_reference=external_id), got {value!r}")
    try:
        parsed = yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        parsed = text  # not YAML: the text as it is
    return key.strip().split("."), parsed


def _api(args: argparse.Namespace) -> int:
    from harness.openapi import api_from_openapi, profile_yaml

    overrides: dict[str, Any] = {}
    for keys, value in args.override:
        table = overrides
        for key in keys[:-1]:
            if not isinstance(table.get(key), dict):
                table[key] = {}  # idempotency=... then idempotency.style=...: the later one says it
            table = table[key]
        table[keys[-1]] = value
    inferred = api_from_openapi(args.document, overrides)
    print(profile_yaml(inferred, args.document), end="")
    return EXIT_PASSED


def _schema(args: argparse.Namespace) -> int:
    if args.which == "scenario":
        from harness.scenario import SCHEMA_PATH as path
    elif args.which == "api":
        from harness.scenario import API_SCHEMA_PATH as path
    else:
        from harness.events import SCHEMA_PATH as path
    print(path.read_text(encoding="utf-8"), end="")
    return 0


def _images(args: argparse.Namespace) -> int:
    import time

    from harness.containers import images
    from harness.report import render_images

    if args.action == "list":
        print(render_images(images.our_images()))
    elif args.action == "prune":
        removed = images.prune()
        print(f"removed {len(removed)} image(s): {', '.join(removed)}" if removed else "no image of ours to remove")
    else:
        present = {tag for row in images.our_images() for tag in row["tags"]}
        for kind in IMAGE_KINDS if args.which == "all" else (args.which,):
            began = time.monotonic()
            tag = images.ENSURE[kind]()
            how = "present" if tag in present else f"built in {time.monotonic() - began:.1f} s"
            also = f", also {images.tag_latest(tag)}" if kind != "base" else ""
            print(f"{kind:8} {tag} ({how}{also})", flush=True)
    return EXIT_PASSED


def _containers(args: argparse.Namespace) -> int:
    from harness.containers import docker_client
    from harness.report import render_containers, render_removed

    if args.action == "list":
        print(render_containers(docker_client.listing(args.owner)))
    else:
        print(render_removed(docker_client.remove_ours(args.owner)))
    return EXIT_PASSED


COMMANDS = {"run": _run, "audit": _audit, "verify": _verify, "check": _check, "explore": _explore,
            "scenarios": _scenarios, "agents": _agents, "schema": _schema, "report": _report, "matrix": _matrix,
            "reproduce": _reproduce, "images": _images, "containers": _containers, "coverage": _coverage,
            "api": _api, "proxy": _proxy}
