"""The pytest plugin as a well-mannered pytest plugin: node ids that re-run, `--lf`/`--ff`, quiet
output, the short summary, JUnit XML, option names that cannot clash, and a rootdir that stays put.

Every run is a real pytest subprocess (pytester) in a folder outside the repository, as in a team's
project: the scenarios come from the bundled catalogue or from files the test writes.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.resources import catalogue_dir

WRONG = "python -m harness.agents.wrong."


@pytest.fixture
def run(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """`pytest ARGS` in a subprocess with the cache on (for --lf), a wide terminal (so the short
    summary is not cut), and the evidence in a temp folder."""
    monkeypatch.setenv("COLUMNS", "250")
    evidence = tmp_path_factory.mktemp("evidence")

    # a bound against a hang, not a speed check: with a CPU-bound neighbour, a `-n 2` run of two scenarios here
    # took over 120 s (its workers start, import and make their proxies on a share of two cores)
    def run(*args: str, timeout: float = 600) -> pytest.RunResult:
        return pytester.runpytest_subprocess("--harness-evidence-dir", str(evidence), *args, timeout=timeout)

    return run


def scenario_file(folder: Path, name: str, *, tickets: int = 1) -> Path:
    """The bundled response_lost under another name; `tickets=2` makes its own expectation fail
    (the reference agent is right, the scenario demands two tickets)."""
    source = (catalogue_dir() / "response_lost.yaml").read_text()
    assert "name: response_lost" in source and "effects: {tickets: 1}" in source
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(source.replace("name: response_lost", f"name: {name}")
                    .replace("effects: {tickets: 1}", f"effects: {{tickets: {tickets}}}"))
    return path


def node_ids(result: pytest.RunResult, outcome: str = "PASSED|FAILED") -> list[str]:
    return re.findall(rf"^(\S+::\S+) (?:{outcome})", result.stdout.str(), re.MULTILINE)


# -- 1. node ids that re-run -------------------------------------------------------------------------

def test_a_bundled_scenarios_node_id_reruns_exactly_that_item(run) -> None:
    first = run("--scenario", "response_lost", "--scenario", "rate_limited", "-v")
    first.assert_outcomes(passed=2)
    ids = node_ids(first)
    assert len(ids) == 2 and not any(i.startswith("::") for i in ids), ids
    [lost] = [i for i in ids if i.endswith("::response_lost")]
    # the same id wherever the package is installed (xdist workers on other machines must agree on it)
    assert lost == "harness/scenarios/response_lost.yaml::response_lost"
    again = run(lost, "-v")  # no --scenario: the node id alone
    again.assert_outcomes(passed=1)
    assert node_ids(again) == [lost]


def test_a_scenario_file_given_by_path_has_a_node_id_that_reruns(run, pytester: pytest.Pytester) -> None:
    scenario_file(pytester.path / "ours", "ours_lost")
    first = run("--scenario", "ours/ours_lost.yaml", "-v")
    first.assert_outcomes(passed=1)
    assert node_ids(first) == ["ours/ours_lost.yaml::ours_lost"]
    again = run("ours/ours_lost.yaml::ours_lost", "-v")
    again.assert_outcomes(passed=1)
    assert node_ids(again) == ["ours/ours_lost.yaml::ours_lost"]


def test_a_yaml_file_that_is_no_scenario_is_not_collected_as_one(run, pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", settings="colour: blue\n")
    result = run("settings.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["collected 0 items"])
    result.stderr.fnmatch_lines(["ERROR: not found: *settings.yaml"])


@pytest.fixture
def one_failure(run, pytester: pytest.Pytester) -> str:
    """A session with one failing scenario (its own expectation) and one passing; a plain test too."""
    scenario_file(pytester.path / "ours", "two_tickets", tickets=2)
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    first = run("--scenario", "ours/two_tickets.yaml", "--scenario", "response_lost", "test_plain.py", "-v")
    first.assert_outcomes(passed=2, failed=1)
    [failed] = node_ids(first, "FAILED")
    assert failed == "ours/two_tickets.yaml::two_tickets"
    return failed


def test_lf_alone_reruns_the_failed_scenario(run, one_failure: str) -> None:
    result = run("--lf", "-v")
    result.assert_outcomes(failed=1)
    assert node_ids(result) == [one_failure]


def test_ff_alone_runs_the_failed_scenario_first_then_the_rest(run, one_failure: str) -> None:
    result = run("--ff", "-v")
    result.assert_outcomes(failed=1, passed=1)
    assert node_ids(result) == [one_failure, "test_plain.py::test_plain"]


def test_lf_alone_collects_again_a_scenario_file_that_failed_to_load(run, pytester: pytest.Pytester) -> None:
    path = scenario_file(pytester.path / "ours", "broken")
    good = path.read_text()
    path.write_text(good + "\nno_such_key: 1\n")
    first = run("--scenario", "ours/broken.yaml")
    first.assert_outcomes(errors=1)
    first.stdout.fnmatch_lines(["*no_such_key*"])
    path.write_text(good)  # fixed
    again = run("--lf", "-v")
    again.assert_outcomes(passed=1)
    assert node_ids(again) == ["ours/broken.yaml::broken"]


# -- 2. quiet output ------------------------------------------------------------------------------

VERDICT_TEXT = ("verdict: PASSED", "operation op_", "held: all", "retry-harness verdicts")


def test_quiet_prints_no_verdict_of_passing_scenarios(run) -> None:
    result = run("-q", "--scenario", "response_lost", "--scenario", "rate_limited")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert not [text for text in VERDICT_TEXT if text in out], out
    assert len(result.stdout.lines) <= 3, out  # progress, the final line


def test_default_verbosity_prints_one_line_per_passing_scenario(run) -> None:
    result = run("--scenario", "response_lost", "--scenario", "rate_limited")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "verdict: PASSED" not in out and "operation op_" not in out
    passed = "scenario * with agent *: PASS (1 operation(s), * check(s) exercised and held, * not exercised) evidence:*"
    result.stdout.fnmatch_lines(["*retry-harness verdicts*", passed, passed])


@pytest.mark.parametrize("flag", ["-v", "-rA"])
def test_verbose_or_rA_prints_the_passing_verdicts(run, flag: str) -> None:
    result = run(flag, "--scenario", "response_lost")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert all(text in out for text in VERDICT_TEXT), out


def test_quiet_keeps_the_full_report_of_a_failure(run) -> None:
    result = run("-q", "--scenario", "response_lost", "--agent", WRONG + "new_key_per_attempt")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*FAILURES*", "scenario response_lost with agent *new_key_per_attempt*: FAIL",
                                 "*FAIL H002 idempotency-key-reused*", "evidence: *"])


# -- 3. short summary (the JUnit test below checks it too) ----------------------------------------

def test_the_short_summary_of_an_expectation_failure_says_X001(run, pytester: pytest.Pytester) -> None:
    scenario_file(pytester.path, "two_tickets", tickets=2)
    result = run("-rf", "--scenario", "two_tickets.yaml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["FAILED two_tickets.yaml::two_tickets - X001 (1 of the scenario's expectations)"])


# -- 4. JUnit XML ---------------------------------------------------------------------------------

@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["in-process", "xdist"])
def test_short_summary_and_junit_xml_name_the_rule_codes_and_the_catalogue(
        run, pytester: pytest.Pytester, workers: list[str]) -> None:
    scenario_file(pytester.path / "team_catalogue", "ours_lost")
    xml_path = pytester.path / "junit.xml"
    result = run(*workers, "-rf", f"--junitxml={xml_path}", "--scenario", "response_lost",
                 "--scenario", "team_catalogue/ours_lost.yaml", "--agent", WRONG + "new_key_per_attempt")
    result.assert_outcomes(failed=2)
    # 3. the short summary names the failing rule codes and the operation
    result.stdout.fnmatch_lines(["*short test summary info*",
                                 "FAILED *response_lost.yaml::response_lost - H002 * H016 on op_*"])
    result.stdout.fnmatch_lines(["FAILED team_catalogue/ours_lost.yaml::ours_lost - H002 * H016 on op_*"])
    assert "Traceback" not in result.stdout.str()
    cases = {case.get("name"): case for case in ET.parse(xml_path).iter("testcase")}
    assert set(cases) == {"response_lost", "ours_lost"}
    assert cases["response_lost"].get("classname") == "retry_harness.catalogue"
    assert cases["ours_lost"].get("classname") == "team_catalogue"
    for case in cases.values():
        failure = case.find("failure")
        assert failure is not None
        message = failure.get("message", "")
        assert "\n" not in message and re.fullmatch(r"H002 .*H016 on op_\w+(; X001 .*)?", message), message
        assert "FAIL H002 idempotency-key-reused" in (failure.text or "")
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert set(props) == {"scenario", "agent", "rule_codes", "checks_held", "checks_not_exercised",
                              "checks_failed", "evidence_dir"}, props
        assert "H002" in props["checks_failed"].split(), props
        assert props["scenario"] == case.get("name")
        assert props["agent"] == WRONG + "new_key_per_attempt"
        assert {"H002", "H016"} <= set(props["rule_codes"].split())
        assert Path(props["evidence_dir"], "verdict.json").is_file()


def test_junit_prefix_goes_before_the_catalogue(run, pytester: pytest.Pytester) -> None:
    xml_path = pytester.path / "junit.xml"
    run(f"--junitxml={xml_path}", "--junit-prefix=ci", "--scenario", "response_lost").assert_outcomes(passed=1)
    [case] = ET.parse(xml_path).iter("testcase")
    assert case.get("classname") == "ci.retry_harness.catalogue"


# -- 5. option names that cannot clash ------------------------------------------------------------

def test_long_forms_run_scenarios(run) -> None:
    result = run("--harness-scenario", "response_lost", "--harness-agent", WRONG + "idle",
                 "--harness-keep-evidence", "failed", "-rf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["FAILED *::response_lost - H021*"])


def test_an_empty_agent_in_the_long_form_is_a_usage_error_naming_that_spelling(run) -> None:
    result = run("--harness-scenario", "response_lost", "--harness-agent", "")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ERROR: --harness-agent: '' is empty" in result.stderr.str()
    assert "leave --harness-agent out" in result.stderr.str()


CLASHING_OPTIONS = """
def pytest_addoption(parser):
    parser.addoption("--scenario", action="store_true", help="the team's own --scenario flag")
    parser.addoption("--agent", default="007", help="the team's own --agent")
