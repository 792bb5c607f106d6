"""The SDK certification matrix in CI: every connector (a real SDK configuration) against the four fault
scenarios of its API, through the real engine, fault proxy and generic destination, judged in black-box
mode; each cell must equal its line in certification/expected.yaml, and the README's table must be that
file's. 144 cells (Python and TypeScript SDKs, 36 connectors); each SDK at its certified release, in the
environment made for it (certification/environments.py, uv: the `certify` extra).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from certification.matrix import (
    EXPECTED_FILE,
    FAULTS,
    README_FILE,
    SCENARIOS_DIR,
    difference,
    load_expected,
    readme_table,
    run_cell,
)
from certification.npm import NodeEnvironment

CONNECTORS = load_expected()
CELLS = [(name, fault) for name in CONNECTORS for fault in FAULTS]


def test_every_connector_runs_in_an_environment_holding_its_certified_release() -> None:
    """The table names the releases it was measured with, expected.yaml's `certified:`, and each connector runs in
    the environment made for its release: that release and nothing of the harness (no mitmproxy, no h11 pin)."""
    for connector in CONNECTORS.values():
        assert connector.certified, f"{connector.name}: {connector.package} has no release in certified:"
        ready = connector.ready()
        assert ready.environment is not None and ready.environment.version(connector.package) == connector.certified
        runner = ready.environment.node if isinstance(ready.environment, NodeEnvironment) else ready.environment.python
        assert str(runner) in ready.command and connector.script.name in ready.command
        assert "mitmproxy" not in ready.environment.versions and "retry-harness" not in ready.environment.versions
        assert ready.sdk_version == connector.sdk_version == f"{connector.sdk} {connector.certified}"


def test_expected_outcomes_name_real_connectors_scenarios_and_rules() -> None:
    from harness.checker import RULES
    from harness.results import EXPECTATION_CODE

    codes = set(RULES) | {EXPECTATION_CODE}
    scenarios = {p.stem for p in SCENARIOS_DIR.glob("*.yaml")}
    apis = {c.api for c in CONNECTORS.values()}
    assert scenarios == {f"{api}_{fault}" for api in apis for fault in FAULTS}, "one scenario per API and fault"
    for connector in CONNECTORS.values():
        assert connector.script.is_file(), connector.name
        assert set(connector.cells) == set(FAULTS), f"{connector.name}: one cell per fault"
        for fault, cell in connector.cells.items():
            assert cell.verdict in ("pass", "fail"), (connector.name, fault)
            assert (cell.verdict == "fail") == bool(cell.codes), f"{connector.name} {fault}: a fail names its codes"
            assert set(cell.codes) <= codes, f"{connector.name} {fault}: unknown codes {set(cell.codes) - codes}"
        if connector.passes_with is not None:
            safe = CONNECTORS[connector.passes_with]
            assert safe.api == connector.api and safe.sdk == connector.sdk, connector.name
            assert all(c.verdict == "pass" for c in safe.cells.values()), f"{safe.name} must pass all four"
            assert any(c.verdict == "fail" for c in connector.cells.values()), f"{connector.name} fails nothing"


def test_the_readme_table_is_the_expected_matrix() -> None:
    assert readme_table(CONNECTORS) in README_FILE.read_text(encoding="utf-8"), (
        f"the README's SDK table is not {EXPECTED_FILE.name}'s: python -m certification --readme")


@pytest.mark.parametrize("connector, fault", CELLS, ids=[f"{c}-{f}" for c, f in CELLS])
def test_sdk_cell(connector: str, fault: str, tmp_path: Path) -> None:
    cell = run_cell(CONNECTORS[connector], fault, str(tmp_path))
    problem = difference(CONNECTORS[connector], fault, cell)
    stdout = Path(cell.evidence, "agent.stdout") if cell.evidence else None
    assert problem is None, problem + (f"\nthe connector printed: {stdout.read_text()}" if stdout and
                                       stdout.is_file() else "")
