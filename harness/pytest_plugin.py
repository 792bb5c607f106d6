"""pytest plugin: `pytest --scenario NAME [--agent COMMAND]` runs harness scenarios as test items.

Registered through the `pytest11` entry point, so it loads in every pytest run of an environment
where the project is installed: it must cost nothing when unused. Heavy modules (mitmproxy, the
engine, the checker) are imported inside hooks, only when a scenario runs.

Every option is spelled `--harness-...`; the short spellings (`--scenario`, `--agent`,
`--evidence-dir`, `--keep-evidence`) are aliases, added once the initial conftests are loaded and
only when no other plugin or conftest uses that name. For a team's own tests: the `harness_engine`
(session) and `run_scenario` (function) fixtures, `assert_scenario_passed` and `catalogue`.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Generator, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.contract import AGENT_LOGS

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr  # what Node.repr_failure returns; pytest does not export it

    from harness.project import Project
    from harness.results.scenario_result import ScenarioResult
    from harness.scenario import ContainerAgent, Scenario
    from harness.writers import ResultWriter

SCENARIO_OPTION = "--harness-scenario"
AGENT_OPTION = "--harness-agent"
EVIDENCE_OPTION = "--harness-evidence-dir"
KEEP_OPTION = "--harness-keep-evidence"
EXPLORE_OPTION = "--harness-explore"
EXPLORE_SEED_OPTION = "--harness-explore-seed"
BLACK_BOX_OPTION = "--harness-black-box"
AGENT_LOG_OPTION = "--harness-agent-log"
OTEL_OUT_OPTION = "--harness-otel-out"
AGENT_IMAGE_OPTION = "--harness-agent-image"
FINDINGS_SHOWN_OPTION = "--harness-findings-shown"
LIMIT_OPTION = "--harness-limit"
AGENT_TIMEOUT_OPTION = "--harness-agent-timeout"
NO_SANDBOX_OPTION = "--harness-no-sandbox"
# the short spellings, each an alias of its long form when no other plugin has taken the name
ALIASES = {SCENARIO_OPTION: "--scenario", AGENT_OPTION: "--agent", EVIDENCE_OPTION: "--evidence-dir",
           KEEP_OPTION: "--keep-evidence", EXPLORE_OPTION: "--explore", EXPLORE_SEED_OPTION: "--explore-seed",
           BLACK_BOX_OPTION: "--black-box", AGENT_LOG_OPTION: "--agent-log", OTEL_OUT_OPTION: "--otel-out",
           AGENT_IMAGE_OPTION: "--agent-image", FINDINGS_SHOWN_OPTION: "--findings-shown", LIMIT_OPTION: "--limit",
           AGENT_TIMEOUT_OPTION: "--agent-timeout", NO_SANDBOX_OPTION: "--no-sandbox"}
SCENARIO_DEST, AGENT_DEST, EVIDENCE_DEST, KEEP_DEST, EXPLORE_DEST, EXPLORE_SEED_DEST, BLACK_BOX_DEST = (
    "harness_scenario", "harness_agent", "harness_evidence_dir", "harness_keep_evidence", "harness_explore",
    "harness_explore_seed", "harness_black_box")
AGENT_LOG_DEST, OTEL_OUT_DEST, AGENT_IMAGE_DEST = "harness_agent_log", "harness_otel_out", "harness_agent_image"
FINDINGS_SHOWN_DEST, LIMIT_DEST, AGENT_TIMEOUT_DEST = "harness_findings_shown", "harness_limit", "harness_agent_timeout"
NO_SANDBOX_DEST = "harness_no_sandbox"
AGENT_INI = "retry_harness_agent"
SCENARIO_DIRS_INI = "retry_harness_scenario_dirs"
BUNDLED_CLASSNAME = "retry_harness.catalogue"  # JUnit classname of the bundled catalogue's scenarios
CACHE_KEY = "retry_harness/scenario_files"  # node id -> scenario file, for `--lf`/`--ff` without --scenario
RESULT_ATTRIBUTE = "retry_harness_result"  # on the call report: the result as JSON (crosses pytest-xdist)
# on a remote worker's call report: its evidence folder, packed (harness.evidence_archive), unpacked by the controller
EVIDENCE_ATTRIBUTE = "retry_harness_evidence"
REMOTE_WORKER_KEY = "retry_harness_remote"  # in an xdist worker's workerinput: it runs on another machine
# a bundled scenario's node id, wherever the package is installed (a checkout's own id for it, too)
BUNDLED_NODEID_PREFIX = "harness/scenarios/"

_OPTIONS: dict[str, dict[str, Any]] = {
    SCENARIO_OPTION: dict(
        dest=SCENARIO_DEST, action="append", default=[], metavar="NAME",
        help="run a scenario as a test: a name (NAME.yaml in the folders of retry_harness_scenario_dirs, "
             "<rootdir>/scenarios, ./scenarios, then the bundled catalogue), a glob such as 'response_*', "
             "'all', or a path to a .yaml file. Repeatable."),
    AGENT_OPTION: dict(
        dest=AGENT_DEST, default=None, metavar="COMMAND",
        help="agent command to run instead of the scenario's or the default "
             "(default: 'python -m harness.agents.reference')."),
    AGENT_IMAGE_OPTION: dict(
        dest=AGENT_IMAGE_DEST, default=None, metavar="IMAGE",
        help="run the agent in a container of IMAGE (present on the Docker engine; never pulled), host networking, "
             "the evidence folder mounted at its own path: --harness-agent is the command run in it (default: the "
             "image's own); replaces the scenario's agent (docs/containers.md)."),
    EVIDENCE_OPTION: dict(
        dest=EVIDENCE_DEST, default=None, metavar="DIR",
        help="folder that keeps each run's evidence (default: <rootdir>/evidence)."),
    KEEP_OPTION: dict(
        dest=KEEP_DEST, default="all", choices=("all", "failed"),
        help="keep the evidence of every run (all, default) or only of failed runs (failed)."),
    EXPLORE_OPTION: dict(
        dest=EXPLORE_DEST, default=None, type=int, metavar="N",
        help="explore instead of run: each selected scenario becomes one test that lets Hypothesis draw N fault "
             "schedules over it, and fails with the shrunk schedule and its reproducer's path "
             "(python -m harness explore)."),
    EXPLORE_SEED_OPTION: dict(
        dest=EXPLORE_SEED_DEST, default=None, type=int, metavar="SEED",
        help="with --harness-explore: fix the draws (the same seed, the same schedules)."),
    BLACK_BOX_OPTION: dict(
        dest=BLACK_BOX_DEST, action="store_true", default=False,
        help="judge every run from the proxy journal and the effect ledger alone, for an agent that writes no "
             "audit log (as a scenario's agent_log: none does; docs/checker.md, 'Black-box mode')."),
    AGENT_TIMEOUT_OPTION: dict(
        dest=AGENT_TIMEOUT_DEST, default=None, type=float, metavar="SECONDS",
        help="the agent's wall-clock limit (default: each scenario's agent_timeout_seconds); an agent still "
             "running then is stopped and its evidence judged (X001 names the limit)."),
    NO_SANDBOX_OPTION: dict(
        dest=NO_SANDBOX_DEST, action="store_true", default=False,
        help="run the agent unsandboxed (as HARNESS_SANDBOX=off and `python -m harness run --no-sandbox`; default: "
             "in bubblewrap where it works); each verdict says so, and what that gives up."),
    AGENT_LOG_OPTION: dict(
        dest=AGENT_LOG_DEST, default=None, choices=AGENT_LOGS,
        help="what the agent writes, instead of each scenario's agent_log: otel for a trace-only agent "
             "(OpenTelemetry spans in HARNESS_TRACE_FILE, judged by the same rules; docs/otel.md)."),
    OTEL_OUT_OPTION: dict(
        dest=OTEL_OUT_DEST, default=None, metavar="FILE",
        help="also append each run's verdict to FILE as OpenTelemetry spans (OTLP JSON lines; the otel extra)."),
    FINDINGS_SHOWN_OPTION: dict(
        dest=FINDINGS_SHOWN_DEST, default=None, type=int, metavar="N",
        help="findings a failed run's report shows in full (default 20; 0: all of them); past that, or past 100 "
             "operations, they are counted per rule and the first of each rule, then the first ones, are shown "
             "(verdict.json keeps every one)."),
    LIMIT_OPTION: dict(
        dest=LIMIT_DEST, action="append", default=[], metavar="NAME=N",
        help="read at most N of the agent's log to judge a run, over each scenario's own limits (repeatable; "
             "NAME: agent_log_bytes, line_bytes, operations; docs/checker.md, 'Limits'); a log beyond one is not "
             "judged: the run is INCOMPLETE and its evidence stays on disk."),
}
_GROUP = "retry-harness"

_selected = pytest.StashKey[set[Path]]()
_aliases_taken = pytest.StashKey[list[str]]()
_engine_key = pytest.StashKey["HarnessEngine"]()
_result_key = pytest.StashKey[str]()
_project_key = pytest.StashKey["Project | None"]()
_shadowed_key = pytest.StashKey[list[tuple[Path, Path]]]()  # (the file run, the same name's file not run)
NOT_APPLICABLE_ATTRIBUTE = "retry_harness_not_applicable"  # on a skipped item's report: name and reason, as JSON


# -- options ---------------------------------------------------------------------------------------

def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    group = parser.getgroup(_GROUP, "retry-harness (fault injection for agent retries)")
    for name, attrs in _OPTIONS.items():
        alias = ALIASES[name]
        group.addoption(name, **{**attrs, "help": f"{attrs['help']} Alias: {alias} (unless another plugin "
                                                  "uses that name)."})
    if getattr(pluginmanager, "_conftest_plugins", None):
        # loaded by a conftest's `pytest_plugins` (autoload off): pytest_load_initial_conftests has begun
        # without us, so the aliases are added now, after that conftest's own options
        _add_aliases(parser)
    parser.addini(AGENT_INI, "retry-harness: agent command used when neither --harness-agent nor the "
                             "scenario names one", default=None)
    parser.addini(SCENARIO_DIRS_INI, "retry-harness: folders searched for scenario NAME.yaml files before "
                                     "<rootdir>/scenarios, ./scenarios and the bundled catalogue",
                  type="paths", default=[])


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser,
                                  args: list[str]) -> Generator[None]:
    _bundled_node_ids(early_config, args)
    _keep_rootdir(early_config, parser, args)
    result = yield
    # after the initial conftests: an option a conftest declares itself wins over our alias
    early_config.stash[_aliases_taken] = _add_aliases(parser)
    return result


def _add_aliases(parser: pytest.Parser) -> list[str]:
    """Add the short spellings that are still free; return those another plugin has taken."""
    taken = []
    group = parser.getgroup(_GROUP)
    for name, attrs in _OPTIONS.items():
        alias = ALIASES[name]
        try:
            group.addoption(alias, **{**attrs, "help": f"alias of {name}"})
        except (argparse.ArgumentError, ValueError):  # argparse: a conflicting option string
            taken.append(alias)
    return taken


def _bundled_node_ids(config: pytest.Config, args: list[str]) -> None:
    """`pytest harness/scenarios/NAME.yaml::NAME` (a bundled scenario's node id on every machine): where the
    invocation folder holds no such file (an installed package, not a checkout), it names the bundled file."""
    from harness.resources import catalogue_dir  # standard library only

    invocation_dir = config.invocation_params.dir
    for index, arg in enumerate(args):
        path, separator, rest = arg.partition("::")
        if path.startswith(BUNDLED_NODEID_PREFIX) and not (invocation_dir / path).exists():
            bundled = catalogue_dir() / path.removeprefix(BUNDLED_NODEID_PREFIX)
            if bundled.is_file():
                args[index] = f"{bundled}{separator}{rest}"


def _keep_rootdir(config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """pytest chose the rootdir and ini file before this plugin's options existed, so a value such as
    `--agent ../agents/run.sh` was read as a test path and moved the rootdir (and lost the project's
    ini file); a node id into the bundled catalogue (`pytest .../scenarios/response_lost.yaml::...`)
    moved it too, though the catalogue belongs to no project. Choose them again from the positional
    arguments, without those; change them only if they differ."""
    from _pytest.config.findpaths import determine_setup

    ns = config.known_args_namespace
    names = set(_OPTIONS) | set(ALIASES.values())
    ours = any(arg.split("=", 1)[0] in names for arg in args)
    if ns.rootdir or ns.inifilename or not (ours or any(".yaml" in a or ".yml" in a for a in ns.file_or_dir)):
        return  # given explicitly (nothing was guessed), or nothing of ours to misread
    invocation_dir = config.invocation_params.dir
    positional = [arg for arg in parser.parse_known_args(without_our_options(args)).file_or_dir
                  if not _in_bundled_catalogue(invocation_dir / str(arg).split("::", 1)[0])]
    setup: Any = determine_setup  # private: its signature differs between pytest 8 and 9
    found: tuple[Any, ...]
    try:
        found = setup(inifile=None, override_ini=ns.override_ini, args=positional, rootdir_cmd_arg=None,
                      invocation_dir=invocation_dir)
    except TypeError:
        try:  # pytest 8
            found = setup(inifile=None, args=positional, rootdir_cmd_arg=None, invocation_dir=invocation_dir)
        except TypeError:  # another pytest: keep its own guess rather than fail the run
            return
    rootpath, inipath, inicfg = found[:3]
    if (rootpath, inipath) == (config.rootpath, config.inipath):
        return
    old_addopts = list(config.getini("addopts"))
    old_confcutdir = str(config.inipath.parent if config.inipath else config.rootpath)
    # the private attributes Config.parse set from its first guess (pytest has no public setter)
    config._rootpath, config._inipath = rootpath, inipath
    setattr(config, "_inicfg" if hasattr(config, "_inicfg") else "inicfg", inicfg)  # pytest 9, pytest 8
    config._ignored_config_files = found[3] if len(found) > 3 else []
    config._inicache.clear()
    parser.extra_info["rootdir"], parser.extra_info["inifile"] = str(rootpath), str(inipath)
    if old_addopts and args[:len(old_addopts)] == old_addopts:
        del args[:len(old_addopts)]
    new_addopts = list(config.getini("addopts"))
    args[:0] = new_addopts
    config.pluginmanager.consider_preparse(new_addopts, exclude_only=False)
    for path in reversed(config.getini("pythonpath")):
        sys.path.insert(0, str(path))
    config.known_args_namespace = parser.parse_known_args(args, namespace=copy.copy(config.option))
    if config.known_args_namespace.confcutdir in (None, old_confcutdir):
        config.known_args_namespace.confcutdir = str(inipath.parent if inipath else rootpath)


def _in_bundled_catalogue(path: Path) -> bool:
    from harness.resources import catalogue_dir  # standard library only

    return path.suffix in (".yaml", ".yml") and path.resolve().parent == catalogue_dir().resolve()


def without_our_options(args: list[str]) -> list[str]:
    """`args` without this plugin's options and their values (long forms and aliases)."""
    names = set(_OPTIONS) | set(ALIASES.values())
    flags = {spelling for name, attrs in _OPTIONS.items() if attrs.get("action") == "store_true"
             for spelling in (name, ALIASES[name])}  # options that take no value
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in flags:
            continue
        elif arg in names:
            skip = True
        elif arg.split("=", 1)[0] not in names:
            out.append(arg)
    return out


# -- configuration and collection ------------------------------------------------------------------

@pytest.hookimpl(trylast=True)  # after the cache provider: `--lf` reads config.cache
def _say_past_capture(config: pytest.Config, text: str) -> None:
    """A notice of the harness (harness.notices), to the terminal even while a test's output is captured."""
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=False)
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    finally:
        if capture is not None:
            capture.resume_global_capture()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "scenario: a retry-harness scenario run as a test item")
    from harness.markers import MARKERS  # the standard library only

    for marker, said in MARKERS.items():
        config.addinivalue_line("markers", f"{marker}: retry-harness: {said}")
    # mitmproxy's own TLS code warns about pyOpenSSL deprecations in its thread: not the user's to fix
    config.addinivalue_line("filterwarnings", r"ignore::DeprecationWarning:mitmproxy\..*")
    config.pluginmanager.register(_HarnessSession(config), "retry-harness-session")
    _remote_workers_not_restarted(config)  # before pytest-xdist's own configure (trylast) reads it
    from harness import notices  # the standard library only

    notices.set_writer(functools.partial(_say_past_capture, config))
    agent: str | None = config.getoption(AGENT_DEST)
    if agent is not None:  # an empty --agent (an unset variable) must not run the default agent and pass
        from harness.contract import agent_option_problem

        spelling = _spelling(config, AGENT_OPTION)
        problem = agent_option_problem(agent, spelling)
        if problem:
            raise pytest.UsageError(f"{spelling}: {problem}")
    image: str | None = config.getoption(AGENT_IMAGE_DEST)
    if image is not None:  # an empty --agent-image must not run the agent as a process and pass
        from harness.scenario import agent_image_problem

        spelling = _spelling(config, AGENT_IMAGE_OPTION)
        problem = agent_image_problem(image, spelling)
        if problem:
            raise pytest.UsageError(f"{spelling}: {problem}")
    ini_agent = config.getini(AGENT_INI)  # None when unset (its default); set to nothing is --agent "" again
    if ini_agent is not None:
        from harness.contract import agent_option_problem

        problem = agent_option_problem(str(ini_agent), AGENT_INI)
        if problem:
            raise pytest.UsageError(f"{AGENT_INI} in {config.inipath}: {problem}")
    timeout = config.getoption(AGENT_TIMEOUT_DEST)
    if timeout is not None and not timeout > 0:
        raise pytest.UsageError(f"{_spelling(config, AGENT_TIMEOUT_OPTION)}: the agent's time limit must be a number "
                                f"of seconds above 0, got {timeout:g}")
    examples = config.getoption(EXPLORE_DEST)
    if examples is not None and examples < 1:
        raise pytest.UsageError(f"{_spelling(config, EXPLORE_OPTION)}: the number of schedules to explore must be at "
                                f"least 1, got {examples}")
    findings_shown(config)  # a bad --harness-findings-shown or --harness-limit is a usage error before any run
    limits_of(config)
    selectors: list[str] = config.getoption(SCENARIO_DEST) or []
    if selectors:
        from harness.errors import ScenarioError
        from harness.scenario import resolve, shadowed

        selected: list[Path] = []
        try:
            project_of(config)  # a bad configuration is a usage error before anything is collected
            for selector in selectors:
                selected.extend(resolve(selector, search_dirs(config)))
                config.stash[_shadowed_key] = [*config.stash.get(_shadowed_key, []),
                                               *shadowed(selector, search_dirs(config))]
        except ScenarioError as exc:
            raise pytest.UsageError(f"{_spelling(config, SCENARIO_OPTION)}: {exc}") from None
        config.stash[_selected] = set(selected)
        paths = [str(p) for p in dict.fromkeys(selected)]
        if config.args_source == pytest.Config.ArgsSource.ARGS:
            config.args.extend(paths)  # explicit test paths run too
        else:
            config.args[:] = paths  # `pytest --scenario X` runs just the scenarios, not testpaths
    elif config.args_source != pytest.Config.ArgsSource.ARGS and (
            config.getoption("lf", False) or config.getoption("failedfirst", False)):
        # `pytest --lf` alone: the scenario items that failed last time are collected again
        failed = [Path(path) for path in _last_failed_scenarios(config)]
        if failed:
            config.stash[_selected] = set(failed)
            config.args.extend(str(p) for p in dict.fromkeys(failed) if str(p) not in config.args)


