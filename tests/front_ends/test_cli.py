"""`python -m harness ...` as a user runs it: exit statuses, messages, evidence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract import PROXY_PYTHON_ENV


def harness(*args: str, timeout: float = 120, cwd: Path | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env)


def test_run_passes_with_the_reference_agent_and_fails_with_a_wrong_one(tmp_path: Path) -> None:
    ok = harness("run", "response_lost", "--evidence-dir", str(tmp_path), "--format", "json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(ok.stdout)["passed"] is True
    bad = harness("run", "response_lost", "--evidence-dir", str(tmp_path),
                  "--agent", "python -m harness.agents.wrong.timeout_as_failed")
    assert bad.returncode == 1
    assert "FAIL H005 lost-response-logged-unknown" in bad.stdout
    folder = bad.stdout.split("evidence: ")[-1].strip()
    again = harness("check", folder)  # judging the kept evidence again gives the same verdict
    assert again.returncode == 1 and "FAIL H005" in again.stdout


def test_runs_at_once_with_the_default_relative_evidence_dir_all_pass(tmp_path: Path) -> None:
    """`python -m harness run NAME` from a fresh folder: ./evidence is relative to the caller, and the
    agent (which runs in the caller's folder too) is handed absolute paths to its intents file and log."""
    procs = [subprocess.Popen([sys.executable, "-m", "harness", "run", "response_lost"], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(3)]
    try:
        results = [(p.returncode, out) for p in procs for out in [p.communicate(timeout=120)[0]]]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert [code for code, _ in results] == [0, 0, 0], "\n\n".join(out for _, out in results)
    assert len(list((tmp_path / "evidence").iterdir())) == 3


def test_a_runs_traffic_opens_with_mitmproxys_own_programs_from_the_proxys_runtime(tmp_path: Path) -> None:
    """What docs/using.md and docs/proxy.md tell a user to type in an evidence folder: mitmproxy is on no PATH,
    it lives in the fault proxy's runtime (mitmweb is the same command with a web UI, not started here)."""
    ran = harness("run", "response_lost", "--evidence-dir", str(tmp_path / "evidence"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    folder = Path(ran.stdout.split("evidence: ")[-1].strip())
    shown = harness("proxy", "mitmdump", "-nr", "traffic.mitm", cwd=folder, timeout=60)
    assert shown.returncode == 0, shown.stderr
    journal = [json.loads(line) for line in (folder / "journal.ndjson").read_text().splitlines()]
    for line in journal:  # every flow the proxy saw, in mitmdump's words: "127.0.0.1:PORT: POST http://.../tickets"
        assert f": {line['method']} http://" in shown.stdout and line["path"] in shown.stdout, shown.stdout
    assert "net::ERR_EMPTY_RESPONSE" in shown.stdout  # the answer the agent lost


def test_a_proxy_runtime_that_cannot_run_mitmproxy_is_a_clear_error() -> None:
    out = harness("proxy", "mitmweb", "-r", "traffic.mitm", env={**os.environ, PROXY_PYTHON_ENV: "/bin/false"})
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"error: cannot run mitmweb: {PROXY_PYTHON_ENV}=/bin/false: that interpreter "
                                 "cannot import mitmproxy 11"), out.stderr


def test_bad_scenario_file_is_exit_2_with_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\ndescription: x\ndestinations:\n  t:\n    service: tickets\n"
                    "    idempotency: sometimes\nintents: []\n")
    out = harness("run", str(path), "--evidence-dir", str(tmp_path))
    assert out.returncode == 2
    assert f"{path}:6: destinations.t.idempotency" in out.stderr and "'sometimes'" in out.stderr
    assert "Traceback" not in out.stderr


def test_unknown_agent_program_is_a_clear_error(tmp_path: Path) -> None:
    out = harness("run", "response_lost", "--evidence-dir", str(tmp_path), "--agent", "no-such-agent-xyz")
    assert out.returncode == 2 and "cannot start agent 'no-such-agent-xyz'" in out.stderr
    assert "Traceback" not in out.stderr


def test_scenarios_lists_the_catalogue_and_schema_prints_json() -> None:
    listed = harness("scenarios")
    assert listed.returncode == 0 and "response_lost " in listed.stdout
    for which in ("scenario", "audit-event"):
        schema = harness("schema", which)
        assert schema.returncode == 0
        assert json.loads(schema.stdout)["$schema"].startswith("https://json-schema.org/")


def test_scenarios_with_an_empty_or_missing_catalogue_says_so_and_exits_2(tmp_path, monkeypatch, capsys) -> None:
    """A broken install (no catalogue in the package) is an error naming the folder, never an empty list
    and exit 0. (The wheel test deletes the catalogue of a real install; here only its location moves.)"""
    import harness.resources
    from harness.cli import main

    for folder, state in ((tmp_path, "holds no scenario file (*.yaml)"), (tmp_path / "gone", "does not exist")):
        monkeypatch.setattr(harness.resources, "catalogue_dir", lambda folder=folder: folder)
        assert main(["scenarios"]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err == (f"error: the bundled scenario catalogue {folder} {state}: this installation of retry-harness "
                       "is incomplete; reinstall it (pip install --force-reinstall retry-harness)\n")


def test_the_catalogue_and_the_data_files_come_from_the_installed_package() -> None:
    import harness
    from harness.matrix import EXPECTED_FILE
    from harness.resources import catalogue, catalogue_dir
    from harness.scenario import SCHEMA_PATH as scenario_schema

    package = Path(harness.__file__).parent
    assert catalogue_dir() == package / "scenarios"
    assert "response_lost" in [p.stem for p in catalogue()] and len(catalogue()) >= 19
    assert EXPECTED_FILE == package / "expected_outcomes.yaml" and EXPECTED_FILE.is_file()
    assert scenario_schema == package / "schemas" / "scenario.schema.json" and scenario_schema.is_file()


def test_package_data_without_a_file_system_path_is_a_clear_error(tmp_path, monkeypatch) -> None:
    """A harness imported from a zip archive has no plain files to hand to pytest or the agent's supervisor:
    the resource is named in an error, not a traceback from deep inside a later open()."""
    import zipfile

    import harness.resources
    from harness.errors import HarnessError

    archive = tmp_path / "harness.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("harness/scenarios/response_lost.yaml", "name: response_lost\n")
    monkeypatch.setattr(harness.resources, "files", lambda package: zipfile.Path(archive, f"{package}/"))
    with pytest.raises(HarnessError) as raised:
        harness.resources.catalogue_dir()
    message = str(raised.value)
    assert "the harness package is not installed as plain files, so its data 'scenarios' has no path" in message
    assert "install retry-harness with pip" in message
