"""The fake SSH host: a tiny command registry behind a real asyncssh server.

Commands (one exec request each, recorded in the effect ledger like an HTTP request):
    create-user NAME                       exit 9 if NAME exists (its convergence: no new effect, the
                                           receipt names the existing user)
    install-key USER KEY...                appends the key every time, like `>> authorized_keys`
    restart-service NAME                   an effect on every call
    deploy RELEASE --operation-id OP       creates the marker for OP exclusively *before* acting;
                                           a second run finds it and does nothing (exit 0)
Declared failures: ``drop_after_exec`` runs the command, commits it, then drops the connection
before the exit status is sent (the SSH form of a lost response); ``error_before_commit`` exits 1
without acting. Any user name is accepted without authentication: this host is a test double.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import asyncssh

from fake_destinations.ledger import Ledger
from fake_destinations.runtime import Clock, DestinationRuntime
from harness.contract import RECEIPT_PREFIX, TRACEPARENT_ENV, TRACEPARENT_HEADER
from harness.fingerprint import fingerprint

# the session variable a client may set for the trace context, in either spelling
TRACEPARENT_VARIABLES = (TRACEPARENT_ENV, TRACEPARENT_HEADER)
CommandResult = tuple[int, str, str, str]  # exit status, stdout, stderr, ledger outcome


class _OpenServer(asyncssh.SSHServer):
    def begin_auth(self, username: str) -> bool:
        return False  # no authentication required


class SshDestination(DestinationRuntime):
    def __init__(self, name: str, spec: dict[str, Any], ledger: Ledger, clock: Clock, state_dir: Path) -> None:
        super().__init__(name, spec, ledger, clock)
        # Kept beside the ledger so a restarted host presents the same host key.
        self.host_key_path = state_dir / f"{name}.ssh_host_key"
        self.commands = {"create-user": self.create_user, "install-key": self.install_key,
                         "restart-service": self.restart_service, "deploy": self.deploy}

    async def start(self, port: int) -> tuple[asyncssh.SSHAcceptor, int]:
        if self.host_key_path.exists():
            key = asyncssh.read_private_key(self.host_key_path)
        else:
            key = asyncssh.generate_private_key("ssh-ed25519")
            key.write_private_key(self.host_key_path)
        server = await asyncssh.create_server(
            _OpenServer, "127.0.0.1", port, server_host_keys=[key], process_factory=self.handle,
            encoding="utf-8", allow_scp=False, sftp_factory=None, x11_forwarding=False,
            agent_forwarding=False)
        return server, server.sockets[0].getsockname()[1]

    async def handle(self, process: asyncssh.SSHServerProcess[str]) -> None:
        command_line = process.command
        if not command_line:
            process.stderr.write("this host only runs commands (no interactive shell)\n")
            process.exit(1)
            return
        env = process.env or {}
        row: dict[str, Any] = {
            "destination": self.name, "method": "EXEC", "path": command_line, "query": None,
            "flow_id": None, "traceparent": next((env[k] for k in TRACEPARENT_VARIABLES if k in env), None),
            "received_at": self.clock.wall(), "idempotency_key": None, "client_reference": None,
            "payload_fingerprint": None, "effect_ref": None, "kind": None, "params": None,
        }
        effects: list[dict[str, Any]] = []
        parse_error: str | None
        try:
            argv = shlex.split(command_line)
        except ValueError as exc:
            argv, parse_error = [], str(exc)
        else:
            parse_error = None
        row["payload_fingerprint"] = fingerprint(argv)
        row["params"] = {"argv": argv}
        row["kind"] = next((op.kind for op in self.service.operations if argv and op.path.split()[0] == argv[0]), None)
        failure = self.next_failure()
        run = self.commands.get(argv[0]) if argv else None
        if parse_error or run is None:
            code, out, err, outcome = 127, "", f"{(argv or [command_line])[0]}: command not found\n", "rejected"
            if parse_error:
                code, err = 2, f"cannot parse command: {parse_error}\n"
        elif failure and failure["fault"] == "error_before_commit":
            code, out, err, outcome = 1, "", "transient failure, nothing was done\n", "failed_before_commit"
        else:
            code, out, err, outcome = run(argv[1:], row, effects)
        row["status"], row["outcome"] = code, outcome
        self.ledger.record(row, effects)  # before anything reaches the client: ground truth first
        if failure and failure["fault"] == "drop_after_exec":
            # The command ran and committed; neither its output nor its exit status leaves the host.
            process.channel.get_connection().abort()
            return
        if row.get("effect_ref"):
            out += f"{RECEIPT_PREFIX} {row['effect_ref']}\n"  # the receipt a client can cite as evidence
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(code)

    # -- the command registry --------------------------------------------------------------------

    def _commit(self, ref: str, row: dict[str, Any], effects: list[dict[str, Any]]) -> None:
        effects.append({"effect_ref": ref, "kind": "ssh_exec"})
        row["effect_ref"] = ref

    def create_user(self, args: list[str], row: dict[str, Any], effects: list[dict[str, Any]]) -> CommandResult:
        if len(args) != 1:
            return 2, "", "usage: create-user NAME\n", "rejected"
        name = args[0]
        if self.ledger.get_resource(self.name, "users", name) is not None:
            # the convergence: nothing done, and the receipt names the user that holds the state, as a replay
            # names the first answer's effect (a rerun after a lost exit status closes on it)
            row["effect_ref"] = f"user:{name}"
            return 9, "", f"create-user: user '{name}' already exists\n", "replayed"
        self.ledger.put_resource(self.name, "users", name, {"id": name, "keys": []}, self.clock.now())
        self._commit(f"user:{name}", row, effects)
        return 0, f"created user {name}\n", "", "committed"

    def install_key(self, args: list[str], row: dict[str, Any], effects: list[dict[str, Any]]) -> CommandResult:
        if len(args) < 2:
            return 2, "", "usage: install-key USER KEY...\n", "rejected"
        user = self.ledger.get_resource(self.name, "users", args[0])
        if user is None:
            return 6, "", f"install-key: no such user '{args[0]}'\n", "rejected"
        user["keys"].append(" ".join(args[1:]))
        self.ledger.put_resource(self.name, "users", args[0], user, self.clock.now())
        self._commit(f"key:{args[0]}:{len(user['keys'])}", row, effects)
        return 0, f"installed key #{len(user['keys'])} for {args[0]}\n", "", "committed"

    def restart_service(self, args: list[str], row: dict[str, Any], effects: list[dict[str, Any]]) -> CommandResult:
        if len(args) != 1:
            return 2, "", "usage: restart-service NAME\n", "rejected"
        number = self.ledger.next_number(self.name, f"restarts:{args[0]}")
        self._commit(f"restart:{args[0]}:{number}", row, effects)
        return 0, f"restarted {args[0]}\n", "", "committed"

    def deploy(self, args: list[str], row: dict[str, Any], effects: list[dict[str, Any]]) -> CommandResult:
        if len(args) != 3 or args[1] != "--operation-id":
            return 2, "", "usage: deploy RELEASE --operation-id OP\n", "rejected"
        release, operation_id = args[0], args[2]
        row["idempotency_key"] = operation_id
        marker = self.ledger.get_resource(self.name, "markers", operation_id)
        if marker is not None:  # the marker exists: this operation already acted
            row["effect_ref"] = marker["effect_ref"]
            return 0, f"operation {operation_id} already applied ({marker['release']}); nothing to do\n", "", \
                "replayed"
        ref = f"deploy:{operation_id}"
        self.ledger.put_resource(self.name, "markers", operation_id,
                                 {"id": operation_id, "release": release, "effect_ref": ref}, self.clock.now())
        self._commit(ref, row, effects)
        return 0, f"deployed {release}\n", "", "committed"
