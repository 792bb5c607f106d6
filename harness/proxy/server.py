"""``ProxyServer``: mitmproxy and the fault injector, in the process that has mitmproxy installed.

mitmproxy's ``ctx`` is global, so a process holds at most one master. ``start`` runs it in a daemon
thread that owns its own event loop (the master must be built inside a running loop). Each scenario
calls :meth:`ProxyServer.configure` (new rules, counters, seeds, journal; listeners kept when their
upstream is unchanged) and then :meth:`ProxyServer.finish`.

The harness itself never imports this module: mitmproxy pins ``h11<=0.14``, which current agent
frameworks cannot install beside. ``harness.proxy.host.ProxyHost`` runs it in a process of its own
(``harness.proxy.process``) with the interpreter ``harness.proxy.runtime`` finds or makes. Only the
proxy's own tests and benchmark embed it directly.

Modes (``mode=``):

- ``reverse`` (default): one listener per destination; the agent gets plain ``http://`` URLs and no
  proxy settings.
- ``reverse-https``: the same listeners, but the agent speaks TLS to them (``https://`` URLs,
  ``SSL_CERT_FILE`` / ``REQUESTS_CA_BUNDLE`` name mitmproxy's CA).
- ``forward``: one regular (forward) proxy listener; the agent gets the destinations' own URLs and
  ``HTTP_PROXY`` / ``HTTPS_PROXY``. urllib3 leaves Nagle on for proxy connections (about 40 ms per
  POST); ``harness.proxy.host.disable_nagle_for_proxies`` fixes that where the harness owns the client.
- ``forward-https``: forward mode with ``https://`` destination URLs through mitmproxy's CA.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import threading
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.journal import JournalWriter
from harness.proxy.host import ProxyHostError, ProxyRoutes, checked_scenario, free_port
from harness.proxy.rules import FaultRule, RuleBook

START_TIMEOUT = 20.0
LISTEN_ATTEMPTS = 5  # fresh ports chosen when one was taken before mitmproxy bound it
log = logging.getLogger(__name__)


class _PortTaken(ProxyHostError):
    """A listener's port was bound by someone else first; ``specs`` are the listeners that failed."""

    def __init__(self, specs: list[str], message: str) -> None:
        super().__init__(message)
        self.specs = specs


