"""An isolated network for an agent container: it reaches the fault proxy (and the scenario's SSH hosts, which
the proxy does not front) and nothing else of the host.

Docker's host network gives a container every loopback port of the machine: the destinations' own ports past
the proxy, other runs' processes. Instead the agent runs in a network namespace of its own with nothing but a
loopback interface (``network_mode="none"``: the agent's container, up before the agent runs in it,
``harness.containers.agent``), and the harness listens inside that namespace, on 127.0.0.1 at the very ports of
the addresses the contract hands the agent (``HARNESS_DESTINATION_*``, a forward proxy's ``HTTP(S)_PROXY``):
each connection is relayed to the same port on the host's loopback. The agent's environment holds as it is; any
other port answers nothing.

A socket belongs to the network namespace it was made in, whatever thread uses it afterwards: the listening
sockets are made by a short-lived thread that entered the container's namespace (``setns``, Linux; the harness is
root or holds CAP_SYS_ADMIN, as it does to drive a Docker engine here), the relaying happens in the host's.
"""

from __future__ import annotations

import ctypes
import os
import re
import socket
import threading
from collections.abc import Iterable, Mapping

CLONE_NEWNET = 0x40000000
# the loopback addresses an agent's environment names: http(s)://127.0.0.1:PORT, ssh://127.0.0.1:PORT, host:PORT
LOOPBACK_PORT = re.compile(r"(?:^|[/@])(?:127\.0\.0\.1|localhost):(\d{1,5})\b")


class RelayError(OSError):
    """Raised when the isolated network cannot be made (no setns, a port already taken inside)."""


def loopback_ports(env: Mapping[str, str]) -> list[int]:
    """The host loopback ports the agent's environment points it at (what the relay must carry)."""
    ports = {int(m.group(1)) for value in env.values() for m in LOOPBACK_PORT.finditer(value)}
    return sorted(p for p in ports if 0 < p < 65536)


def _listen_inside(pid: int, ports: Iterable[int]) -> list[socket.socket]:
    """Listening sockets on 127.0.0.1:PORT inside the network namespace of process ``pid``."""
    made: list[socket.socket] = []
    failure: list[BaseException] = []

    def enter_and_listen() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    errno = ctypes.get_errno()
                    raise RelayError(errno, f"setns into the agent's network: {os.strerror(errno)}")
            finally:
                os.close(fd)
            # the namespace's loopback starts down in some engines' "none" networks; it is up in Docker's
            for port in ports:
                server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                server.bind(("127.0.0.1", port))
                server.listen(64)
                made.append(server)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            failure.append(exc)

    # this thread's namespace changes and it ends: the harness's own threads stay on the host's network
    worker = threading.Thread(target=enter_and_listen, name=f"relay-setns-{pid}", daemon=True)
    worker.start()
    worker.join(10)
    if failure or worker.is_alive():
        for server in made:
            server.close()
        raise RelayError(f"cannot make the agent's isolated network: {failure[0] if failure else 'setns hung'}")
    return made


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass  # either side went away
    finally:
        for one in (sink, source):
            try:
                one.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Relay:
    """The relay of one agent container's network: ``start(pid, ports)`` listens inside, ``close()`` stops."""

    def __init__(self) -> None:
        self._servers: list[socket.socket] = []
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def start(self, pid: int, ports: Iterable[int]) -> Relay:
        self._servers = _listen_inside(pid, ports)
        for server in self._servers:
            threading.Thread(target=self._accept, args=(server,), name=f"relay-{server.getsockname()[1]}",
                             daemon=True).start()
        return self

    def _accept(self, server: socket.socket) -> None:
        port = server.getsockname()[1]
        while not self._closed.is_set():
            try:
                inside, _ = server.accept()
            except OSError:
                return  # closed
            try:
                outside = socket.create_connection(("127.0.0.1", port), timeout=10)
                outside.settimeout(None)
            except OSError:
                inside.close()  # nothing listens there on the host: the agent sees a refused connection
                continue
            for one in (inside, outside):
                one.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._open.update((inside, outside))
            threading.Thread(target=_pipe, args=(inside, outside), daemon=True).start()
            threading.Thread(target=_pipe, args=(outside, inside), daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        for server in self._servers:
            server.close()
        with self._lock:
            for one in self._open:
                try:
                    one.shutdown(socket.SHUT_RDWR)  # wakes the relaying thread blocked in recv
                except OSError:
                    pass
                one.close()
            self._open.clear()
