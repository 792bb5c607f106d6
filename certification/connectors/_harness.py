"""What every connector shares with the harness, and nothing else: the intents to carry out, each
destination's base URL (through the fault proxy), and the contract's rule that a connector reports
each outcome, SDK errors included, and exits 0 once it is done. No audit log: the harness judges these
connectors in black-box mode, from the wire and the destinations' ledger alone.
"""

import json
import os
import re

TIMEOUT = 1.0  # seconds: the one setting every connector changes from its SDK's default (600 s, 80 s, 60 s, ...)
# so that the timeout scenario (an answer held 2 s) is a timeout for every SDK


def base_url(destination: str) -> str:
    """HARNESS_DESTINATION_<NAME>: every character outside A-Z, a-z, 0-9 becomes _, letters upper case."""
    return os.environ["HARNESS_DESTINATION_" + re.sub(r"[^A-Za-z0-9]", "_", destination).upper()]


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
