"""The fault proxy's own process: the interpreter it runs under, and that it never outlives its harness.

Real processes: a bare venv for the interpreter check, real ProxyHost processes killed for real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.contract import PROXY_PYTHON_ENV
from harness.proxy.host import ProxyHost, ProxyHostError
from harness.proxy.runtime import RuntimeError_, proxy_python

DEADLINE = 20.0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {DEADLINE:g} s: {what}")
        time.sleep(0.02)


def test_an_interpreter_without_mitmproxy_is_a_clear_error(tmp_path, monkeypatch):
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    monkeypatch.setenv(PROXY_PYTHON_ENV, str(venv / "bin" / "python"))
    with pytest.raises(RuntimeError_, match=f"{PROXY_PYTHON_ENV}=.*cannot import mitmproxy 11.*unset"):
        proxy_python()
    with pytest.raises(ProxyHostError, match="cannot import mitmproxy 11"):
        ProxyHost().start()


def test_this_interpreter_is_used_when_mitmproxy_is_installed_here(monkeypatch):
    monkeypatch.delenv(PROXY_PYTHON_ENV, raising=False)
    assert proxy_python() == Path(sys.executable)


def test_a_dead_proxy_process_is_a_clear_error_and_a_new_host_works(tmp_path):
    host = ProxyHost()
    host.start()
    try:
        assert host.process is not None
        os.killpg(host.process.pid, signal.SIGKILL)
        host.process.wait(10)
        with pytest.raises(ProxyHostError, match="the fault proxy process has exited"):
            host.configure({"tickets": "http://127.0.0.1:9"}, [], tmp_path / "journal.ndjson")
    finally:
        host.stop()
    assert host.process is None and not host.running
    again = ProxyHost()
    again.start()
    try:
        assert again.configure({"tickets": "http://127.0.0.1:9"}, [], tmp_path / "j2.ndjson").urls["tickets"]
    finally:
        again.stop()


HARNESS = """
import json, sys
from harness.proxy.host import ProxyHost
host = ProxyHost.shared()
print(json.dumps({"pid": host.process.pid, "folder": str(host._folder)}), flush=True)
sys.stdin.read()
"""


def test_the_proxy_stops_and_cleans_up_when_its_harness_is_killed():
    harness = subprocess.Popen([sys.executable, "-c", HARNESS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, start_new_session=True)
    proxy = None
    try:
        line = harness.stdout.readline() if harness.stdout else ""
        started = json.loads(line)
        proxy, folder = started["pid"], Path(started["folder"])
        assert alive(proxy) and folder.is_dir()
        harness.send_signal(signal.SIGKILL)
        harness.wait(10)
        wait_until(lambda: not alive(proxy), "the proxy process is gone")
        wait_until(lambda: not folder.exists(), "the proxy's folder is removed")
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait(10)
        if proxy is not None and alive(proxy):
            os.kill(proxy, signal.SIGKILL)
