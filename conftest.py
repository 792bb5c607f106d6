"""Shared fixtures for the project's own tests (the plugin under test loads through its entry point)."""

from __future__ import annotations

import pytest


@pytest.fixture
def run_plugin(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory):
    """Run `pytest ARGS` in a subprocess, as a user would, with evidence kept in a temp folder."""

    # a bound against a hang, not a speed check: on a loaded machine a pytest run with its workers outlasts 120 s
    def run(*args: str, timeout: float = 600) -> pytest.RunResult:
        evidence = tmp_path_factory.mktemp("evidence")
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--evidence-dir", str(evidence), *args, timeout=timeout)
        result.evidence_dir = evidence  # type: ignore[attr-defined]
        return result

    return run


# ------------------------------------------------------------------------------------ containers left behind
# After the whole suite, nothing of ours may remain on the Docker engine: a container, network or volume (by our
# labels, harness.containers.docker_client) that appeared during the session and whose owner process is gone was left
# behind. Each container test already checks its own process's; this catches what a process left at its end
# (the reaper would take it eventually: the suite must not need it). The controller alone checks, at the end.
_CONTAINERS_BEFORE: set[tuple[str, str]] | None = None


def _our_objects() -> list[tuple[str, dict[str, str]]] | None:
    """(kind, row) of every container, network and volume of ours; None when no engine answers (then the
    container tests fail or skip on their own, saying so)."""
    import os

    if os.environ.get("HARNESS_NO_DOCKER") == "1":
        return None
    from harness.containers import docker_client
    from harness.errors import ContainerError

    try:
        return [(kind, row) for kind, rows in docker_client.listing().items() for row in rows]
    except ContainerError:
        return None
    except Exception as exc:  # noqa: BLE001 - an engine failing mid-listing: say so, never an internal error
        print(f"the check for containers left behind could not list them: {exc}")
        return None


def _owner_gone(owner: str) -> bool:
    """Whether the process an owner label names (``host-pid-token``, docker_client.OWNER) ended; another host's: no."""
    import os
    import socket

    host, pid, _token = (owner.rsplit("-", 2) + ["", "", ""])[:3]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def pytest_sessionstart(session: pytest.Session) -> None:
    global _CONTAINERS_BEFORE
    if hasattr(session.config, "workerinput"):
        return
    found = _our_objects()
    _CONTAINERS_BEFORE = None if found is None else {(kind, row["name"]) for kind, row in found}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput") or _CONTAINERS_BEFORE is None:
        return
    found = _our_objects() or []
    left = [(kind, row) for kind, row in found
            if (kind, row["name"]) not in _CONTAINERS_BEFORE and _owner_gone(row.get("owner", ""))]
    if not left:
        return
    from harness.containers import docker_client

    for owner in sorted({row["owner"] for _, row in left}):
        docker_client.remove_ours(owner)
    listed = ", ".join(f"{kind[:-1]} {row['name']} (owner {row['owner']}, role {row['role']})" for kind, row in left)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    reporter.write("\n")  # after the progress line, which has no newline yet
    reporter.write_sep("=", "containers left behind", red=True)
    reporter.write_line(
        f"FAILED: the suite left {len(left)} container(s)/network(s)/volume(s) of ours behind (now removed): {listed}",
        red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
