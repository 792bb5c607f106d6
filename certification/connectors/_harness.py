"""What every connector shares with the harness, and nothing else: the intents to carry out, each
destination's base URL (through the fault proxy), and the contract's rule that a connector reports
each outcome, SDK errors included, and exits 0 once it is done. No audit log: the harness judges these
connectors in black-box mode, from the wire and the destinations' ledger alone.
"""

import json
import os
import re
import shlex

TIMEOUT = 1.0  # seconds: the one setting every connector changes from its SDK's default (600 s, 80 s, 60 s, ...)
# so that the timeout scenario (an answer held 2 s) is a timeout for every SDK


def base_url(destination: str) -> str:
    """HARNESS_DESTINATION_<NAME>: every character outside A-Z, a-z, 0-9 becomes _, letters upper case."""
    return os.environ["HARNESS_DESTINATION_" + re.sub(r"[^A-Za-z0-9]", "_", destination).upper()]


def server_command(destination: str) -> list[str]:
    """HARNESS_MCP_SERVER_<NAME>: the words of the command that starts an MCP destination's server over stdio."""
    return shlex.split(os.environ["HARNESS_MCP_SERVER_" + re.sub(r"[^A-Za-z0-9]", "_", destination).upper()])


def report(intent_id: str, outcome: str, effect_ref: str | None = None) -> None:
    """What the connector tells its caller, as the harness reads it (docs/contract.md, "What the program told its
    caller"): success with the resource's id, error, or timeout."""
    line = {"intent_id": intent_id, "outcome": outcome, **({"effect_ref": effect_ref} if effect_ref else {})}
    print("harness-report: " + json.dumps(line), flush=True)


def run_tools(call) -> None:
    """``call(server_command, tool, arguments)`` once per intent (its kind is the tool), and report what it
    returned (the resource's id: success), or what it raised (a TimeoutError: timeout; anything else: error)."""
    with open(os.environ["HARNESS_INTENTS"], encoding="utf-8") as f:
        intents = json.load(f)["intents"]
    for intent in intents:
        try:
            result = call(server_command(intent["destination"]), intent["kind"], dict(intent["params"]))
        except Exception as exc:  # noqa: BLE001 - whatever the SDK raised is this intent's outcome
            while isinstance(exc, BaseExceptionGroup) and exc.exceptions:  # an SDK's task group wraps what it raised
                exc = exc.exceptions[0]
            print(f"{intent['intent_id']}: {type(exc).__module__}.{type(exc).__name__}: {exc}", flush=True)
            report(intent["intent_id"], "timeout" if isinstance(exc, TimeoutError) else "error")
        else:
            print(f"{intent['intent_id']}: -> {result}", flush=True)
            report(intent["intent_id"], "success", str(result))


def run(call) -> None:
    """``call(base_url, params)`` once per intent; print what it returned, or the error it raised."""
    with open(os.environ["HARNESS_INTENTS"], encoding="utf-8") as f:
        intents = json.load(f)["intents"]
    for intent in intents:
        try:
            print(f"{intent['intent_id']}: -> {call(base_url(intent['destination']), dict(intent['params']))}",
                  flush=True)
        except Exception as exc:  # noqa: BLE001 - whatever the SDK raised is this intent's outcome
            print(f"{intent['intent_id']}: {type(exc).__module__}.{type(exc).__name__}: {exc}", flush=True)
