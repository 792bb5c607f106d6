"""Who sent a request: the process that owns the client end of its connection, and whether it is the agent's.

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
import socket
import struct
from collections.abc import Iterable

AGENT = "agent"  # a process of the harness's agent tree
OTHER = "other"  # any other process of the machine (the harness itself included)

_HARNESS = os.getppid()  # imported at the destination process's start: its parent is the harness


def _hex_address(host: str, port: int) -> tuple[str, str]:
    """``(ip hex, port hex)`` as /proc/net/tcp (IPv4) or tcp6 spells them: the address in 32-bit host-order words."""
    try:
        packed = socket.inet_pton(socket.AF_INET, host)
    except OSError:
        packed = socket.inet_pton(socket.AF_INET6, host)
    words = struct.unpack(f"={len(packed) // 4}I", packed)
    return "".join(f"{word:08X}" for word in words), f"{port:04X}"


def _socket_inode(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The inode of the client's socket of the connection ``client`` -> ``server``."""
    want_local, want_remote = ":".join(_hex_address(*client)), ":".join(_hex_address(*server))
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as handle:
                next(handle, None)
                for line in handle:
                    fields = line.split()
                    if len(fields) > 9 and fields[1] == want_local and fields[2] == want_remote:
                        return int(fields[9]) or None
        except OSError:
            continue
    return None


def _owner(inode: int) -> int | None:
    target = f"socket:[{inode}]"
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            for fd in os.scandir(f"/proc/{entry.name}/fd"):
                if os.readlink(fd.path) == target:
                    return int(entry.name)
        except OSError:  # gone, or not ours to read
            continue
    return None


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
    if client is None or server is None:
        return None
    try:
        inode = _socket_inode((str(client[0]), int(client[1])), (str(server[0]), int(server[1])))
    except (OSError, ValueError):
        return None
    owner = _owner(inode) if inode else None
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