def _remote_workers_not_restarted(config: pytest.Config) -> None:
    """With workers on other machines (`--tx ssh=...`, `socket=`) and no --max-worker-restart given: 0. pytest-xdist
    would restart a worker whose machine is gone by reaching it again, and stop the session with an internal
    error when it cannot; with no restart it reports the item that worker ran as crashed, and the plugin
    reports each item no one ran (`_HarnessSession._report_unrun`)."""
    specs = config.getoption("tx", None) or []
    remote = any(part.split("=", 1)[0].split("*")[-1] in ("ssh", "socket", "vagrant_ssh")
                 for spec in specs for part in str(spec).split("//"))
    if remote and getattr(config.option, "maxworkerrestart", "") is None:
        config.option.maxworkerrestart = "0"


def _last_failed_scenarios(config: pytest.Config) -> list[str]:
    cache = getattr(config, "cache", None)
    if cache is None:
        return []
    known: dict[str, str] = cache.get(CACHE_KEY, {})
    failed = cache.get("cache/lastfailed", {})
    return [path for nodeid, path in known.items() if nodeid in failed and Path(path).is_file()]


def _spelling(config: pytest.Config, option: str) -> str:
    """How the command line spelled `option`: its long form or its alias (for error messages)."""
    given = {arg.split("=", 1)[0] for arg in config.invocation_params.args}
    return option if option in given or ALIASES[option] not in given else ALIASES[option]


