"""The fake SSH host through a real asyncssh client: commands, the deploy marker, a dropped exit status."""

from __future__ import annotations

import asyncio

import asyncssh
import pytest


async def _run(host, *commands, env=None):
    results = []
    for command in commands:  # one connection per command: a dropped one cannot carry the next
        async with asyncssh.connect("127.0.0.1", host.ports["ssh"], username="ops", known_hosts=None,
                                    client_keys=None, agent_path=None, connect_timeout=10) as connection:
            results.append(await asyncio.wait_for(connection.run(command, env=env or {}), 10))
    return results


def run(host, *commands, env=None):
    return asyncio.run(_run(host, *commands, env=env))


def ssh_effects(host):
    return [e["effect_ref"] for e in host.effects() if e["destination"] == "ssh"]


def test_commands_run_and_are_recorded(destinations):
    created, key1, key2, again = run(destinations, "create-user alice", "install-key alice ssh-ed25519 AAAA",
                                     "install-key alice ssh-ed25519 AAAA", "create-user alice",
                                     env={"TRACEPARENT": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"})
    assert created.exit_status == 0 and created.stdout == "created user alice\neffect_ref: user:alice\n"
    # request 2 is the declared drop: it ran (the key is installed) but its exit status never came
    assert key1.exit_status is None and key1.stdout == ""
    assert key2.exit_status == 0 and "key #2" in key2.stdout  # install-key is not idempotent
    # create-user's convergence: nothing done, the receipt names the user that holds the state
    assert again.exit_status == 9 and "already exists" in again.stderr and again.stdout == "effect_ref: user:alice\n"
    assert ssh_effects(destinations) == ["user:alice", "key:alice:1", "key:alice:2"]
    rows = destinations.requests()
    assert [r["outcome"] for r in rows] == ["committed", "committed", "committed", "replayed"]
    assert rows[0]["method"] == "EXEC" and rows[0]["path"] == "create-user alice"
    assert rows[0]["traceparent"].startswith("00-1111") and rows[0]["payload_fingerprint"].startswith("sha256:")
    assert all(e["kind"] == "ssh_exec" for e in destinations.effects())


def test_drop_after_exec_leaves_the_effect_in_the_ledger(destinations):
    first, dropped = run(destinations, "restart-service nginx", "deploy v2 --operation-id op_7")
    assert first.exit_status == 0
    assert dropped.exit_status is None  # the client never learns the outcome
    [row] = [r for r in destinations.requests() if r["path"].startswith("deploy")]
    assert row["outcome"] == "committed" and row["status"] == 0 and row["effect_ref"] == "deploy:op_7"
    # the retry on a new connection finds the operation marker and does nothing more
    [retry] = run(destinations, "deploy v2 --operation-id op_7")
    assert retry.exit_status == 0 and "already applied" in retry.stdout
    assert ssh_effects(destinations) == ["restart:nginx:1", "deploy:op_7"]
    assert destinations.requests()[-1]["outcome"] == "replayed"
    assert destinations.requests()[-1]["idempotency_key"] == "op_7"


def test_restart_service_is_an_effect_every_time(destinations):
    run(destinations, "restart-service nginx")
    run(destinations, "restart-service api", "restart-service nginx")  # 2nd command overall is dropped
    assert ssh_effects(destinations) == ["restart:nginx:1", "restart:api:1", "restart:nginx:2"]


@pytest.mark.parametrize("command, status, message", [
    ("rm -rf /", 127, "rm: command not found"),
    ("deploy v1", 2, "usage: deploy RELEASE --operation-id OP"),
    ("install-key bob ssh-ed25519 AAAA", 6, "no such user 'bob'"),
    ("create-user 'unterminated", 2, "cannot parse command"),
])
def test_bad_commands_are_rejected_and_recorded(destinations, command, status, message):
    [result] = run(destinations, command)
    assert result.exit_status == status and message in result.stderr
    assert destinations.requests()[-1]["outcome"] == "rejected"
    assert ssh_effects(destinations) == []
