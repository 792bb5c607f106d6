"""Plain HTTP agents that write no audit log: a team's connector before any instrumentation (requests and
a retry loop, nothing of the harness but the contract's variable names). ``PlainAgent`` keeps one
Idempotency-Key per intent across its retries and honours Retry-After; each module beside it changes
one habit. Black-box mode judges them from the proxy journal and the ledger alone:

    python -m harness run tests/engine/scenarios/black_box_response_lost.yaml \\
        --agent "python -m tests.common.plain_agents.blind_retry"

``--form`` on the command line sends the params form-encoded, as Stripe's clients do.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import requests

from harness.contract import INTENTS_ENV, destination_env_name, secret_env_name


class PlainAgent:
    """POST each intent's params to its operation; retry an exception, a 5xx or a 429, with one key."""

    attempts = 3
    backoff = 0.1  # seconds, doubled per retry
    timeout = 1.5
    honours_retry_after = True
    form = False  # the params as a form body (application/x-www-form-urlencoded), else JSON

    def key(self, intent: dict[str, Any], attempt: int) -> str | None:
        return f"plain-{intent['intent_id']}"

    def body(self, intent: dict[str, Any], attempt: int) -> dict[str, Any]:
        return dict(intent["params"])

    def should_retry(self, response: requests.Response | None) -> bool:
        return response is None or response.status_code >= 500 or response.status_code == 429

    def wait(self, response: requests.Response | None, attempt: int) -> float:
        asked = response.headers.get("Retry-After") if response is not None else None
        if asked is not None and self.honours_retry_after:
            return float(asked)
        return self.backoff * 2 ** attempt

    def perform(self, intent: dict[str, Any], contract: dict[str, Any]) -> None:
        operation = contract["operations"][intent["kind"]]
        destination = intent["destination"]
        url = os.environ[destination_env_name(destination)] + operation["path"].format(**intent["params"])
        header = contract["idempotency"].get("header") or "Idempotency-Key"
        for attempt in range(self.attempts):
            headers = {"Authorization": f"Bearer {os.environ.get(secret_env_name(destination), '')}"}
            key = self.key(intent, attempt)
            if key:
                headers[header] = key
            try:
                body = {"data" if self.form else "json": self.body(intent, attempt)}
                response: requests.Response | None = requests.request(
                    operation["method"], url, headers=headers, timeout=self.timeout, **body)
            except requests.RequestException:
                response = None
            if not self.should_retry(response) or attempt + 1 == self.attempts:
                return
            time.sleep(self.wait(response, attempt))

    def run(self) -> None:
        with open(os.environ[INTENTS_ENV], encoding="utf-8") as handle:
            data = json.load(handle)
        for intent in data["intents"]:
            self.perform(intent, data["destinations"][intent["destination"]])


def main(agent: type[PlainAgent] = PlainAgent) -> None:
    program = agent()
    program.form = "--form" in sys.argv[1:]
    program.run()