def search_dirs(config: pytest.Config) -> list[Path]:
    """Where scenario names are looked up, in order: the ini option, the project's own folders (its configuration's
    `scenarios`), <rootdir>/scenarios, ./scenarios, the bundled catalogue."""
    from harness.resources import catalogue_dir

    project = project_of(config)
    own = list(project.scenario_dirs) if project is not None else []
    return [*map(Path, config.getini(SCENARIO_DIRS_INI)), *own, config.rootpath / "scenarios",
            Path.cwd() / "scenarios", catalogue_dir()]


def project_of(config: pytest.Config) -> Project | None:
    """The project's configuration ([tool.retry-harness], harness.project) that applies where pytest was invoked,
    read once; None when there is none. A ``ProjectError`` when it is wrong."""
    if _project_key not in config.stash:
        from harness.project import find_project, load_project

        path = find_project(config.invocation_params.dir)
        config.stash[_project_key] = load_project(path) if path is not None else None
    return config.stash[_project_key]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix not in (".yaml", ".yml"):
        return None
    selected = file_path.resolve() in parent.config.stash.get(_selected, set())
    # a node id (or a path) given on the command line: `pytest scenarios/response_lost.yaml::response_lost`
    if selected or (parent.session.isinitpath(file_path) and _looks_like_scenario(file_path)):
        return ScenarioFile.from_parent(parent, path=file_path, nodeid=_file_nodeid(parent.config, file_path))
    return None


