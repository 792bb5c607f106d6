"""A sandbox's PID namespace is held while the harness looks for its processes (issue 44).

The kernel gives a freed namespace's number to the next namespace made, by anyone: another run's sandbox, a
container's runc. The harness finds a run's processes by their namespace's name (``pid:[N]``) and kills them; a
name gone stale matched the processes of whatever namespace got the number next, and the harness SIGKILLed them
(in CI: other workers' sandboxes dying with exit status 137 before their agent ran, runc's "write init-p: broken
pipe"). Real namespaces (util-linux ``unshare``), real processes."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest

from harness.agent_process import _AgentProcesses, _processes

pytestmark = pytest.mark.skipif(shutil.which("unshare") is None or not os.path.isdir("/proc/self/ns"),
                                reason="needs util-linux unshare and /proc namespaces")
TRIES = 60


def _namespace_of_child(launcher: subprocess.Popen[bytes]) -> str:
    """The PID namespace of ``launcher``'s child (unshare --fork's: the namespace's first process)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for pid, stat in _processes():
            if stat[stat.rindex(")") + 2:].split()[1] == str(launcher.pid):
                with contextlib.suppress(OSError):
                    return os.readlink(f"/proc/{pid}/ns/pid")
        time.sleep(0.01)
    raise AssertionError("unshare's child never appeared")


def _new_namespace(seconds: float = 60) -> subprocess.Popen[bytes]:
    """A new PID namespace whose first process sleeps ``seconds`` (and dies with its launcher)."""
    return subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "sleep", str(seconds)])


@pytest.fixture
def namespaces() -> Iterator[list[subprocess.Popen[bytes]]]:
    made: list[subprocess.Popen[bytes]] = []
    yield made
    for proc in made:
        proc.kill()
        proc.wait()


def test_a_run_whose_sandbox_ended_kills_nothing_of_the_namespaces_made_after_it(
        namespaces: list[subprocess.Popen[bytes]]) -> None:
    launcher = _new_namespace(0.3)
    name = _namespace_of_child(launcher)
    agent = _AgentProcesses(launcher, name, None)
    try:
        assert launcher.wait(timeout=10) == 0
        for _ in range(TRIES):  # made while the ended run still looks for its processes
            namespaces.append(_new_namespace())
            assert _namespace_of_child(namespaces[-1]) != name, "a new namespace got the held one's number"
        assert agent.members() == []
        agent.kill()
        assert all(proc.poll() is None for proc in namespaces), "the ended run killed another namespace's process"
    finally:
        agent.release()


def _held_anywhere(number: str) -> bool:
    """Whether a namespace of any kind, of any process here, now has ``number``."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if any(os.readlink(f"/proc/{entry}/ns/{kind}").endswith(number)
                       for kind in os.listdir(f"/proc/{entry}/ns")):
                    return True
    return False


def test_the_number_is_given_again_once_released(namespaces: list[subprocess.Popen[bytes]]) -> None:
    """The control: without the hold the kernel does give the number again (so the test above can fail): to one of
    ours, or, on a busy machine (other workers' sandboxes, containers), to whichever namespace was made first."""
    launcher = _new_namespace(0.1)
    name = _namespace_of_child(launcher)
    number = name.removeprefix("pid")
    assert launcher.wait(timeout=10) == 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for _ in range(20):
            namespaces.append(_new_namespace())
            if _namespace_of_child(namespaces[-1]) == name:
                return
        if _held_anywhere(number):  # ours stay: each holds a lower number another run freed meanwhile
            return
    pytest.fail(f"in 30 s no namespace got the freed number {name} again")
