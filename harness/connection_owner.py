"""Which process holds the client end of a TCP connection on this machine, read from Linux's /proc:
``/proc/net/tcp{,6}`` gives the socket's inode, ``/proc/*/fd`` the process holding it. The destinations ask it
to tell who sent a request (``fake_destinations.peer``), the fault proxy to kill the sender of a request after
its commit (``kill_sender_after_commit``). Stdlib only: both processes start lean, and this runs only for them.
"""

from __future__ import annotations

import os
import socket
import struct


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


def sending_process(client: tuple[str, int] | None, server: tuple[str, int] | None) -> int | None:
    """The pid of the process holding the client end of the connection ``client`` -> ``server`` (the fault proxy
    kills it for ``kill_sender_after_commit``), None when it cannot be told."""
    if client is None or server is None:
        return None
    try:
        inode = _socket_inode((str(client[0]), int(client[1])), (str(server[0]), int(server[1])))
    except (OSError, ValueError):
        return None
    return _owner(inode) if inode else None


def command_of(pid: int) -> str:
    """The command line of process ``pid``, as the journal names a killed sender ("" when gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read(4096).replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""
