"""The destination process: ``python -m fake_destinations --config FILE``.

Serves every destination of the config on its own 127.0.0.1 port, then prints one line
``READY {"destinations": {name: port}}`` on stdout so the parent knows the ports without polling. Any
start-up error goes to stderr and exits with status 2. SIGTERM stops it cleanly.

The control plane (reset, clock, state) is not on the network: the parent writes one JSON command a line
on this process's stdin and reads one JSON answer a line on its stdout (``{"command": "reset", "body":
{...}}`` -> ``{"result": {...}}`` or ``{"error": "..."}``). Only the harness holds those pipes, so an agent
under test, which can reach every loopback port, can neither reset the ledger, move the clock nor read
the state; a closed stdin means the harness is gone (an orphaned stop). The first line on stdin, before
anything else, is the key that signs the ledger's rows (``{"ledger_key": hex}``): it is never on disk nor in
any environment, so an agent that edits the ledger file cannot sign what it wrote. ``seal`` answers how many
rows this process wrote (``Ledger.rows``), which the harness holds the saved ledger to, and closes the ledger to
whatever arrives after, until the next reset. ``gate`` sets the
run's secret the fault proxy adds to what it forwards (``contract.GATE_HEADER``): a request without it, sent
straight to a port by this run's agent or any other process, is recorded and refused (403), never served.
``agent_containers`` names the containers the run's agent runs in, so that such a request from one of them is
laid at the agent's door (``fake_destinations.peer``).

Imports stay lean (no pydantic; asyncssh only when an SSH host is declared, mcp and uvicorn only when an
MCP tool server is): this start-up is on every scenario's critical path.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

from aiohttp import web

from fake_destinations.ledger import Ledger, save_run_ledger
from fake_destinations.runtime import READY_PREFIX, Clock, DestinationRuntime, hold_live_lock
from fake_destinations.services import API_SERVICE, MCP_SERVICE
from harness.contract import LEDGER_DUMP_FILE


async def _stop_when_orphaned(stop: asyncio.Event, orphaned: asyncio.Event, every: float = 0.5) -> None:
    """Stop if the harness that started us died without stopping us (SIGKILL, OOM): no leaked servers."""
    parent = os.getppid()
    while not stop.is_set():
        await asyncio.sleep(every)
        if os.getppid() != parent:
            orphaned.set()
            stop.set()


def remove_orphaned_folders(config: dict[str, Any]) -> None:
    """After an orphaned stop, remove the folder the dead harness left to us (``owned_dir``: this
    process's ledger, config and log) and its parent if that is now empty (the pool's temp root: the
    last of its processes to go removes it). Nobody else would: no leaked temp folder."""
    owned = config.get("owned_dir")
    if not owned:
        return
    shutil.rmtree(owned, ignore_errors=True)
    with contextlib.suppress(OSError):  # not empty: another process of the pool still runs
        os.rmdir(Path(owned).parent)


def save_ledger_if_orphaned(config: dict[str, Any], run: dict[str, Any]) -> None:
    """After an orphaned stop, save the ledger into the evidence folder of the run we served, unless the
    harness got that far itself: the ground truth stays with the evidence (marked as recovered)."""
    folder = run.get("evidence_folder")
    if not folder or not Path(folder).is_dir() or (Path(folder) / LEDGER_DUMP_FILE).exists():
        return
    try:
        save_run_ledger(config["ledger"], folder,
                        recovered="the destination process, after the harness stopped before saving it")
    except (OSError, sqlite3.Error) as exc:
        print(f"fake_destinations: could not save the ledger into {folder}: {exc}", file=sys.stderr)


class ControlError(ValueError):
    """A control command the parent sent that cannot be carried out (its message goes back on the pipe)."""


def control_commands(ledger: Ledger, clock: Clock, runtimes: dict[str, DestinationRuntime],
                     run: dict[str, Any]) -> dict[str, Any]:
    """The control plane's commands, by name: each takes the command's body and returns its answer."""

    def reset(body: dict[str, Any]) -> dict[str, Any]:
        """A fresh run: keys, resources, clock and ledger cleared; ``evidence_folder``, when given, is the
        folder of the run now served (where an orphaned stop saves the ledger)."""
        folder = body.get("evidence_folder")
        if folder is not None and not isinstance(folder, str):
            raise ControlError(f"'evidence_folder' must be a path, got {folder!r}")
        specs = body.get("destinations")
        if specs is not None:  # the next run declares its destinations otherwise: same names and services
            if not isinstance(specs, dict) or set(specs) != set(runtimes):
                raise ControlError(f"'destinations' must name {sorted(runtimes)}")
            try:
                for name, spec in specs.items():
                    runtimes[name].configure(spec)
            except (ValueError, KeyError, TypeError) as exc:
                raise ControlError(f"'destinations': {exc}") from exc
        ledger.clear()
        clock.reset()
        for runtime in runtimes.values():
            runtime.reset()
            runtime.gate, runtime.agent_containers = None, ()  # the next run sets its own
        if folder is not None:
            run["evidence_folder"] = folder
        return {"reset": True}

    def advance(body: dict[str, Any]) -> dict[str, Any]:
        seconds = body.get("advance")
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds < 0:
            raise ControlError(f"'advance' must be seconds >= 0, got {seconds!r}")
        return {"now": clock.advance(float(seconds))}

    def state(body: dict[str, Any]) -> dict[str, Any]:
        return {"now": clock.now(), "in_flight": {
            name: sorted(getattr(runtime, "in_flight", ())) for name, runtime in runtimes.items()}}

    def gate(body: dict[str, Any]) -> dict[str, Any]:
        """The run's gate (contract.GATE_HEADER): from now on a request without it is refused, recorded."""
        token = body.get("token")
        if token is not None and (not isinstance(token, str) or len(token) < 16):
            raise ControlError("'token' must be a string of 16 characters or more, or null (no gate)")
        for runtime in runtimes.values():
            runtime.gate = token
        return {"gated": token is not None}

    def agent_containers(body: dict[str, Any]) -> dict[str, Any]:
        """The containers the run's agent runs in (full ids), until the next reset: a request past the proxy from
        one of their processes is the agent's (``fake_destinations.peer``)."""
        ids = body.get("ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) and len(i) == 64 for i in ids):
            raise ControlError(f"'ids' must be a list of full container ids, got {ids!r}")
        for runtime in runtimes.values():
            runtime.agent_containers = tuple(ids)
        return {"agent_containers": len(ids)}

    def seal(body: dict[str, Any]) -> dict[str, Any]:
        """The rows this ledger holds by the writer's own account, to hold the file to (``verify_ledger``); the
        ledger takes no more until the next reset (``Ledger.seal``)."""
        return {"rows": ledger.seal()}

    return {"reset": reset, "clock": advance, "state": state, "gate": gate, "seal": seal,
            "agent_containers": agent_containers}


def answer(commands: dict[str, Any], line: bytes) -> dict[str, Any]:
    """One command line from the parent, carried out: its answer, or the error that says why not."""
    try:
        message = json.loads(line)
        name, body = message["command"], message.get("body") or {}
        if name not in commands or not isinstance(body, dict):
            raise ControlError(f"unknown command {name!r} or a body that is no object; known: {sorted(commands)}")
        return {"result": commands[name](body)}
    except ControlError as exc:
        return {"error": str(exc)}
    except (ValueError, KeyError, TypeError) as exc:
        return {"error": f"unreadable command {line[:200]!r}: {exc!r}"}


async def _control(commands: dict[str, Any], stop: asyncio.Event, orphaned: asyncio.Event) -> None:
    """Serve the parent's commands on stdin until it closes it (the harness is gone: an orphaned stop)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    while not stop.is_set():
        line = await reader.readline()
        if not line:
            orphaned.set()
            stop.set()
            return
        sys.stdout.write(json.dumps(answer(commands, line)) + "\n")
        sys.stdout.flush()


def read_ledger_key() -> bytes:
    """The first line on stdin: the ledger's signing key (module docstring). Read a byte at a time, so that
    nothing of the commands after it is taken from the pipe before the event loop reads them."""
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(0, 1)
        if not byte:
            raise BrokenPipeError("stdin closed before the ledger key")  # the harness is gone
        line += byte
    key = bytes.fromhex(json.loads(line)["ledger_key"])
    if len(key) < 16:
        raise ValueError("the ledger key holds fewer than 16 bytes")
    return key


async def serve(config: dict[str, Any], run: dict[str, Any], key: bytes) -> bool:
    """Serve until SIGTERM/SIGINT or until orphaned; returns whether it was orphaned. ``run`` holds the
    evidence folder of the run being served (the control plane's ``reset`` changes it); ``key`` signs the
    ledger's rows."""
    ledger = Ledger(config["ledger"], key)
    clock = Clock(ledger)
    ports: dict[str, int] = config.get("ports") or {}
    runtimes: dict[str, DestinationRuntime] = {}
    runners: list[web.AppRunner] = []
    bound: dict[str, int] = {}
    ssh_servers = []
    mcp_servers = contextlib.AsyncExitStack()  # uvicorn servers and their MCP session managers

    async def start_app(app: web.Application, port: int) -> int:
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", port)
        await site.start()
        return runner.addresses[0][1]  # the ephemeral port actually bound (the runner's one site)

    runtime: DestinationRuntime
    for name, spec in config["destinations"].items():
        if spec["service"] == "ssh":
            from fake_destinations.ssh import SshDestination  # asyncssh is heavy: only when needed
            runtime = SshDestination(name, spec, ledger, clock, Path(config["state_dir"]))
            server, bound[name] = await runtime.start(ports.get(name, 0))
            ssh_servers.append(server)
        elif spec["service"] == MCP_SERVICE:
            from fake_destinations.mcp import McpDestination  # mcp, starlette, uvicorn: only when needed
            runtime = McpDestination(name, spec, ledger, clock)
            bound[name] = await runtime.start(mcp_servers, ports.get(name, 0))
        else:
            from fake_destinations.http import HttpDestination
            if spec["service"] == API_SERVICE:
                from fake_destinations.api import ApiDestination
                runtime = ApiDestination(name, spec, ledger, clock)
            else:
                runtime = HttpDestination(name, spec, ledger, clock)
            bound[name] = await start_app(runtime.app(), ports.get(name, 0))
        runtimes[name] = runtime
    stop, orphaned = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watch = asyncio.create_task(_stop_when_orphaned(stop, orphaned))
    # the rows a ledger kept from before a restart: the harness holds them to what it knew before the crash
    sys.stdout.write(READY_PREFIX + json.dumps({"destinations": bound, "rows": ledger.rows}) + "\n")
    sys.stdout.flush()
    control = asyncio.create_task(_control(control_commands(ledger, clock, runtimes, run), stop, orphaned))
    await stop.wait()
    watch.cancel()
    control.cancel()
    for server in ssh_servers:
        server.close()
    await mcp_servers.aclose()
    for runner in runners:
        await runner.cleanup()
    ledger.close()
    return orphaned.is_set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fake_destinations")
    parser.add_argument("--config", required=True, help="JSON file written by DestinationHost")
    args = parser.parse_args(argv)
    parent = os.getppid()
    config: dict[str, Any] = {}
    orphaned = False
    run: dict[str, Any] = {}
    try:
        config = json.loads(Path(args.config).read_text())
        run["evidence_folder"] = config.get("evidence_folder")
        if config.get("owned_dir"):  # while this process lives, no other harness removes its folder and ledger
            hold_live_lock(config["owned_dir"])
        key = read_ledger_key()
        orphaned = asyncio.run(serve(config, run, key))
    except BrokenPipeError:  # the READY line: the harness died while we started (its fds close before
        orphaned = True      # we are reparented, so getppid() may not show it yet)
        return 2
    except OSError as exc:
        print(f"fake_destinations: cannot start: {exc}", file=sys.stderr)
        return 2
    except (KeyError, ValueError) as exc:
        print(f"fake_destinations: bad config {args.config}: {exc!r}", file=sys.stderr)
        return 2
    finally:
        if orphaned or os.getppid() != parent:  # however we stopped: nobody else will clean up
            save_ledger_if_orphaned(config, run)
            remove_orphaned_folders(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
