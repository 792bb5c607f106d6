"""A sandbox start that failed because a host mount went away while bubblewrap copied the mount table (a container
started or stopped beside the run: seen once in CI) is tried again; any other failed start is the agent's, said at
once (harness.agent_process.run_agent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import agent_process
from harness.errors import AgentError

RACE = (b"bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply mount flags: remount "
        b"\"/newroot/var/lib/docker/overlay2/0aee/merged\": Invalid argument\n")


def starts(monkeypatch: pytest.MonkeyPatch, stderr: Path, said: list[bytes]) -> list[int]:
    """``_run_agent`` failing to start once per line of ``said`` (each written on stderr first), then running."""
    tries: list[int] = []

    def once(*args: Any, **kwargs: Any) -> str:
        tries.append(1)
        if len(tries) <= len(said):
            with open(stderr, "ab") as err:
                err.write(said[len(tries) - 1])
            raise AgentError("cannot start agent: the sandbox could not start it")
        return "ran"

    monkeypatch.setattr(agent_process, "_run_agent", once)
    return tries


def run(stderr: Path) -> Any:
    return agent_process.run_agent("python agent.py", {}, timeout=5, stdout=stderr.with_name("out"), stderr=stderr)


def test_a_mount_gone_while_the_sandbox_copied_them_is_tried_again(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    stderr = tmp_path / "agent.stderr"
    tries = starts(monkeypatch, stderr, [RACE, RACE])
    assert run(stderr) == "ran" and len(tries) == 3


def test_the_race_every_time_is_said_after_the_last_try(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    stderr = tmp_path / "agent.stderr"
    tries = starts(monkeypatch, stderr, [RACE] * 5)
    with pytest.raises(AgentError):
        run(stderr)
    assert len(tries) == agent_process.SANDBOX_START_TRIES


def test_any_other_failed_start_is_said_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    stderr = tmp_path / "agent.stderr"
    stderr.write_bytes(RACE)  # an earlier run's: only what this start wrote counts
    tries = starts(monkeypatch, stderr, [b"bwrap: execvp nosuch: No such file or directory\n"])
    with pytest.raises(AgentError):
        run(stderr)
    assert len(tries) == 1