class _Ready:
    """Tiny addon: tells the starting thread that the master is running."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def running(self) -> None:
        self.event.set()


CA_LOCK_FILE = ".retry-harness-ca.lock"  # in the confdir: held while its CA is looked for and made


def ensure_ca(confdir: Path) -> None:
    """Make mitmproxy's CA in ``confdir`` unless it is there, under a file lock. Proxies of several harness
    processes (pytest-xdist workers, CI jobs on one machine) share the confdir: left to mitmproxy, each one
    started before the CA exists makes its own and writes it over the others', so a proxy signs with a CA
    that the file handed to agents (``SSL_CERT_FILE``) no longer holds, or reads a file half written."""
    import fcntl

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # as for mitmproxy's other imports (see _run)
        from mitmproxy.certs import CertStore
        from mitmproxy.options import CONF_BASENAME, KEY_SIZE

    confdir.mkdir(parents=True, exist_ok=True)
    with open(confdir / CA_LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (confdir / f"{CONF_BASENAME}-ca.pem").exists():
            CertStore.create_store(confdir, CONF_BASENAME, KEY_SIZE)


class ProxyServer:
    """mitmproxy and its fault injector, embedded in this process."""

    def __init__(self, *, confdir: str | Path = "~/.mitmproxy", listen_host: str = "127.0.0.1") -> None:
        self.confdir = Path(confdir).expanduser()
        self.listen_host = listen_host
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._master: Any = None
        self._injector: Any = None
        self.journal_seal: dict[str, Any] | None = None  # the last scenario's journal, signed at its finish
        self._listen_ports: dict[str, int] = {}  # mode spec without port -> port, so listeners are reused
        self._forward_port: int | None = None
        self._start_error: BaseException | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self.running:
            return
        try:
            ensure_ca(self.confdir)
        except OSError as exc:
            raise ProxyHostError(f"mitmproxy's CA could not be made in {self.confdir}: {exc}") from None
        ready = _Ready()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="harness-proxy", daemon=True)
        self._thread.start()
        if not ready.event.wait(START_TIMEOUT):
            raise ProxyHostError(f"mitmproxy did not start within {START_TIMEOUT}s: {self._start_error!r}")
        if self._start_error is not None:
            raise ProxyHostError(f"mitmproxy failed to start: {self._start_error}") from self._start_error

    def _run(self, ready: _Ready) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop

        async def main() -> None:
            with warnings.catch_warnings():
                # mitmproxy's dependencies (ldap3, passlib) warn about their own deprecated imports:
                # noise in every user's test report that they cannot act on
                warnings.simplefilter("ignore", DeprecationWarning)
                from mitmproxy import options
                from mitmproxy.tools.dump import DumpMaster

                from harness.proxy.addon import FaultInjector

                opts = options.Options(listen_host=self.listen_host, mode=[], confdir=str(self.confdir))
                master = DumpMaster(opts, with_termlog=False, with_dumper=False)
            # lazy: open the upstream connection only after our request hook (synthetic answers and
            # dropped requests never touch the destination; forward-https reaches plain-HTTP fakes).
            opts.update(connection_strategy="lazy", ssl_insecure=True,
                        stream_large_bodies=None)
            self._injector = FaultInjector()
            master.addons.add(self._injector, ready)
            self._master = master
            await master.run()

        try:
            loop.run_until_complete(main())
        except BaseException as e:  # surfaced to start() instead of dying silently in the thread
            self._start_error = e
            ready.event.set()
        finally:
            # Client handlers still open at shutdown: cancel them so the loop closes cleanly.
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.wait(pending, timeout=2))
            loop.close()

    def call(self, coro: Any, timeout: float | None) -> Any:
        """Run a coroutine on the proxy's event loop from another thread; wait for its result."""
        if not self.running or self._loop is None:
            raise ProxyHostError("the proxy server is not running: start() it first")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Close the journal and shut the master down (idempotent)."""
        if not self.running:
            return
        try:
            self.finish(timeout=min(timeout, 2.0))
        except Exception as e:  # stopping must not fail on a stuck flow
            log.warning("proxy finish before stop failed: %s", e)
        try:  # mitmproxy's shutdown leaves listening sockets open: close them first
            self.call(self._update_listeners([]), timeout)
        except Exception as e:
            log.warning("closing proxy listeners failed: %s", e)
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._master.shutdown)
        assert self._thread is not None
        self._thread.join(timeout)

    # -- per scenario -------------------------------------------------------------------------

    @property
    def ca_cert(self) -> Path:
        return self.confdir / "mitmproxy-ca-cert.pem"

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

        ``har_path`` / ``flows_path``: where to write the run's traffic (``harness.proxy.traffic``), if anywhere.
        ``gate``: the value of ``contract.GATE_HEADER`` added to every request forwarded. ``seal``: the run's key
        and its kind, which sign the journal at ``finish`` (``journal_seal``)."""
        return self.call(self.configure_async(routes, rules, journal_path, secrets=secrets, mode=mode, seed=seed,
                                              har_path=har_path, flows_path=flows_path, gate=gate, seal=seal), 60)

    async def configure_async(self, routes: Mapping[str, str], rules: Sequence[FaultRule | Mapping[str, Any]],
                              journal_path: str | Path, *, secrets: Mapping[str, str] = {}, mode: str = "reverse",
                              seed: int | str = 0, har_path: str | Path | None = None,
                              flows_path: str | Path | None = None, gate: str | None = None,
                              seal: tuple[bytes, str] | None = None) -> ProxyRoutes:
        """``configure``, on the proxy's own event loop (``harness.proxy.process`` reads its commands there)."""
        from harness.proxy.traffic import TrafficWriter

        upstreams, parsed, refused = checked_scenario(routes, rules, mode)
        await self.finish_async()
        self.journal_seal = None
        journal = JournalWriter(journal_path, seal_key=seal[0] if seal else None, seal_kind=seal[1] if seal else "run")
        traffic = None
        try:
            if har_path or flows_path:
                traffic = TrafficWriter(har_path, flows_path, tuple(secrets.values()))
            return await self._apply(upstreams, RuleBook(parsed, seed=seed), journal, dict(secrets), mode, refused,
                                     traffic, gate)
        except BaseException:
            journal.close()
            if traffic is not None:
                traffic.close()
            raise

    async def _apply(self, upstreams: dict[str, tuple[str, int]], book: RuleBook, journal: JournalWriter,
                     secrets: dict[str, str], mode: str, refused: set[str | None],
                     traffic: Any = None, gate: str | None = None) -> ProxyRoutes:
        from mitmproxy import ctx

        from harness.proxy.state import ScenarioState

        # mitmproxy's ctx is global and any Master built later in this process takes it over (its
        # own test helper `taddons.context` does): take it back before each scenario
        ctx.master, ctx.options, ctx.log = self._master, self._master.options, self._master.log
        tls = mode.endswith("https")
        for attempt in range(1, LISTEN_ATTEMPTS + 1):
            specs, urls, env, by_listener, by_address = self._plan_listeners(upstreams, mode, refused)
            self._injector.scenario = ScenarioState(
                book=book, journal=journal, by_listener=by_listener, by_address=by_address,
                upstreams=upstreams, secrets=tuple(secrets.values()), traffic=traffic, gate=gate)
            try:
                await self._update_listeners(specs)
            except _PortTaken as taken:
                # another process bound a port between free_port() choosing it and mitmproxy binding
                # it (2 parallel workers, many ephemeral client ports): choose again, a few times
                if attempt == LISTEN_ATTEMPTS:
                    raise ProxyHostError(str(taken)) from None
                self._forget_ports(taken.specs)
                continue
            return ProxyRoutes(urls=urls, env=env, ca_cert=self.ca_cert if tls else None)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _plan_listeners(self, upstreams: dict[str, tuple[str, int]], mode: str, refused: set[str | None]) \
            -> tuple[list[str], dict[str, str], dict[str, str], dict[str, str], dict[tuple[str, int], str]]:
        """The listener specs of a scenario and the agent's URLs and environment: (specs, urls, env,
        by_listener, by_address). Listeners of an unchanged upstream keep their port (mitmproxy keeps them open)."""
        scheme = "https" if mode.endswith("https") else "http"
        specs: list[str] = []
        urls: dict[str, str] = {}
        env: dict[str, str] = {}
        by_listener: dict[str, str] = {}
        by_address: dict[tuple[str, int], str] = {}
        if mode.startswith("reverse"):
            taken: set[int] = set()
            for name, (host, port) in upstreams.items():
                if name in refused or None in refused:
                    urls[name] = f"{scheme}://{self.listen_host}:{free_port(self.listen_host)}"
                    continue
                base = f"reverse:http://{host}:{port}@{self.listen_host}"
                listen = self._listen_ports.get(base)
                if listen is None or listen in taken:  # two destinations may share one upstream
                    listen = free_port(self.listen_host)
                    self._listen_ports.setdefault(base, listen)
                taken.add(listen)
                spec = f"{base}:{listen}"
                specs.append(spec)
                by_listener[spec] = name
                urls[name] = f"{scheme}://{self.listen_host}:{listen}"
        else:
            self._forward_port = self._forward_port or free_port(self.listen_host)
            specs.append(f"regular@{self.listen_host}:{self._forward_port}")
            proxy_url = f"http://{self.listen_host}:{self._forward_port}"
            env.update(HTTP_PROXY=proxy_url, HTTPS_PROXY=proxy_url, http_proxy=proxy_url,
                       https_proxy=proxy_url, NO_PROXY="", no_proxy="")
            for name, (host, port) in upstreams.items():
                by_address[(host, port)] = name
                urls[name] = f"{scheme}://{host}:{port}"
                if name in refused or None in refused:  # nothing listens there: the connect is refused
                    urls[name] = f"{scheme}://{self.listen_host}:{free_port(self.listen_host)}"
        if scheme == "https":
            env.update(SSL_CERT_FILE=str(self.ca_cert), REQUESTS_CA_BUNDLE=str(self.ca_cert),
                       CURL_CA_BUNDLE=str(self.ca_cert))
        return specs, urls, env, by_listener, by_address

    def _forget_ports(self, specs: Sequence[str]) -> None:
        """Let the next plan choose new ports for these listeners."""
        for spec in specs:
            base, _, port = spec.rpartition(":")
            if self._listen_ports.get(base) == int(port):
                del self._listen_ports[base]
            if spec.startswith("regular@"):
                self._forward_port = None

    async def _update_listeners(self, specs: list[str]) -> None:
        ps = self._master.addons.get("proxyserver")
        if list(self._master.options.mode) != specs:
            from mitmproxy.exceptions import OptionsError

            try:
                self._master.options.update(mode=specs)
            except OptionsError as e:
                raise ProxyHostError(f"cannot open proxy listeners {specs}: {e}") from e
            task = getattr(ps, "_update_task", None)
            if task is not None:
                await task
        down = [s for s in specs if not ps.servers[s].is_running]
        if down:
            errors = "; ".join(f"{s}: {ps.servers[s].last_exception}" for s in down)
            in_use = [s for s in down if getattr(ps.servers[s].last_exception, "errno", None) == errno.EADDRINUSE]
            if in_use:
                raise _PortTaken(in_use, f"proxy listener(s) failed to start: {errors}")
            raise ProxyHostError(f"proxy listener(s) failed to start: {errors}")

    def finish(self, timeout: float = 10.0) -> int:
        """End the scenario: wait (bounded) for flows in flight, journal those still in flight at the
        deadline as ``in_flight_at_end``, close the journal.

        Returns how many flows were still in flight at the deadline (0 when all ended on their own).
        """
        if not self.running or self._injector is None or self._injector.scenario is None:
            return 0
        return self.call(self.finish_async(timeout), timeout + 5)

    async def finish_async(self, timeout: float = 10.0) -> int:
        """``finish``, on the proxy's own event loop."""
        state = self._injector.scenario if self._injector is not None else None
        if state is None:
            return 0
        try:
            await asyncio.wait_for(state.idle.wait(), timeout)
        except TimeoutError:
            pass
        left = state.in_flight
        self._injector.journal_in_flight(state)  # their lines, so no request the destination saw is missing
        self.journal_seal = state.journal.seal()  # what it wrote, signed: read back later by the harness
        state.journal.close()
        if state.traffic is not None:
            state.traffic.close()
        self._injector.scenario = None
        return left
