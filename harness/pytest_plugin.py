"""pytest plugin: `pytest --scenario NAME [--agent COMMAND]` runs harness scenarios as test items.

Registered through the `pytest11` entry point, so it loads in every pytest run of an environment
where the project is installed: it must cost nothing when unused. Heavy modules (mitmproxy, the
engine, the checker) are imported inside hooks, only when a scenario runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr  # what Node.repr_failure returns; pytest does not export it

    from harness.engine import ScenarioResult
    from harness.scenario import Scenario

SCENARIO_OPTION = "--scenario"
AGENT_OPTION = "--agent"
EVIDENCE_OPTION = "--evidence-dir"
KEEP_OPTION = "--keep-evidence"
AGENT_INI = "retry_harness_agent"
SCENARIO_DIRS_INI = "retry_harness_scenario_dirs"
VERDICT_PROPERTY = "retry_harness_verdict"

_selected = pytest.StashKey[set[Path]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("retry-harness", "retry-harness (fault injection for agent retries)")
    group.addoption(
        SCENARIO_OPTION, action="append", default=[], metavar="NAME",
        help="run a scenario as a test: a name (scenarios/NAME.yaml), a glob such as 'response_*', "
             "'all', or a path to a .yaml file. Repeatable.")
    group.addoption(
        AGENT_OPTION, default=None, metavar="COMMAND",
        help="agent command to run instead of the scenario's or the default "
             "(default: 'python -m harness.agents.reference').")
    group.addoption(
        EVIDENCE_OPTION, default=None, metavar="DIR",
        help="folder that keeps each run's evidence (default: <rootdir>/evidence).")
    group.addoption(
        KEEP_OPTION, default="all", choices=("all", "failed"),
        help="keep the evidence of every run (all, default) or only of failed runs (failed).")
    parser.addini(AGENT_INI, "agent command used when neither --agent nor the scenario names one",
                  default=None)
    parser.addini(SCENARIO_DIRS_INI, "folders searched for scenarios/NAME.yaml", type="paths",
                  default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "scenario: a retry-harness scenario run as a test item")
    # mitmproxy's own TLS code warns about pyOpenSSL deprecations in its thread: not the user's to fix
    config.addinivalue_line("filterwarnings", r"ignore::DeprecationWarning:mitmproxy\..*")
    agent: str | None = config.getoption("agent")
    if agent is not None:  # an empty --agent (an unset variable) must not run the default agent and pass
        from harness.contract import agent_option_problem

        problem = agent_option_problem(agent, AGENT_OPTION)
        if problem:
            raise pytest.UsageError(f"{AGENT_OPTION}: {problem}")
    selectors: list[str] = config.getoption("scenario") or []
    if not selectors:
        return
    from harness.errors import ScenarioError
    from harness.resources import catalogue_dir
    from harness.scenario import resolve

    search = [*map(Path, config.getini(SCENARIO_DIRS_INI)), config.rootpath / "scenarios",
              Path.cwd() / "scenarios", catalogue_dir()]
    selected: list[Path] = []
    try:
        for selector in selectors:
            selected.extend(resolve(selector, search))
    except ScenarioError as exc:
        raise pytest.UsageError(f"{SCENARIO_OPTION}: {exc}") from None
    config.stash[_selected] = set(selected)
    paths = [str(p) for p in dict.fromkeys(selected)]
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        config.args.extend(paths)  # explicit test paths run too
    else:
        config.args[:] = paths  # `pytest --scenario X` runs just the scenarios, not testpaths


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.resolve() in parent.config.stash.get(_selected, set()):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


class ScenarioFile(pytest.File):
    """A scenario YAML file: one test item."""

    def collect(self) -> list[pytest.Item]:
        from harness.errors import ScenarioError
        from harness.scenario import load

        try:
            scenario = load(self.path)
        except ScenarioError as exc:
            raise self.CollectError(str(exc)) from None
        return [ScenarioItem.from_parent(self, name=scenario.name, scenario=scenario)]


class ScenarioFailed(Exception):
    """Raised when the checker's verdict or the scenario's expectations do not hold, or when the harness
    lost evidence of the run (INCOMPLETE: the message says which source and why; no rule findings)."""

    def __init__(self, result: ScenarioResult) -> None:
        from harness.report import render_result

        super().__init__(render_result(result))
        self.result = result


class ScenarioItem(pytest.Item):
    def __init__(self, *, scenario: Scenario, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.add_marker("scenario")

    def runtest(self) -> None:
        __tracebackhide__ = True
        from harness.engine import run_scenario

        config = self.config
        agent = config.getoption("agent") or self.scenario.agent or config.getini(AGENT_INI) or None
        root = config.getoption("evidence_dir")
        evidence_root = Path(root) if root else config.rootpath / "evidence"
        result = run_scenario(self.scenario, agent=agent, evidence_root=evidence_root,
                              keep_evidence=config.getoption("keep_evidence"))
        # data, not prose: the xdist controller renders it (Hypothesis's plugin does the same)
        self.user_properties.append((VERDICT_PROPERTY, json.dumps(result.to_dict(), default=str)))
        if not result.passed:
            raise ScenarioFailed(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str | TerminalRepr:
        from harness.errors import HarnessError

        if isinstance(excinfo.value, (ScenarioFailed, HarnessError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"scenario {self.name}"


def pytest_sessionfinish(session: pytest.Session) -> None:
    import sys

    engine = sys.modules.get("harness.engine")  # only if a scenario ran: nothing to import otherwise
    if engine is not None:
        engine.close_destination_pool()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # runs on the xdist controller too: results travel in user_properties as JSON
    if report.when != "call":
        return
    for name, value in report.user_properties:
        if name == VERDICT_PROPERTY and isinstance(value, str):  # runtest stores the verdict as a JSON string
            _session_results.append(json.loads(value))


_session_results: list[dict[str, Any]] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _session_results:
        return
    from harness.engine import ScenarioResult
    from harness.report import render_failure_pointer, render_result

    terminalreporter.section("retry-harness verdicts")
    for data in _session_results:
        result = ScenarioResult.from_dict(data)
        if result.passed:
            terminalreporter.write_line(render_result(result), green=True)
        else:  # the whole verdict is already in the failure report above
            terminalreporter.write_line(render_failure_pointer(result), red=True)
        terminalreporter.write_line("")
    _session_results.clear()