def _looks_like_scenario(path: Path) -> bool:
    try:
        head = path.read_text(encoding="utf-8", errors="replace")[:200_000]
    except OSError:
        return False
    return all(re.search(rf"^{key}\s*:", head, re.MULTILINE) for key in ("name", "intents"))


def _file_nodeid(config: pytest.Config, path: Path) -> str | None:
    """A bundled scenario's: `harness/scenarios/NAME.yaml`, wherever the package is (pytest-xdist workers
    with it at different paths, on other machines, collect the same ids; `pytest NODEID` reads it back, see
    `_bundled_node_ids`). Else pytest's own node id under the rootdir; outside it (a file elsewhere) the
    absolute path, which `pytest NODEID` and `--lf` read back (pytest's would be empty)."""
    if _in_bundled_catalogue(path):
        return BUNDLED_NODEID_PREFIX + path.name
    try:
        path.resolve().relative_to(config.rootpath.resolve())
        return None
    except ValueError:
        return path.resolve().as_posix()


class ScenarioFile(pytest.File):
    """A scenario YAML file: one test item."""

    def collect(self) -> list[pytest.Item]:
        from harness.catalogue import NotApplicable, scenario_for
        from harness.errors import ScenarioError

        try:
            scenario = scenario_for(self.path, project_of(self.config))
        except ScenarioError as exc:
            raise self.CollectError(str(exc)) from None
        if isinstance(scenario, NotApplicable):
            return [NotApplicableItem.from_parent(self, name=scenario.name, reason=scenario.reason,
                                                  markers=scenario.markers)]
        examples = self.config.getoption(EXPLORE_DEST)
        if examples is not None:
            return [ExploreItem.from_parent(self, name=f"explore[{scenario.name}]", scenario=scenario,
                                            examples=examples)]
        return [ScenarioItem.from_parent(self, name=scenario.name, scenario=scenario)]


class ScenarioFailed(Exception):
    """Raised when the checker's verdict or the scenario's expectations do not hold, or when the harness
    lost evidence of the run (INCOMPLETE: the message says which source and why; no rule findings)."""

    def __init__(self, result: ScenarioResult, shown: int | None = None, text: str | None = None) -> None:
        if text is None:  # `text`: the report already rendered (the run's verdict.txt, ``harness.writers``)
            from harness.report import render_result

            text = render_result(result, shown=shown)
        super().__init__(text)
        self.result = result
        self.shown = shown  # findings shown in full (--harness-findings-shown)


