"""The resolution a scope writes is the one its records support: each pattern of evidence, decided without a
network. Plus the key read from a form body and the effect ref read from XML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests

from harness.instrument import AttemptRecord, ObservationRecord, Operation, dig, instrument, parse_body
from harness.model.agent import decide_resolution
from tests.instrument.loopback import ANSWER_WITHIN, CONTRACT, INTENT, Reply, events, harness_env, serving


@pytest.fixture
def op(tmp_path: Path) -> Operation:
    from harness.instrument import Instrumentation

    return Instrumentation(env=harness_env(tmp_path, "http://127.0.0.1:9")).operation(INTENT)


def att(op: Operation, state: str, status: int | None = None, refs: tuple[str, ...] = ()) -> str:
    n = len(op.attempts) + 1
    record = AttemptRecord(f"att_{n}", float(n), "POST", "/tickets", "k", None, None, n, 3 - n,
                           dispatch_state=state, http_status=status, effect_refs=list(refs))
    op.records.append(record)
    return record.attempt_id


def obs(op: Operation, found: bool | None, refs: tuple[str, ...] = (), lag_possible: bool | None = None,
        source: str = "lookup", status: str | None = None) -> str:
    record = ObservationRecord(f"obs_{len(op.records)}", 10.0 + len(op.records), source, found, list(refs),
                               lag_possible, status)
    op.records.append(record)
    return record.observation_id


def decided(op: Operation) -> tuple[str | None, list[str], list[str]]:
    state, refs, evidence, _ = decide_resolution(op.records)
    return state, refs, evidence


def test_nothing_recorded_is_nothing_to_resolve(op: Operation) -> None:
    assert decided(op) == (None, [], [])


def test_attempts_that_never_left_are_failed(op: Operation) -> None:
    ids = [att(op, "not_sent") for _ in range(3)]
    assert decided(op) == ("failed", [], ids)


def test_a_refused_connection_after_a_lost_answer_stays_unknown(op: Operation) -> None:
    att(op, "sent_no_response")
    att(op, "not_sent")
    assert decided(op)[0] == "unknown"


def test_a_refusal_after_a_lost_answer_stays_unknown(op: Operation) -> None:
    att(op, "sent_no_response")
    att(op, "response_received", 422)  # the key's other payload, say: it says nothing of the first attempt
    assert decided(op)[0] == "unknown"


def test_a_refusal_alone_is_failed(op: Operation) -> None:
    only = att(op, "response_received", 400)
    assert decided(op) == ("failed", [], [only])


@pytest.mark.parametrize("status", [409, 408, 500, 503, 202])
def test_answers_that_prove_nothing_stay_unknown(op: Operation, status: int) -> None:
    att(op, "response_received", status)
    assert decided(op)[0] == "unknown"


def test_a_429_alone_is_failed_nothing_was_done(op: Operation) -> None:
    only = att(op, "response_received", 429)
    assert decided(op) == ("failed", [], [only])


def test_a_negative_lookup_after_the_lag_proves_absence(op: Operation) -> None:
    att(op, "sent_no_response")
    lookup = obs(op, False, lag_possible=False)
    assert decided(op) == ("failed", [], [lookup])


def test_a_negative_lookup_within_the_lag_proves_nothing(op: Operation) -> None:
    att(op, "sent_no_response")
    obs(op, False, lag_possible=True)
    assert decided(op)[0] == "unknown"


def test_an_unanswered_lookup_proves_nothing(op: Operation) -> None:
    att(op, "response_received", 500)
    obs(op, None)
    assert decided(op)[0] == "unknown"


def test_a_lookup_that_found_the_effect_closes_it(op: Operation) -> None:
    att(op, "response_received", 500)
    lookup = obs(op, True, ("tkt_1",))
    assert decided(op) == ("succeeded", ["tkt_1"], [lookup])


def test_a_lookup_older_than_the_last_attempt_says_nothing_of_it(op: Operation) -> None:
    att(op, "sent_no_response")
    obs(op, True, ("tkt_1",))
    att(op, "sent_no_response")
    assert decided(op)[0] == "unknown"


def test_a_2xx_closes_it_with_its_ref(op: Operation) -> None:
    att(op, "sent_no_response")
    last = att(op, "response_received", 201, ("tkt_1",))
    assert decided(op) == ("succeeded", ["tkt_1"], [last])


def test_a_read_back_finding_more_than_the_answer_is_a_duplicate(op: Operation) -> None:
    att(op, "response_received", 201, ("dlv_2",))
    read_back = obs(op, True, ("dlv_1", "dlv_2"))
    assert decided(op) == ("duplicate_effect_confirmed", ["dlv_1", "dlv_2"], [read_back])


def test_an_accepted_202_closes_on_its_status_poll(op: Operation) -> None:
    accepted = att(op, "response_received", 202)
    obs(op, False, source="status_poll", status="pending")
    done = obs(op, True, ("dep_1",), source="status_poll", status="succeeded")
    assert decided(op) == ("succeeded", ["dep_1"], [accepted, done])


def test_an_accepted_202_that_failed(op: Operation) -> None:
    accepted = att(op, "response_received", 202)
    poll = obs(op, False, source="status_poll", status="failed")
    assert decided(op) == ("failed", [], [accepted, poll])


def test_the_duplicate_resolution_opens_a_correction_operation(tmp_path: Path) -> None:
    replies = [Reply(201, {"id": "dlv_2"}), Reply(200, {"items": [{"id": "dlv_1"}, {"id": "dlv_2"}]})]
    with serving(replies) as server, instrument(env=harness_env(tmp_path, server.url)) as audit, \
            audit.operation(INTENT) as op:
        requests.post(server.url + "/tickets", json={}, timeout=ANSWER_WITHIN)
        requests.get(server.url + "/tickets", params={"client_reference": op.operation_id}, timeout=ANSWER_WITHIN)
    *_, correction, resolution = events(tmp_path)
    assert correction["correction_of_operation_id"] == op.operation_id and correction["owner"] == "operator"
    assert resolution["correction_operation_id"] == correction["operation_id"]
    assert resolution["state"] == "duplicate_effect_confirmed"


def test_the_key_of_a_body_token_is_read_from_a_form_body(tmp_path: Path) -> None:
    contract: dict[str, Any] = {**CONTRACT, "idempotency": {**CONTRACT["idempotency"], "style": "client_token",
                                                             "header": None, "body_field": "ClientToken"}}
    with serving([Reply(201, {"id": "i-1"})]) as server, \
            instrument(env=harness_env(tmp_path, server.url, contract)) as audit, audit.operation(INTENT) as op:
        requests.post(server.url + "/tickets", data={"ClientToken": op.idempotency_key, "Action": "Run"},
                      timeout=ANSWER_WITHIN)
    attempt = [e for e in events(tmp_path) if e["event"] == "attempt"][0]
    assert attempt["idempotency_key"] == op.idempotency_key
    assert attempt["request_fingerprint"].startswith("sha256:")  # the raw form bytes, as the proxy hashes them


def test_effect_refs_are_read_at_a_dotted_path_or_an_xml_element_path() -> None:
    assert dig(json.loads('{"vm": {"id": "vm-1"}, "items": [{"id": "a"}]}'), "vm.id") == "vm-1"
    assert dig(json.loads('{"items": [{"id": "a"}]}'), "items.0.id") == "a"
    xml = b'<RunInstancesResponse xmlns="http://ec2"><instancesSet><item><instanceId>i-0abc</instanceId>' \
        b'</item></instancesSet></RunInstancesResponse>'
    assert dig(parse_body(xml, "text/xml"), "instancesSet.item.instanceId") == "i-0abc"
    assert dig(parse_body(b"not json", "text/plain"), "id") is None
