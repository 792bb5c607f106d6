"""Seeded fuzzing of `reproduce` on hostile audit logs: each one gives a scenario that loads, or an
IncidentError naming the file; never another exception, never a scenario that does not load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.incident.model import IncidentError
from harness.incident.readers import read_incident
from harness.incident.reproduce import reproduce
from harness.scenario import load
from tests.fuzz.hostile_logs import CONFUSIONS, cases, clean_events

CASES = list(cases(120, seed=15))


def reproduced_or_refused(path: Path) -> None:
    __tracebackhide__ = True
    try:
        text = reproduce(read_incident(path))
    except IncidentError as exc:
        assert str(path) in str(exc), str(exc)
        return
    out = path.with_name("reproduced.yaml")
    out.write_text(text)
    load(out)  # what reproduce writes loads


@pytest.mark.parametrize(("label", "content", "line"), CASES, ids=[label for label, _, _ in CASES])
def test_a_hostile_log_reproduces_or_is_refused_naming_it(label: str, content: bytes, line: int,
                                                          tmp_path: Path) -> None:
    path = tmp_path / "incident.ndjson"
    path.write_bytes(content)
    reproduced_or_refused(path)


_FIELDS = ("destination", "method", "path", "http_status", "dispatch_state", "idempotency_key", "retry_after_seconds",
           "effect_refs", "error", "ts")
_ODD = st.sampled_from(CONFUSIONS + ["my dest!", "tickets", "/", "tickets/x", "/a/{b", "/a b", "POST", "GET",
                                     "sent_no_response", "not_sent", 503, 429, 200, "ReadTimeout", "../../etc"])


@settings(max_examples=150, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.sampled_from(_FIELDS), _ODD), max_size=4),
       intent=st.dictionaries(st.sampled_from(["kind", "destination", "params", "intent_id"]), _ODD, max_size=3))
def test_odd_values_in_attempts_and_intents_reproduce_or_are_refused(changes: list[tuple[str, Any]],
                                                                     intent: dict[str, Any], tmp_path: Path) -> None:
    events = clean_events()
    for event in events:
        if event["event"] == "attempt":
            event.update(dict(changes))
        if event["event"] == "operation":
            event["intent"] = {**event["intent"], **intent}
    path = tmp_path / "incident.ndjson"
    path.write_text("".join(json.dumps(e, default=str) + "\n" for e in events))
    reproduced_or_refused(path)


@pytest.mark.parametrize("ts", [2**64, 1e308, -1e308, 253402300800])
def test_a_clock_no_calendar_holds_reproduces(ts: Any, tmp_path: Path) -> None:
    """Found by a longer run of the corpus: a timestamp past any calendar broke the description's times."""
    events = clean_events()
    for event in events:
        event["ts"] = ts
    path = tmp_path / "incident.ndjson"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    reproduced_or_refused(path)