class NotApplicableItem(pytest.Item):
    """A catalogue scenario the project's destinations cannot take (harness.catalogue): skipped with its reason, and
    listed in the session's summary, never dropped in silence."""

    def __init__(self, *, reason: str, markers: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reason = reason
        for marker in ("scenario", *markers):
            self.add_marker(marker)

    def runtest(self) -> None:
        pytest.skip(f"not applicable to this project: {self.reason}")

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"scenario {self.name} (not applicable)"


class ScenarioItem(pytest.Item):
    def __init__(self, *, scenario: Scenario, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.add_marker("scenario")
        from harness.catalogue import markers

        for marker in markers(scenario):
            self.add_marker(marker)

    def runtest(self) -> None:
        __tracebackhide__ = True
        from harness.writers import VerdictText, evidence_writers

        text = VerdictText()  # rendered once: verdict.txt, and the failure report when it shows as many findings
        result = harness_engine_of(self.config).run(self.scenario, writers=evidence_writers(text))
        self.user_properties.extend(result_properties(result))
        # data, not prose: the xdist controller renders it (see pytest_runtest_makereport)
        self.stash[_result_key] = json.dumps({**result.to_dict(), "scenario_file": str(self.path.resolve()),
                                              "classname": _classname(self.config, self.path)}, default=str)
        if not result.passed:
            shown = findings_shown(self.config)
            raise ScenarioFailed(result, shown, text.text_for(result, shown))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str | TerminalRepr:
        return _harness_failure_repr(self.path, excinfo.value) or super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"scenario {self.name}"


class ExplorationFailed(Exception):
    """Raised when an exploration found a schedule that makes the agent fail (or a flaky one)."""

    def __init__(self, state: Any) -> None:
        from harness.report import render_exploration

        super().__init__(render_exploration(state))
        self.state = state

    def headline(self) -> str:
        found = self.state.found[0] if self.state.found else None
        if found is None:
            return "exploration: a schedule failed the agent flakily or outside the shrunk failure (see the report)"
        return (f"{', '.join(found.codes)}: {'; '.join(found.schedule.summary())} "
                f"(reproducer {found.reproducer})")


class ExploreItem(pytest.Item):
    """`--harness-explore N`: Hypothesis draws N fault schedules over the scenario (harness.explore)."""

    def __init__(self, *, scenario: Scenario, examples: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.examples = examples
        self.add_marker("scenario")

    def runtest(self) -> None:
        __tracebackhide__ = True
        state = harness_engine_of(self.config).explore(self.scenario, examples=self.examples,
                                                       seed=self.config.getoption(EXPLORE_SEED_DEST))
        from harness import notices
        from harness.report import render_exploration

        # how much was explored, pass or fail: "3 run(s) of 3 drawn schedule(s) in 4.1 s ..., stopped by examples"
        notices.say(f"\nretry-harness: {render_exploration(state).splitlines()[0]}\n")
        if state.failed:
            raise ExplorationFailed(state)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str | TerminalRepr:
        return _harness_failure_repr(self.path, excinfo.value) or super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"explore {self.scenario.name}"


def _harness_failure_repr(path: Path, exc: BaseException) -> TerminalRepr | None:
    """A scenario's or an exploration's failure, or the harness's own error, as one headline and the report
    (None: not ours, pytest's own representation)."""
    from harness.errors import HarnessError
    from harness.report import render_failure_line

    if isinstance(exc, ScenarioFailed):
        return _failure_repr(path, render_failure_line(exc.result, shown=exc.shown), str(exc))
    if isinstance(exc, ExplorationFailed):
        return _failure_repr(path, exc.headline(), str(exc))
    if isinstance(exc, HarnessError):
        text = str(exc)
        return _failure_repr(path, text.splitlines()[0] if text else type(exc).__name__, text)
    return None


def _failure_repr(path: Path, message: str, text: str) -> TerminalRepr:
    """The failure report as pytest's own exception representation: `text` is the report, `message`
    the one line of the short summary and of JUnit's `message` (both read `reprcrash.message`).
    pytest-xdist carries this kind across processes intact (a plain TerminalRepr becomes a string)."""
    from _pytest._code.code import ReprEntryNative, ReprExceptionInfo, ReprFileLocation, ReprTraceback

    return ReprExceptionInfo(reprtraceback=ReprTraceback([ReprEntryNative([text.rstrip("\n") + "\n"])], None,
                                                         "native"),
                             reprcrash=ReprFileLocation(str(path), 0, message))


def result_properties(result: ScenarioResult) -> list[tuple[str, str]]:
    """What a run records on its test (JUnit `<properties>`): scenario, agent, rule codes, evidence."""
    from harness.results.verdict import EXPECTATION_CODE

    codes = sorted(result.verdict.codes | ({EXPECTATION_CODE} if result.expectation_failures else set()))
    checks = result.verdict.checks
    said = {word: " ".join(label.split(" ", 1)[0] for label, w in checks.items() if w == word)
            for word in ("held", "not exercised", "failed")}
    return [("scenario", result.scenario), ("agent", result.agent),
            ("rule_codes", " ".join(codes) or ("INCOMPLETE" if result.incomplete else "")),
            ("checks_held", said["held"]), ("checks_not_exercised", said["not exercised"]),
            ("checks_failed", said["failed"]),
            ("evidence_dir", str(result.evidence_dir) if result.evidence_kept else "")]


def _scenario_file_here(config: pytest.Config, nodeid: str, reported: str) -> str:
    """The scenario file of ``nodeid`` on this machine (for `--lf`): a remote worker reported its own path."""
    from harness.resources import catalogue_dir

    path = nodeid.split("::", 1)[0]
    if path.startswith(BUNDLED_NODEID_PREFIX):
        return str(catalogue_dir().resolve() / path.removeprefix(BUNDLED_NODEID_PREFIX))
    if Path(reported).is_file() or Path(path).is_absolute():
        return reported
    return str((config.rootpath / path).resolve())


def _classname(config: pytest.Config, path: Path) -> str:
    """JUnit classname: which catalogue the scenario comes from."""
    from harness.resources import catalogue_dir

    folder = path.resolve().parent
    if folder == catalogue_dir().resolve():
        return BUNDLED_CLASSNAME
    try:
        return ".".join(folder.relative_to(config.rootpath.resolve()).parts) or folder.name
    except ValueError:
        return folder.name


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if call.when == "call" and isinstance(item, NotApplicableItem):
        setattr(report, NOT_APPLICABLE_ATTRIBUTE, json.dumps({"scenario": item.name, "reason": item.reason}))
    if call.when == "call" and _result_key in item.stash:
        setattr(report, RESULT_ATTRIBUTE, item.stash[_result_key])  # a string: crosses xdist as it is
    engine = item.config.stash.get(_engine_key, None)
    if call.when == "call" and engine is not None and engine.remote:
        # every run of the item (a scenario item's, or each of a test's `run_scenario` calls), by its property
        folders = [Path(value) for name, value in item.user_properties
                   if name == "evidence_dir" and isinstance(value, str) and value
                   and engine.evidence_root in Path(value).parents]
        if folders:
            from harness.chain import forget_run_key, run_key_path
            from harness.evidence_archive import pack
            from harness.safe_files import remove_tree

            # each run's key goes with its folder, over the workers' channel (never in the folder): the controller
            # keeps it in its own key store, so that a `check` there vouches for the run as one here would
            setattr(report, EVIDENCE_ATTRIBUTE, [
                {"folder": str(f), "archive": pack(f),
                 "key": run_key_path(f).read_text() if run_key_path(f).is_file() else None} for f in folders])
            for folder in folders:  # this machine's copy goes: the controller's evidence root holds the run now
                remove_tree(folder)
                forget_run_key(folder)
    return report


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook, on the controller: only when xdist is loaded
def pytest_configure_node(node: Any) -> None:
    if not node.gateway.spec.popen:  # ssh, socket: another machine, whose evidence must come back
        node.workerinput[REMOTE_WORKER_KEY] = True


def evidence_root_of(config: pytest.Config) -> Path:
    """Where this session keeps each run's evidence: --harness-evidence-dir, else <rootdir>/evidence."""
    root = config.getoption(EVIDENCE_DEST)
    return Path(root) if root else config.rootpath / "evidence"


def pytest_sessionfinish(session: pytest.Session) -> None:
    engine = session.config.stash.get(_engine_key, None)  # only if a scenario ran here: nothing to import otherwise
    if engine is not None:
        engine.close()


# -- the session's reports (on the xdist controller too) --------------------------------------------

class _HarnessSession:
    """Gathers the scenario results of the session from the reports (they carry them as JSON, also
    across pytest-xdist) and renders them at the end; names each JUnit testcase's catalogue."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: list[dict[str, Any]] = []
        self.files: dict[str, str] = {}  # node id -> scenario file, for `--lf`
        self.moved: dict[str, str] = {}  # a remote worker's evidence folder -> where it was unpacked here
        self.collected: list[str] = []  # on the xdist controller: the items the workers collected
        self.finished: set[str] = set()  # ... and those a report closed (a teardown, or xdist's crash report)
        self.lost: list[str] = []  # workers that went down with an error (a crash, a machine gone)
        self.not_applicable: dict[str, str] = {}  # catalogue scenarios the project cannot take -> why

    @pytest.hookimpl(tryfirst=True)  # before the JUnit XML plugin opens the testcase
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when in ("teardown", "???"):  # "???": pytest-xdist's report of the item a worker crashed in
            self.finished.add(report.nodeid)
        self._bring_back(report)
        skipped = getattr(report, NOT_APPLICABLE_ATTRIBUTE, None)
        if isinstance(skipped, str):
            said = json.loads(skipped)
            self.not_applicable[said["scenario"]] = said["reason"]
        raw = getattr(report, RESULT_ATTRIBUTE, None)
        if report.when != "call" or not isinstance(raw, str):
            return
        data = json.loads(raw)
        if data["evidence_dir"] in self.moved:
            data["evidence_dir"] = self.moved[data["evidence_dir"]]
            setattr(report, RESULT_ATTRIBUTE, json.dumps(data))
        self.results.append(data)
        self.files[report.nodeid] = _scenario_file_here(self.config, report.nodeid, data["scenario_file"])
        try:
            from _pytest.junitxml import xml_key
        except ImportError:  # pragma: no cover - the JUnit plugin's internals moved
            return
        xml = self.config.stash.get(xml_key, None)
        if xml is not None:
            prefix = f"{xml.prefix}." if xml.prefix else ""
            xml.node_reporter(report).add_attribute("classname", prefix + data["classname"])

    def _report_unrun(self) -> None:
        """After a worker was lost, each item no worker ran fails, saying so: pytest-xdist stops the session
        then (restarting is off for remote workers, see `_remote_workers_not_restarted`), and would only count
        the items it ran."""
        if not self.lost or hasattr(self.config, "workerinput"):
            return
        lost = "; ".join(self.lost)
        for nodeid in self.collected:
            if nodeid in self.finished:
                continue
            path = nodeid.split("::", 1)[0]
            report = pytest.TestReport(
                nodeid=nodeid, location=(path, None, nodeid), keywords={}, outcome="failed", when="call",
                longrepr=f"not run: the session stopped when worker {lost} was lost, before any worker ran "
                         f"{nodeid}; run it again (pytest {nodeid}, or --lf)")
            self.config.hook.pytest_runtest_logreport(report=report)

    def _bring_back(self, report: pytest.TestReport) -> None:
        """A remote worker's evidence folder into this session's evidence root, and every path to it in the
        report (the result, the JUnit properties, the failure's text) made the one here."""
        shipped = getattr(report, EVIDENCE_ATTRIBUTE, None)
        if isinstance(shipped, list) and not hasattr(self.config, "workerinput"):  # on the controller only
            from harness.evidence_archive import unpack

            delattr(report, EVIDENCE_ATTRIBUTE)  # megabytes, not to be kept with the report
            from harness.chain import keep_run_key

            for run in shipped:
                there = str(run["folder"])
                here = evidence_root_of(self.config).resolve() / Path(there).name
                unpack(str(run["archive"]), here)
                if isinstance(run.get("key"), str) and run["key"]:
                    keep_run_key(here, run["key"].encode(), "run")
                self.moved[there] = str(here)
        if not self.moved:
            return
        report.user_properties = [(name, self.moved.get(value, value) if isinstance(value, str) else value)
                                  for name, value in report.user_properties]
        entries = getattr(getattr(report.longrepr, "reprtraceback", None), "reprentries", None) or []
        for entry in entries:
            lines = getattr(entry, "lines", None)
            if isinstance(lines, list):
                entry.lines = [functools.reduce(lambda text, pair: text.replace(*pair), self.moved.items(), line)
                               for line in lines]

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        # a scenario file that failed to load: `--lf` alone collects it again
        path = self.config.rootpath / str(report.nodeid).split("::", 1)[0]
        if report.failed and path.suffix in (".yaml", ".yml") and (
                path.resolve() in self.config.stash.get(_selected, set()) or _looks_like_scenario(path)):
            self.files[str(report.nodeid)] = str(path.resolve())

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lines = []
        taken = config.stash.get(_aliases_taken, [])
        if taken:
            longs = {alias: name for name, alias in ALIASES.items()}
            lines.append("retry-harness: " + ", ".join(f"{alias} belongs to another plugin here, use {longs[alias]}"
                                                       for alias in taken))
        project = config.stash.get(_project_key, None)
        if project is not None:
            lines.append(f"retry-harness: project {project.path} ({len(project.destinations)} destination(s), "
                         f"{len(project.intents)} intent(s), mode {project.mode}): the catalogue runs on its "
                         "destinations")
        pairs: list[tuple[Path, Path]] = config.stash.get(_shadowed_key, [])
        for run, left in dict.fromkeys(pairs):
            lines.append(f"retry-harness: {run} is run in place of {left} (the same name)")
        return lines

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.not_applicable and self.config.get_verbosity() >= -1:  # -q too: never skipped in silence
            terminalreporter.section("retry-harness: not applicable to this project")
            for name, reason in sorted(self.not_applicable.items()):
                terminalreporter.write_line(f"{name}: {reason}", yellow=True)
        if not self.results:
            return
        from harness.report import render_failure_pointer, render_pass_line, render_result
        from harness.results.scenario_result import ScenarioResult

        verbosity = self.config.get_verbosity()
        full = verbosity >= 1 or "P" in getattr(terminalreporter, "reportchars", "")
        lines: list[tuple[str, bool]] = []
        verdicts = []
        for data in self.results:
            result = ScenarioResult.from_dict(data)
            if not result.incomplete:
                verdicts.append(result.verdict)
            if result.passed and full:
                lines.append((render_result(result, shown=findings_shown(self.config)) + "\n", True))
            elif result.passed and verbosity >= 0:
                lines.append((render_pass_line(result), True))
            elif not result.passed and verbosity >= 0:  # the whole verdict is in the failure report above
                lines.append((render_failure_pointer(result), False))
        self.results.clear()
        if lines:
            terminalreporter.section("retry-harness verdicts")
            for text, passed in lines:
                terminalreporter.write_line(text, green=passed, red=not passed)
        if len(verdicts) > 1 and verbosity >= 0:
            from harness.coverage import coverage_line

            said = coverage_line(verdicts)
            if said:
                terminalreporter.write_line(said)

    @pytest.hookimpl(optionalhook=True)  # pytest-xdist's, on the controller
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        self.collected = self.collected or list(ids)  # every worker collected the same (xdist checks it)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        if error is not None:
            self.lost.append(f"{node.gateway.id} ({node.gateway.spec}: {error})")

    @pytest.hookimpl(tryfirst=True)  # before the JUnit XML plugin writes its file
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._report_unrun()
        cache = getattr(self.config, "cache", None)
        if cache is None or hasattr(self.config, "workerinput") or not self.files:
            return
        known = {nodeid: path for nodeid, path in cache.get(CACHE_KEY, {}).items() if Path(path).is_file()}
        cache.set(CACHE_KEY, {**known, **self.files})


# -- for a team's own tests: fixtures and helpers ---------------------------------------------------

class HarnessEngine:
    """The harness of one pytest session (process): this process's warm destination pool and shared
    fault proxy, the evidence root and the scenario search path. `run` runs one scenario."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        # on a remote xdist worker, a private folder: each run goes back to the controller with its report
        self.remote = bool(getattr(config, "workerinput", {}).get(REMOTE_WORKER_KEY))
        self.evidence_root = (Path(tempfile.mkdtemp(prefix="retry-harness-evidence-")) if self.remote
                              else evidence_root_of(config))
        self.keep_evidence: str = config.getoption(KEEP_DEST)
        self.sandbox = "off" if config.getoption(NO_SANDBOX_DEST) else None  # None: HARNESS_SANDBOX, else auto
        self.engine_used = False  # whether `close` has a destination pool to stop (the controller never runs one)

    @property
    def pool(self) -> Any:
        """This process's warm `DestinationPool` (started on first use, stopped by `close`)."""
        from harness.engine import destination_pool

        self.engine_used = True
        return destination_pool()

    @property
    def proxy(self) -> Any:
        """This process's embedded fault proxy (`ProxyHost.shared()`, stopped when the process exits)."""
        from harness.proxy.host import ProxyHost

        return ProxyHost.shared()

    def load(self, scenario: str | os.PathLike[str] | Scenario) -> Scenario:
        """A scenario by name (looked up as `--scenario` does), by path to its .yaml file, or as it is."""
        from harness.errors import ScenarioError
        from harness.scenario import Scenario, load, resolve

        if isinstance(scenario, Scenario):
            return scenario
        paths = resolve(os.fspath(scenario), search_dirs(self.config))
        if len(paths) != 1:
            raise ScenarioError(f"{os.fspath(scenario)!r} names {len(paths)} scenarios "
                                f"({', '.join(p.stem for p in paths)}); run_scenario runs one")
        return load(paths[0])

    def agent_for(self, loaded: Scenario, agent: str | ContainerAgent | None,
                  default: str | None = None) -> str | ContainerAgent | None:
        """The agent a run uses: `agent` (a command or a ``ContainerAgent``), else `--harness-agent-image` (the
        command `--harness-agent`, else the image's own), else `--harness-agent`, else the scenario's, else the
        ini option retry_harness_agent, else `default` (None: the engine's, the bundled reference agent)."""
        from harness.scenario import chosen_agent

        config = self.config
        return chosen_agent(agent or config.getoption(AGENT_DEST), config.getoption(AGENT_IMAGE_DEST), loaded.agent,
                            configured=config.getini(AGENT_INI), default=default,
                            option=_spelling(config, AGENT_IMAGE_OPTION))

    def run(self, scenario: str | os.PathLike[str] | Scenario, *, agent: str | ContainerAgent | None = None,
            keep_evidence: str | None = None, black_box: bool | None = None,
            writers: Sequence[ResultWriter] | None = None) -> ScenarioResult:
        """Run one scenario and judge it. The agent: `agent` (a command, or a ``ContainerAgent``), else
        `--harness-agent-image` (running `--harness-agent`, else the image's command), else `--harness-agent`,
        else the scenario's, else the ini option retry_harness_agent, else the bundled reference agent.
        `black_box`: judge from the wire and the ledger alone (default: `--harness-black-box`; a
        scenario with `agent_log: none` is judged so anyway). `writers`: what is written into its evidence folder
        (``harness.writers``; default: verdict.json, a failed run's report.html, verdict.txt)."""
        from harness.engine import run_scenario

        loaded = self.load(scenario)
        config = self.config
        command = self.agent_for(loaded, agent)
        wire_only = bool(config.getoption(BLACK_BOX_DEST)) if black_box is None else black_box
        result = run_scenario(loaded, agent=command, evidence_root=self.evidence_root, proxy=self.proxy,
                              pool=self.pool, keep_evidence=keep_evidence or self.keep_evidence, black_box=wire_only,
                              agent_log=config.getoption(AGENT_LOG_DEST), limits=limits_of(config),
                              agent_timeout=config.getoption(AGENT_TIMEOUT_DEST), writers=writers,
                              sandbox=self.sandbox)
        otel_out = config.getoption(OTEL_OUT_DEST)
        if otel_out:
            from harness.otel.verdict import export_result

            export_result(result, Path(otel_out).resolve())
        return result

    def explore(self, scenario: str | os.PathLike[str] | Scenario, *, agent: str | ContainerAgent | None = None,
                examples: int | None = None, seed: int | None = None, **options: Any) -> Any:
        """Explore fault schedules over one scenario (`harness.explore.explore`; `options` are its keywords).
        The example database is <rootdir>/.retry-harness/explore; the reproducer goes to
        <evidence root>/explore/NAME.found.yaml unless `reproducer=` says otherwise."""
        from harness.contract import REFERENCE_AGENT
        from harness.explore import explore
        from harness.explore_defaults import DATABASE_FOLDER, DEFAULT_EXAMPLES

        loaded = self.load(scenario)
        config = self.config
        self.engine_used = True  # the search runs the engine, on this process's pool
        command = self.agent_for(loaded, agent, REFERENCE_AGENT)
        assert command is not None
        options.setdefault("reproducer", self.evidence_root / "explore" / f"{loaded.name}.found.yaml")
        options.setdefault("database", config.rootpath / DATABASE_FOLDER)
        options.setdefault("sandbox", self.sandbox)
        return explore(loaded, agent=command, evidence_root=self.evidence_root,
                       examples=examples or DEFAULT_EXAMPLES, seed=seed, **options)

    def close(self) -> None:
        """Stop the destination processes (the proxy stops when the process exits)."""
        if self.engine_used:
            from harness.engine import close_destination_pool

            close_destination_pool()
        if self.remote:
            from harness.safe_files import remove_tree

            remove_tree(self.evidence_root)


def findings_shown(config: pytest.Config) -> int | None:
    """``--harness-findings-shown N`` (None: the report's default); a negative N is a usage error."""
    shown: int | None = config.getoption(FINDINGS_SHOWN_DEST)
    if shown is not None and shown < 0:
        raise pytest.UsageError(f"{FINDINGS_SHOWN_OPTION}: expected a whole number of 0 or more, got {shown}")
    return shown


def limits_of(config: pytest.Config) -> dict[str, int]:
    """``--harness-limit NAME=N`` (repeatable) as ``{name: n}``; a bad one is a usage error naming the limits."""
    from harness.limits import parse_limit

    limits: dict[str, int] = {}
    for text in config.getoption(LIMIT_DEST) or []:
        try:
            name, value = parse_limit(text)
        except ValueError as exc:
            raise pytest.UsageError(f"{LIMIT_OPTION}: {exc}") from None
        limits[name] = value
    return limits


def harness_engine_of(config: pytest.Config) -> HarnessEngine:
    if _engine_key not in config.stash:
        config.stash[_engine_key] = HarnessEngine(config)
    return config.stash[_engine_key]


@pytest.fixture(scope="session")
def harness_engine(pytestconfig: pytest.Config) -> Generator[HarnessEngine]:
    """retry-harness: the session's harness (warm destination pool, fault proxy, evidence root from
    --harness-evidence-dir); `harness_engine.run(scenario, agent=...)`. Destinations stop at session end."""
    engine = harness_engine_of(pytestconfig)
    yield engine
    engine.close()


@pytest.fixture
def run_scenario(harness_engine: HarnessEngine, request: pytest.FixtureRequest) -> Callable[..., ScenarioResult]:
    """retry-harness: `run_scenario("response_lost", agent="python my_agent.py")` (a name, a path or a
    Scenario) runs one scenario and returns its ScenarioResult (`black_box=True`: judged from the wire and
    the ledger alone); `assert_scenario_passed(result)` fails the test with the plugin's failure report.
    The test's JUnit properties name the run."""

    def run(scenario: str | os.PathLike[str] | Scenario, agent: str | ContainerAgent | None = None, *,
            keep_evidence: str | None = None, black_box: bool | None = None) -> ScenarioResult:
        __tracebackhide__ = True
        from harness.errors import HarnessError

        try:
            result = harness_engine.run(scenario, agent=agent, keep_evidence=keep_evidence, black_box=black_box)
        except HarnessError as exc:
            error = str(exc)  # failed outside the except block: no "during handling of..." chain
        else:
            request.node.user_properties.extend(result_properties(result))
            return result
        pytest.fail(error, pytrace=False)

    return run


def assert_scenario_passed(result: ScenarioResult) -> None:
    """Fail the test unless the run passed, with the plugin's failure report: the rule codes on the
    first line (pytest's short summary), then the verdict with its evidence."""
    __tracebackhide__ = True
    if not result.passed:
        from harness.report import render_failure_line, render_result

        pytest.fail(f"{render_failure_line(result)}\n{render_result(result)}", pytrace=False)


def catalogue(names: str | Iterable[str] | None = None) -> list[Any]:
    """The bundled catalogue's scenarios for `@pytest.mark.parametrize`: `pytest.param(path, id=name)`
    for every scenario (`names=None`) or those `names` select (names or globs such as 'response_*')."""
    from harness.resources import catalogue_dir
    from harness.scenario import resolve

    selectors = ["all"] if names is None else [names] if isinstance(names, str) else list(names)
    paths = dict.fromkeys(p for selector in selectors for p in resolve(selector, [catalogue_dir()]))
    return [pytest.param(path, id=path.stem) for path in paths]