"""

CLASHING_TEST = """
def test_the_team_options_are_theirs(request):
    assert request.config.getoption("scenario") is True
    assert request.config.getoption("agent") == "bond"
"""


@pytest.mark.parametrize("how", ["conftest", "plugin"])
def test_a_conftest_or_plugin_that_declares_scenario_keeps_it_and_the_long_form_still_works(
        run, pytester: pytest.Pytester, how: str) -> None:
    if how == "conftest":
        pytester.makeconftest(CLASHING_OPTIONS)
        plugin: list[str] = []
    else:  # loaded with -p: registered before this plugin's own options
        pytester.makepyfile(team_plugin=CLASHING_OPTIONS)
        pytester.syspathinsert()
        plugin = ["-p", "team_plugin"]
    pytester.makepyfile(test_team=CLASHING_TEST)
    result = run(*plugin, "test_team.py", "--scenario", "--agent", "bond", "--harness-scenario", "response_lost",
                 "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["retry-harness: --scenario belongs to another plugin here, use --harness-scenario, "
                                 "--agent belongs to another plugin here, use --harness-agent"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_loaded_by_a_conftests_pytest_plugins_with_autoload_off_the_aliases_still_work(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("COLUMNS", "250")
    pytester.makeconftest('pytest_plugins = ["harness.pytest_plugin"]\n')
    # with `=`: before a conftest loads the plugin, pytest reads a separate value as a test path
    evidence = pytester.path / "evidence"
    result = pytester.runpytest_subprocess(f"--harness-evidence-dir={evidence}", "--scenario", "response_lost",
                                           "--agent", WRONG + "idle", "-rf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["FAILED *::response_lost - H021*"])


def test_help_lists_every_option_and_every_ini_option_the_plugin_reads(pytester: pytest.Pytester) -> None:
    import harness.pytest_plugin as plugin

    source = Path(plugin.__file__).read_text()
    read = set(re.findall(r"getini\((\w+)\)", source))
    assert read, "the plugin reads no ini option?"
    help_text = pytester.runpytest_subprocess("--help").stdout.str()
    for constant in read:
        name = getattr(plugin, constant)
        assert re.search(rf"^\s+{name} \(\w+\):", help_text, re.MULTILINE), f"ini {name} not declared"
    for option in [*plugin.ALIASES, *plugin.ALIASES.values()]:
        assert option in help_text, option


def test_fixtures_lists_the_plugin_fixtures_with_their_docstrings(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--fixtures")
    result.stdout.fnmatch_lines(["harness_engine [[]session scope[]]*", "*retry-harness: the session's harness*",
                                 "run_scenario*", "*retry-harness: `run_scenario(*"])


# -- 7. a path given to --agent does not move the rootdir ------------------------------------------

@pytest.mark.parametrize("spelling", ["--agent", "--harness-agent"])
def test_an_agent_in_another_folder_does_not_move_the_rootdir(pytester: pytest.Pytester, tmp_path: Path,
                                                               spelling: str) -> None:
    project = pytester.mkdir("project")
    evidence = tmp_path / "evidence-from-the-ini"
    (project / "pytest.ini").write_text(f"[pytest]\naddopts = -p no:cacheprovider --harness-evidence-dir={evidence}\n")
    agents = pytester.mkdir("agents")
    agent = agents / "agent.sh"
    agent.write_text("#!/bin/sh\nexec python -m harness.agents.reference\n")
    agent.chmod(0o755)
    monkeypatch = pytest.MonkeyPatch()
    try:
        monkeypatch.chdir(project)
        result = pytester.runpytest_subprocess("--scenario", "response_lost", spelling, str(agent))
    finally:
        monkeypatch.undo()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"rootdir: {project}", "configfile: pytest.ini"])
    assert len(list(evidence.glob("response_lost-*/verdict.json"))) == 1  # the project's addopts held
