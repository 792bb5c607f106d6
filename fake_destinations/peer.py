"""Who sent a request: the process that owns the client end of its connection, and whether it is the agent's (the
fault proxy asks too, to kill the sender of a request after its commit: ``kill_sender_after_commit``).

A request refused at the gate (``contract.GATE_HEADER``) went straight to a destination's port; it is a finding
against the agent (H061) only if the agent sent it. Any process of the machine can reach a loopback port (a
neighbour probing ports, another tool), so the destination asks the kernel, while the connection is open, which
process holds the client's socket (Linux: ``/proc/net/tcp{,6}`` gives the socket's inode, ``/proc/*/fd`` the
process holding it), then whether that process descends from the harness that started this destination process
(the agent is the harness's child, through its supervisor; the harness itself is not the agent), or belongs to
one of the agent's containers the harness named (control command ``agent_containers``): a container's processes
descend from the engine's shim, not from the harness, but the kernel puts each in its container's cgroup, whose
path names the container's id, and a process without capabilities cannot leave it. Stdlib only: the destination
process's start-up stays lean, and this runs for refused requests alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from harness.connection_owner import sending_process

AGENT = "agent"  # a process of the harness's agent tree
OTHER = "other"  # any other process of the machine (the harness itself included)

_HARNESS = os.getppid()  # imported at the destination process's start: its parent is the harness


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # after the command name, which may hold spaces and parentheses
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def in_container(pid: int, containers: Iterable[str]) -> bool:
    """Whether process ``pid`` is in the cgroup of one of ``containers`` (full ids: Docker names its cgroups
    ``/docker/ID`` or ``docker-ID.scope``)."""
    wanted = [c for c in containers if len(c) == 64]
    if not wanted:
        return False
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="replace") as handle:
            groups = handle.read()
    except OSError:
        return False
    return any(container in groups for container in wanted)


def sender(client: tuple[str, int] | None, server: tuple[str, int] | None, harness: int = _HARNESS,
           containers: Iterable[str] = ()) -> str | None:
    """``AGENT`` when the client end of the connection is held by a descendant of ``harness`` (not the harness
    itself) or by a process of one of the agent's ``containers`` (their ids), ``OTHER`` when it is held by another
    process, None when it cannot be told (no /proc, the connection already closed, another user's process)."""
    owner = sending_process(client, server)
    if owner is None:
        return None
    pid: int | None = owner
    seen = 0
    while pid not in (None, 0, 1) and seen < 256:
        if pid == harness:
            return AGENT if seen else OTHER
        pid = _parent(pid)
        seen += 1
    return AGENT if in_container(owner, containers) else OTHER
