"""retry-harness: fault injection for agent retry behaviour.

Public names are loaded lazily: the pytest plugin imports this package in every pytest run of an
environment where the project is installed, and must not pay for mitmproxy, pydantic or the checker
unless a scenario runs.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AgentError": "harness.errors",
    "AuditSummary": "harness.results",
    "Evidence": "harness.evidence",
    "Exploration": "harness.explore",
    "EvidenceError": "harness.errors",
    "Finding": "harness.checker",
    "HarnessError": "harness.errors",
    "Recorder": "harness.recorder",
    "Scenario": "harness.scenario",
    "ScenarioError": "harness.errors",
    "ScenarioResult": "harness.results",
    "Schedule": "harness.schedule",
    "Verdict": "harness.checker",
    "audit_file": "harness.audit",
    "check": "harness.checker",
    "explore": "harness.explore",
    "fingerprint": "harness.fingerprint",
    "load_evidence": "harness.evidence",
    "load_scenario": "harness.scenario",
    "render_text": "harness.report",
    "run_scenario": "harness.engine",
    "verify_file": "harness.chain",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    module = importlib.import_module(_EXPORTS[name])
    return getattr(module, "load" if name == "load_scenario" else name)
