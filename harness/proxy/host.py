"""``ProxyHost``: the harness's handle on the fault proxy, which runs in a process of its own.

mitmproxy 11 (the last release for Python 3.11) pins ``h11<=0.14``; the agent frameworks this harness
tests need ``h11>=0.16``. So the harness never imports mitmproxy: the proxy runs as
``python -m harness.proxy.process`` under an interpreter that has it (``harness.proxy.runtime``: this
one if mitmproxy is installed here, else a private venv made once), started once per harness process
and reconfigured per scenario over a pipe, one JSON line each way:

    {"op": "configure", "routes": {...}, "rules": [...], "journal": PATH, "har": PATH, "flows": PATH, ...}
                                                                               -> {"ok": true, "routes": {...}}
    {"op": "finish", "timeout": 10}                                            -> {"ok": true, "in_flight": 0}

The proxy stops when the pipe closes, so a harness killed with SIGKILL leaves no proxy behind.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from harness.proxy.rules import FaultRule

START_TIMEOUT = 30.0  # the proxy process imports mitmproxy (about 1 s; more on a loaded machine)
CALL_MARGIN = 30.0  # beyond a call's own timeout: a configure opens listeners
FINISH_MARGIN = 5.0  # beyond a finish's own wait for flows in flight: closing the journal and signing it


class ProxyHostError(RuntimeError):
    """Raised when the proxy cannot start, a listener cannot be opened, or the proxy process died."""


@dataclass(frozen=True)
class ProxyRoutes:
    """How the agent reaches each destination through the proxy for one scenario."""

    urls: dict[str, str]
    env: dict[str, str] = field(default_factory=dict)
    ca_cert: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"urls": self.urls, "env": self.env, "ca_cert": str(self.ca_cert) if self.ca_cert else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProxyRoutes:
        return cls(dict(data["urls"]), dict(data.get("env") or {}),
                   Path(data["ca_cert"]) if data.get("ca_cert") else None)


def free_port(host: str = "127.0.0.1") -> int:
    """An ephemeral port nobody listens on right now (mitmproxy refuses several '@0' listeners)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def upstream_of(name: str, url: str) -> tuple[str, int]:
    """``(host, port)`` of a destination's base URL, or a ValueError naming the route."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or not parts.port:
        raise ValueError(f"route {name!r}: upstream {url!r} must be http://HOST:PORT (the fake destination's base URL)")
    return parts.hostname, parts.port


def checked_scenario(routes: Mapping[str, str], rules: Sequence[FaultRule | Mapping[str, Any]], mode: str) \
        -> tuple[dict[str, tuple[str, int]], list[FaultRule], set[str | None]]:
    """A scenario's proxy settings, checked: (upstreams by destination, the rules, the destinations whose
    connections are refused). ValueError naming what is wrong: the harness checks before it sends, and
    the proxy checks what it receives."""
    from harness.proxy.rules import MODES, FaultRule, check_rule_ids, refused_destinations

    if mode not in MODES:
        raise ValueError(f"proxy mode {mode!r} is not one of {', '.join(MODES)}")
    upstreams = {name: upstream_of(name, url) for name, url in routes.items()}
    parsed = [r if isinstance(r, FaultRule) else FaultRule.model_validate(r) for r in rules]
    check_rule_ids(parsed)
    refused = refused_destinations(parsed)
    unknown = sorted(d for d in refused if d is not None and d not in upstreams)
    if unknown:
        raise ValueError(f"refuse_connection names unknown destination(s) {unknown}; known: {sorted(upstreams)}")
    return upstreams, parsed, refused


def disable_nagle_for_proxies() -> None:
    """Make urllib3 (hence requests) set TCP_NODELAY on forward-proxy connections, in this process.

    urllib3 gives pools behind a proxy ``socket_options=[]`` on purpose (Nagle on, "to avoid packet
    fragmentation"), so a small POST waits for the peer's delayed ACK: about 40 ms a request. The
    harness calls this where it owns the client (the benchmark, Python agents it starts itself).
    """
    from urllib3.connectionpool import HTTPConnectionPool

    original = HTTPConnectionPool._new_conn
    if getattr(original, "_harness_nodelay", False):
        return
    opt = (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _new_conn(self: Any) -> Any:
        conn = original(self)
        opts = list(getattr(conn, "socket_options", None) or [])
        if opt not in opts:  # set before the lazy connect() reads it
            conn.socket_options = [*opts, opt]
        return conn

    _new_conn._harness_nodelay = True  # type: ignore[attr-defined]
    HTTPConnectionPool._new_conn = _new_conn  # type: ignore[method-assign]


class ProxyHost:
    """The fault proxy process of this harness process, and the pipe that configures it."""

    _shared: ProxyHost | None = None
    _shared_lock = threading.Lock()

    def __init__(self, *, confdir: str | Path = "~/.mitmproxy", listen_host: str = "127.0.0.1") -> None:
        self.confdir = Path(confdir).expanduser()
        self.listen_host = listen_host
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None
        self._to_proxy: int | None = None
        self._from_proxy: int | None = None
        self._buffer = b""
        self._lock = threading.Lock()  # one call at a time on the pipe
        self._folder: Path | None = None
        self._configured = False
        self.journal_seal: dict[str, Any] | None = None  # the last scenario's journal, signed by the proxy

    @classmethod
    def shared(cls) -> ProxyHost:
        """The process-wide host, started on first use and stopped at interpreter exit."""
        with cls._shared_lock:
            if cls._shared is None or not cls._shared.running:
                host = cls()
                host.start()
                atexit.register(host.stop)
                cls._shared = host
            return cls._shared

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def ca_cert(self) -> Path:
        return self.confdir / "mitmproxy-ca-cert.pem"

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        from harness.proxy.runtime import RuntimeError_, link_package, proxy_python, runtime_env

        if self.running:
            return
        try:
            python = proxy_python()
        except RuntimeError_ as exc:
            raise ProxyHostError(str(exc)) from None
        began = time.perf_counter()
        # the proxy process imports only the harness package, through a folder holding just a link to
        # it: the agent's own site-packages (its h11, its pydantic) must not shadow the runtime's
        self._folder = link_package(Path(tempfile.mkdtemp(prefix="harness-proxy-")))
        commands_r, commands_w = os.pipe()
        replies_r, replies_w = os.pipe()
        log_path = self._folder / "proxy.log"
        try:
            with log_path.open("ab") as log:
                self.process = subprocess.Popen(
                    [str(python), "-m", "harness.proxy.process", "--commands", str(commands_r),
                     "--replies", str(replies_w), "--confdir", str(self.confdir),
                     "--listen-host", self.listen_host, "--folder", str(self._folder)],
                    pass_fds=(commands_r, replies_w), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    start_new_session=True, env=runtime_env(self._folder))
        finally:
            os.close(commands_r)
            os.close(replies_w)
        self._to_proxy, self._from_proxy = commands_w, replies_r
        try:
            self._request({"op": "ping"}, START_TIMEOUT)
        except ProxyHostError as exc:
            self._kill()
            raise ProxyHostError(f"the fault proxy did not start: {exc}") from None
        self.startup_seconds = time.perf_counter() - began

    def stop(self, timeout: float = 10.0) -> None:
        """Finish the scenario in progress, then stop the proxy process (idempotent)."""
        if self.process is None:
            return
        if self.running:
            try:
                self._request({"op": "stop", "timeout": min(timeout, 2.0)}, timeout)
            except ProxyHostError:
                pass
        self._kill(timeout)

    def abandon(self) -> None:
        """Kill the proxy process now (it did not answer: stopped, or hung); the next ``shared()`` starts another."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)  # SIGKILL ends a SIGSTOPped process too
        self._configured = False
        self._kill(1.0)

    def _kill(self, timeout: float = 5.0) -> None:
        for fd in (self._to_proxy, self._from_proxy):
            if fd is not None:
                os.close(fd)  # a closed pipe stops the proxy on its own
        self._to_proxy = self._from_proxy = None
        if self.process is not None:
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.process.wait(5)
            self.process = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    # -- the pipe -------------------------------------------------------------------------------

    def _request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        with self._lock:
            if self._to_proxy is None or self._from_proxy is None:
                raise ProxyHostError("the fault proxy is not running; use ProxyHost.shared()")
            try:
                os.write(self._to_proxy, json.dumps(message).encode() + b"\n")
            except OSError as exc:
                raise ProxyHostError(f"the fault proxy process has exited ({exc.strerror}){self._log_tail()}") \
                    from None
            deadline = time.monotonic() + timeout
            with selectors.DefaultSelector() as selector:
                selector.register(self._from_proxy, selectors.EVENT_READ)
                while b"\n" not in self._buffer:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise ProxyHostError(f"the fault proxy did not answer {message['op']} within "
                                             f"{timeout:g} s{self._log_tail()}")
                    if selector.select(remaining):
                        chunk = os.read(self._from_proxy, 65536)
                        if not chunk:
                            raise ProxyHostError(f"the fault proxy process has exited{self._log_tail()}")
                        self._buffer += chunk
            line, self._buffer = self._buffer.split(b"\n", 1)
        reply = json.loads(line)
        if not reply.get("ok"):
            kind = ValueError if reply.get("kind") == "ValueError" else ProxyHostError
            raise kind(reply.get("error", "the fault proxy failed"))
        return reply

    def _log_tail(self, lines: int = 20) -> str:
        try:
            text = (self._folder / "proxy.log").read_text(errors="replace") if self._folder else ""
        except OSError:
            return ""
        tail = "\n".join(text.splitlines()[-lines:])
        return f"\nfault proxy log (tail):\n{tail}" if tail else ""

    # -- per scenario -------------------------------------------------------------------------

    def configure(
        self,
        routes: Mapping[str, str],
        rules: Sequence[FaultRule | Mapping[str, Any]],
        journal_path: str | Path,
        *,
        secrets: Mapping[str, str] = {},
        mode: str = "reverse",
        seed: int | str = 0,
        har_path: str | Path | None = None,
        flows_path: str | Path | None = None,
        gate: str | None = None,
        seal: tuple[bytes, str] | None = None,
    ) -> ProxyRoutes:
        """Start a scenario: fresh rules, counters, seeded streams and journal; listeners as needed.

        ``har_path`` / ``flows_path``: where the proxy writes the run's traffic as a HAR file and a mitmproxy
        flow dump (docs/proxy.md, "Traffic files"); neither is written when not given. ``gate``: the run's
        ``contract.GATE_HEADER`` value, added to every request forwarded (the destinations refuse any without it).
        ``seal``: the run's key and its kind (``harness.chain``), sent down the pipe (never in a file or the
        environment): the proxy signs what it wrote of the journal at ``finish`` (``journal_seal``).
        Rules, routes and mode are checked here, so a bad one is a ValueError before the proxy sees it."""
        _, parsed, _ = checked_scenario(routes, rules, mode)
        reply = self._request({"op": "configure", "routes": dict(routes),
                               "rules": [r.model_dump(mode="json", exclude_unset=True) for r in parsed],
                               "journal": str(Path(journal_path).resolve()), "secrets": dict(secrets),
                               "mode": mode, "seed": seed,
                               "har": str(Path(har_path).resolve()) if har_path else None,
                               "flows": str(Path(flows_path).resolve()) if flows_path else None,
                               "gate": gate, "seal_key": seal[0].hex() if seal else None,
                               "seal_kind": seal[1] if seal else None}, CALL_MARGIN)
        self._configured = True
        self.journal_seal = None
        return ProxyRoutes.from_dict(reply["routes"])

    def finish(self, timeout: float = 10.0) -> int:
        """End the scenario: wait (bounded) for flows in flight, journal those still in flight at the
        deadline as ``in_flight_at_end``, close the journal.

        Returns how many flows were still in flight at the deadline (0 when all ended on their own).
        """
        if not self.running or not self._configured:
            return 0
        self._configured = False
        # the proxy answers once its wait is over: a stopped or dead one is known a few seconds later, not 30
        reply = self._request({"op": "finish", "timeout": timeout}, timeout + FINISH_MARGIN)
        self.journal_seal = reply.get("journal_seal")
        return int(reply["in_flight"])
