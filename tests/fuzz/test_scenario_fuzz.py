"""Seeded fuzzing of the scenario loader and of `python -m harness run` (issue 10).

Every hostile file either loads or raises a ScenarioError whose message names the file; `run` exits
0, 1 or 2 and never prints a traceback. Each case is bounded by the loader's own limits
(harness.scenario MAX_*), not by a test timeout: a case that hangs is a bug these tests show as a
hung CI job. The seeds are fixed, so a failure names a case that reproduces (see tests/fuzz/corpus.py
and benchmarks/fuzz_scenarios.py for thousands more).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import ScenarioError
from harness.scenario import Scenario, load
from tests.fuzz.corpus import _dump, _replace, cases, key_paths, seeds

LOAD_SEED, LOAD_CASES = 20261201, 400
RUN_SEED, RUN_CASES = 10, 20
RUN_TIMEOUT_SECONDS = 120  # a run that loads goes end to end: destinations, proxy, reference agent

LOAD_CORPUS = list(cases(LOAD_SEED, LOAD_CASES))
RUN_CORPUS = list(cases(RUN_SEED, RUN_CASES))
REPO = Path(__file__).resolve().parents[2]


def assert_loads_or_names_the_file(path: Path) -> Scenario | None:
    __tracebackhide__ = True
    try:
        return load(path)
    except ScenarioError as exc:
        message = str(exc)
        assert message.startswith(str(path)), f"the error does not start with the file name: {message[:300]}"
        return None


@pytest.mark.parametrize(("label", "content"), LOAD_CORPUS, ids=[label for label, _ in LOAD_CORPUS])
def test_a_hostile_file_loads_or_gives_a_scenario_error_naming_it(label: str, content: bytes, tmp_path: Path) -> None:
    path = tmp_path / f"{label}.yaml"
    path.write_bytes(content)
    assert_loads_or_names_the_file(path)


_SCALARS = (st.none() | st.booleans() | st.integers() | st.floats()
            | st.text(st.characters(codec="utf-8"), max_size=30)
            | st.sampled_from(["reverse", "stripe", "drop_request", "succeeded", "tickets", "POST", "/x/{id}"]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


@settings(max_examples=150, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_any_value_at_any_key_path_loads_or_names_the_file(data: st.DataObject, tmp_path: Path) -> None:
    seed = data.draw(st.sampled_from(seeds()), label="scenario")
    where = data.draw(st.sampled_from(key_paths(seed.data)), label="key path")
    value: Any = data.draw(_VALUES, label="value")
    path = tmp_path / "odd.yaml"
    path.write_bytes(_dump(_replace(seed.data, where, value)))
    scenario = assert_loads_or_names_the_file(path)
    if scenario is not None:  # what loaded also dumps (the engine writes it as JSON for the agent)
        yaml.safe_dump(scenario.model_dump(mode="json"))


@pytest.mark.parametrize(("label", "content"), RUN_CORPUS, ids=[label for label, _ in RUN_CORPUS])
def test_run_exits_0_1_or_2_without_a_traceback(label: str, content: bytes, tmp_path: Path) -> None:
    path = tmp_path / f"{label}.yaml"
    path.write_bytes(content)
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(path), "--evidence-dir", str(tmp_path / "evidence")],
        capture_output=True, text=True, errors="replace", timeout=RUN_TIMEOUT_SECONDS, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode in (0, 1, 2), proc.stderr[-3000:]
    if proc.returncode == 2:
        assert proc.stderr.startswith(f"error: {path}"), proc.stderr[:500]
