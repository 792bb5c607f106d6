"""Proxy overhead, side by side in one process tree: direct vs bare mitmproxy vs our fault injector,
the injector both embedded (the baseline: how it ran before it moved out of process) and in the
process of its own the harness now runs it in.

    python benchmarks/proxy_bench.py [--requests 2000] [--json]

Processes: one aiohttp destination, one ``mitmdump`` in reverse mode with a pass-through addon,
one process embedding a :class:`ProxyServer` and driving a :class:`ProxyHost` (its proxy process),
both with a realistic rule set and the journal on; the client
(``requests.Session``, keep-alive, small JSON POSTs with an Idempotency-Key) runs here and
interleaves the four targets in blocks so they share the machine's noise. Also measured in the
injector's process: proxy start-up, and ``configure()`` + ``finish()`` per scenario (reuse), with
the same upstream and with a new one (a new listener).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DESTINATION = r"""
import sys
from aiohttp import web
async def create(request):
    await request.read()
    return web.json_response({"id": "tkt_1", "status": "open"}, status=201)
app = web.Application()
app.router.add_route("*", "/{tail:.*}", create)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
"""

PASSTHROUGH = """
class PassThrough:
    def request(self, flow):
        pass
addons = [PassThrough()]
"""

# Rules a scenario would carry: all evaluated on every request, none firing on the measured path.
REALISTIC_RULES = [
    {"id": "lose_first_create", "action": "drop_response_after_commit",
     "match": {"destination": "tickets", "method": "POST", "path": "/orders", "nth": 1, "per": "idempotency_key"}},
    {"id": "throttle", "action": "synthetic_status", "status": 429, "retry_after": 1,
     "match": {"destination": "tickets", "method": "POST", "path": "/payments/{id}", "every": 3}},
    {"id": "slow_lookup", "action": "latency", "delay_ms": 50, "jitter_ms": 20,
     "match": {"method": "GET", "path": "/tickets/{id}"}},
    {"id": "flaky", "action": "synthetic_status", "status": 503, "match": {"headers": {"X-Chaos": "*"}}},
    {"id": "vip", "action": "hold_response", "hold_ms": 5000, "match": {"body": {"customer.tier": "vip"}}},
    {"id": "dup", "action": "duplicate_delivery", "match": {"path": "/webhooks/*", "probability": 0.5}},
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def spawn(stack: ExitStack, args: list[str], **kw) -> subprocess.Popen:
    proc = subprocess.Popen(args, start_new_session=True, **kw)

    def kill() -> None:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)

    stack.callback(kill)
    return proc


def _reconfigure_figures(host, upstream: str, journal: str, tag: str) -> dict[str, float]:
    """Median ms of configure()+finish() per scenario: same upstream (listener kept), and a new one."""
    routes = {"tickets": upstream}
    same, fresh = [], []
    for i in range(50):
        t = time.perf_counter()
        host.configure(routes, REALISTIC_RULES, Path(journal).with_suffix(f".{tag}{i}.ndjson"))
        host.finish()
        same.append(time.perf_counter() - t)
    for i in range(20):  # a new upstream each time: a new listener, the old one closed
        t = time.perf_counter()
        host.configure({"tickets": f"http://127.0.0.1:{40000 + i}"}, REALISTIC_RULES,
                       Path(journal).with_suffix(f".{tag}new{i}.ndjson"))
        host.finish()
        fresh.append(time.perf_counter() - t)
    return {"configure_same_ms": statistics.median(same) * 1000,
            "configure_new_listener_ms": statistics.median(fresh) * 1000}


def serve_injector(upstream: str, journal: str) -> None:
    """Child process: both ways of running our injector, side by side. ``embedded``: a ProxyServer in
    this process (how the harness ran it before it moved out of process; the baseline); ``process``:
    the harness's ProxyHost, its own process under the runtime's interpreter. Prints the URLs and
    figures, then waits for stdin to close."""
    from harness.proxy.host import ProxyHost
    from harness.proxy.server import ProxyServer

    t0 = time.perf_counter()
    embedded = ProxyServer(confdir=Path(journal).with_name("mitm-embedded"))
    embedded.start()
    embedded_start = time.perf_counter() - t0
    t0 = time.perf_counter()
    host = ProxyHost(confdir=Path(journal).with_name("mitm-process"))
    host.start()
    process_start = time.perf_counter() - t0
    figures = {"embedded": {"start_ms": embedded_start * 1000,
                            **_reconfigure_figures(embedded, upstream, journal, "e")},
               "process": {"start_ms": process_start * 1000, **_reconfigure_figures(host, upstream, journal, "p")}}
    urls = {"embedded": embedded.configure({"tickets": upstream}, REALISTIC_RULES, journal).urls["tickets"],
            "process": host.configure({"tickets": upstream}, REALISTIC_RULES,
                                      Path(journal).with_suffix(".process.ndjson")).urls["tickets"]}
    print(json.dumps({"urls": urls, "figures": figures}), flush=True)
    sys.stdin.read()
    host.stop()
    embedded.stop()


def measure(urls: dict[str, str], n: int, block: int = 50) -> dict[str, list[float]]:
    import requests

    sessions = {name: requests.Session() for name in urls}
    body = {"title": "disk full on db-3", "priority": "high", "customer": {"id": 42, "tier": "std"}}
    times: dict[str, list[float]] = {name: [] for name in urls}
    for name, url in urls.items():  # warm-up: connections, CA, caches
        for i in range(100):
            sessions[name].post(url + "/tickets", json=body, headers={"Idempotency-Key": f"warm-{i}"}, timeout=10)
    for start in range(0, n, block):
        for name, url in urls.items():
            s = sessions[name]
            for _ in range(start, min(start + block, n)):
                t = time.perf_counter()
                r = s.post(url + "/tickets", json=body, headers={"Idempotency-Key": "op_bench"}, timeout=10)
                times[name].append(time.perf_counter() - t)
                if r.status_code != 201:
                    raise RuntimeError(f"{name}: unexpected status {r.status_code}")
    return times


def forward_nagle(upstream: str, proxy: str, n: int = 100) -> dict[str, float]:
    """Median ms of a small POST through a forward proxy, before and after disable_nagle_for_proxies()."""
    import requests

    from harness.proxy.host import disable_nagle_for_proxies

    out = {}
    for variant in ("urllib3_default", "nagle_disabled"):
        if variant == "nagle_disabled":
            disable_nagle_for_proxies()
        s = requests.Session()
        s.proxies = {"http": proxy}
        s.trust_env = False
        samples = []
        for i in range(n + 10):
            t = time.perf_counter()
            s.post(upstream + "/tickets", json={"title": "t", "i": i}, timeout=10)
            if i >= 10:
                samples.append(time.perf_counter() - t)
        out[variant] = statistics.median(samples) * 1000
    return out


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000, help="requests per target (default 2000)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--serve-injector", nargs=2, metavar=("UPSTREAM", "JOURNAL"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_injector:
        serve_injector(*args.serve_injector)
        return 0

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    mitmdump = shutil.which("mitmdump") or str(Path(sys.executable).with_name("mitmdump"))
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="proxy-bench-") as tmp:
        dest_port = free_port()
        spawn(stack, [sys.executable, "-c", DESTINATION, str(dest_port)])
        wait_port(dest_port)
        upstream = f"http://127.0.0.1:{dest_port}"

        addon = Path(tmp, "passthrough.py")
        addon.write_text(PASSTHROUGH)
        bare_port, forward_port = free_port(), free_port()
        spawn(stack, [mitmdump, "-q", "--mode", f"reverse:{upstream}@127.0.0.1:{bare_port}",
                      "--mode", f"regular@127.0.0.1:{forward_port}", "-s", str(addon),
                      "--set", "connection_strategy=lazy", "--set", f"confdir={tmp}/mitm"],
              stdout=subprocess.DEVNULL)

        injector = spawn(stack, [sys.executable, __file__, "--serve-injector", upstream, f"{tmp}/journal.ndjson"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        stack.callback(lambda: injector.stdin and injector.stdin.close())
        line = injector.stdout.readline()
        if not line:
            raise RuntimeError("the injector process did not start")
        inj = json.loads(line)
        wait_port(bare_port)

        urls = {"direct": upstream, "bare_mitmproxy": f"http://127.0.0.1:{bare_port}",
                "injector_embedded": inj["urls"]["embedded"], "injector_process": inj["urls"]["process"]}
        times = measure(urls, args.requests)
        wait_port(forward_port)
        nagle = forward_nagle(upstream, f"http://127.0.0.1:{forward_port}")
        journal_lines = sum(1 for _ in open(f"{tmp}/journal.process.ndjson"))

    stats = {name: {"median_ms": statistics.median(t) * 1000, "p99_ms": p(t, 0.99) * 1000} for name, t in times.items()}
    emb, proc = inj["figures"]["embedded"], inj["figures"]["process"]
    out = {
        "requests_per_target": args.requests,
        "targets": stats,
        "ratio_process_vs_embedded_median": stats["injector_process"]["median_ms"]
        / stats["injector_embedded"]["median_ms"],
        "ratio_process_vs_embedded_p99": stats["injector_process"]["p99_ms"] / stats["injector_embedded"]["p99_ms"],
        "ratio_injector_vs_bare_median": stats["injector_process"]["median_ms"] / stats["bare_mitmproxy"]["median_ms"],
        "ratio_injector_vs_bare_p99": stats["injector_process"]["p99_ms"] / stats["bare_mitmproxy"]["p99_ms"],
        "ratio_bare_vs_direct_median": stats["bare_mitmproxy"]["median_ms"] / stats["direct"]["median_ms"],
        "embedded": emb,
        "process": proc,
        "ratio_reconfigure_same_upstream": proc["configure_same_ms"] / emb["configure_same_ms"],
        "ratio_reconfigure_new_listener": proc["configure_new_listener_ms"] / emb["configure_new_listener_ms"],
        "ratio_start": proc["start_ms"] / emb["start_ms"],
        "journal_lines": journal_lines,
        "forward_mode_post_median_ms": nagle,
        "rules": len(REALISTIC_RULES),
    }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{'target':<16}{'median ms':>10}{'p99 ms':>10}")
        for name, s in stats.items():
            print(f"{name:<16}{s['median_ms']:>10.3f}{s['p99_ms']:>10.3f}")
        print(f"injector out of process / embedded: median {out['ratio_process_vs_embedded_median']:.3f}x, "
              f"p99 {out['ratio_process_vs_embedded_p99']:.3f}x (goal <= 1.15x)")
        print(f"injector (out of process) / bare mitmproxy: median {out['ratio_injector_vs_bare_median']:.3f}x, "
              f"p99 {out['ratio_injector_vs_bare_p99']:.3f}x")
        print(f"bare mitmproxy / direct:   median {out['ratio_bare_vs_direct_median']:.2f}x")
        for name, fig in (("embedded", emb), ("out of process", proc)):
            print(f"{name:>15}: start-up {fig['start_ms']:.0f} ms; configure()+finish() per scenario "
                  f"{fig['configure_same_ms']:.2f} ms (same upstream), {fig['configure_new_listener_ms']:.2f} ms "
                  f"(new listener)")
        print(f"out of process / embedded: reconfigure {out['ratio_reconfigure_same_upstream']:.2f}x (same upstream), "
              f"{out['ratio_reconfigure_new_listener']:.2f}x (new listener), start-up {out['ratio_start']:.2f}x")
        print(f"forward mode (bare mitmproxy), small POST median: {nagle['urllib3_default']:.2f} ms with urllib3's "
              f"default (Nagle on), {nagle['nagle_disabled']:.2f} ms after disable_nagle_for_proxies()")
        print(f"journal lines written by the injector: {journal_lines} "
              f"({len(REALISTIC_RULES)} rules evaluated per request)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
