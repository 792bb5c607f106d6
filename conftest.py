"""Shared fixtures for the project's own tests (the plugin under test loads through its entry point)."""

from __future__ import annotations

import pytest


@pytest.fixture
def run_plugin(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory):
    """Run `pytest ARGS` in a subprocess, as a user would, with evidence kept in a temp folder."""

    def run(*args: str, timeout: float = 120) -> pytest.RunResult:
        evidence = tmp_path_factory.mktemp("evidence")
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--evidence-dir", str(evidence), *args, timeout=timeout)
        result.evidence_dir = evidence  # type: ignore[attr-defined]
        return result

    return run
