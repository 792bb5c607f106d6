"""What every connector shares with the harness, and nothing else: the intents to carry out, each
destination's base URL (through the fault proxy), and the contract's rule that a connector reports
each outcome, SDK errors included, and exits 0 once it is done. No audit log: the harness judges these
connectors in black-box mode, from the wire, the destinations' ledger and what each told its caller (a
``harness-report:`` line per intent, H049: "failed" while the effect exists, "done" with none, are findings).
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


class OutcomeUnknown(Exception):
    """What a connector raises when it knows it cannot tell whether the write took effect (a 5xx after a keyed
    write, an answer lost): its caller is told ``unknown``, not ``error``."""


def report(intent_id: str, outcome: str, effect_ref: str | None = None) -> None:
    """What the connector tells its caller, as the harness reads it (docs/contract.md, "What the program told its
    caller"): success with the resource's id, error, timeout or unknown."""
    line = {"intent_id": intent_id, "outcome": outcome, **({"effect_ref": effect_ref} if effect_ref else {})}
    print("harness-report: " + json.dumps(line), flush=True)


def told(exc: BaseException) -> str:
    """The outcome an SDK's exception tells its caller, read from the exception and what it was raised from (the
    chain Python prints, and urllib3's ``reason``): ``timeout`` when it gave up waiting, ``unknown`` when no answer
    came (the connection dropped: an SDK's connection error) or the connector said so (OutcomeUnknown), else
    ``error`` (an answer said the write failed). By class name, so one rule reads every SDK's own exceptions."""
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        names = [cls.__name__ for cls in type(exc).__mro__]
        if isinstance(exc, OutcomeUnknown):
            return "unknown"
        if isinstance(exc, TimeoutError) or any("Timeout" in name for name in names):
            return "timeout"
        if isinstance(exc, ConnectionError) or any(word in name for name in names for word in
                                                   ("Connection", "ProtocolError", "RemoteDisconnected")):
            return "unknown"
        reason = getattr(exc, "reason", None)  # urllib3's MaxRetryError: what the last try ended with
        exc = reason if isinstance(reason, BaseException) else (
            exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__))
    return "error"


def each_intent(carry_out) -> None:
    """``carry_out(intent)`` once per intent of HARNESS_INTENTS; print what it returned (the resource's id) or
    raised, and report it to the harness as what the caller was told (success with that id, or ``told(exc)``)."""
    with open(os.environ["HARNESS_INTENTS"], encoding="utf-8") as f:
        intents = json.load(f)["intents"]
    for intent in intents:
        try:
            result = carry_out(intent)
        except Exception as exc:  # noqa: BLE001 - whatever the SDK raised is this intent's outcome
            while isinstance(exc, BaseExceptionGroup) and exc.exceptions:  # an SDK's task group wraps what it raised
                exc = exc.exceptions[0]
            print(f"{intent['intent_id']}: {type(exc).__module__}.{type(exc).__name__}: {exc}", flush=True)
            report(intent["intent_id"], told(exc))
        else:
            print(f"{intent['intent_id']}: -> {result}", flush=True)
            report(intent["intent_id"], "success", str(result))


def run_tools(call) -> None:
    """``call(server_command, tool, arguments)`` once per intent (its kind is the tool), returning the resource's
    id; each outcome reported (each_intent)."""
    each_intent(lambda intent: call(server_command(intent["destination"]), intent["kind"], dict(intent["params"])))


def run(call) -> None:
    """``call(base_url, params)`` once per intent, returning the resource's id; each outcome reported
    (each_intent)."""
    each_intent(lambda intent: call(base_url(intent["destination"]), dict(intent["params"])))
