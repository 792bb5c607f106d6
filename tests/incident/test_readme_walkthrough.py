"""docs/incidents.md's walkthrough, run as it reads: a production log of an agent that delivered a webhook
twice, `reproduce` on it, the agent failing the scenario written, the fixed agent passing it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from harness.contract import EvidenceLayout
from harness.engine import run_scenario
from harness.resources import catalogue_dir
from harness.scenario import load

README = (Path(__file__).resolve().parents[2] / "docs" / "incidents.md").read_text()
WRONG = "python -m harness.agents.wrong.fresh_key_after_5xx"


def harness(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=folder, capture_output=True, text=True,
                          timeout=120)


def test_the_readme_incident_walkthrough(tmp_path: Path) -> None:
    production = run_scenario(load(catalogue_dir() / "server_error_after_commit.yaml"), agent=WRONG,
                              evidence_root=tmp_path / "production")
    (tmp_path / "examples").mkdir()
    shutil.copy(EvidenceLayout(production.evidence_dir).agent_log, tmp_path / "examples" / "prod-webhooks.ndjson")
    command = ("python -m harness reproduce examples/prod-webhooks.ndjson --output incident-2026-11-30.yaml "
               "--name webhook_delivered_twice")
    assert command in README
    done = harness(tmp_path, *command.split()[3:])
    assert done.returncode == 0, done.stderr
    written = (tmp_path / "incident-2026-11-30.yaml").read_text()
    for shown in ("action: replace_status", "intent_id: notify-refund", "the destination acted before failing",
                  "was resolved duplicate_effect_confirmed"):
        assert shown in written and shown in README, shown
    assert f'python -m harness run incident-2026-11-30.yaml --agent "{WRONG}"' in README
    failing = harness(tmp_path, "run", "incident-2026-11-30.yaml", "--agent", WRONG)
    assert failing.returncode == 1
    for code in ("FAIL H002 idempotency-key-reused", "FAIL H010 retry-after-unknown-justified",
                 "FAIL H016 single-effect"):
        assert code in failing.stdout and code in README, code
    fixed = harness(tmp_path, "run", "incident-2026-11-30.yaml", "--agent", "python -m harness.agents.reference")
    assert fixed.returncode == 0, fixed.stdout
    assert "scenario webhook_delivered_twice with agent 'python -m harness.agents.reference': PASS" in fixed.stdout
