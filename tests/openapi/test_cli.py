"""`python -m harness api from-openapi FILE` as a user runs it: the profile on stdout (exit 0), an error on stderr
(exit 2)."""

from __future__ import annotations

import subprocess
import sys

import yaml

from harness.openapi import api_from_openapi
from tests.openapi.conftest import DOCUMENTS, EXAMPLES


def from_openapi(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "api", "from-openapi", *args], capture_output=True,
                          text=True, timeout=60)


def test_it_prints_the_profile_with_the_overrides_applied_and_names_a_bad_document() -> None:
    document = EXAMPLES / "helpdesk.yaml"
    done = from_openapi(str(document), "--override", "idempotency={style: ietf, header: X-Key}",
                        "--override", "retention_seconds=60")
    assert done.returncode == 0, done.stderr
    expected = api_from_openapi(document, {"idempotency": {"style": "ietf", "header": "X-Key"},
                                           "retention_seconds": 60})
    assert yaml.safe_load(done.stdout) == expected.declaration
    assert "# Destination option (beside api:): retention_seconds: 60" in done.stdout
    assert "# set in the configuration\nidempotency:" in done.stdout

    dotted = from_openapi(str(document), "--override", "idempotency.style=ietf", "--override",
                          "idempotency.header=X-Key")
    assert yaml.safe_load(dotted.stdout) == expected.declaration

    bad = from_openapi(str(DOCUMENTS / "webhook-example.yaml"))
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith(f"error: {DOCUMENTS / 'webhook-example.yaml'}:5: #/paths: no POST or PUT")
    usage = from_openapi(str(document), "--override", "nothing")
    assert usage.returncode == 2 and "expected KEY=VALUE" in usage.stderr


def test_it_is_in_the_help() -> None:
    done = subprocess.run([sys.executable, "-m", "harness", "--help"], capture_output=True, text=True, timeout=60)
    assert "api" in done.stdout and "OpenAPI" in done.stdout
