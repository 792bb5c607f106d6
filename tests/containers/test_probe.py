"""The sample team service and the ledger probe, without Docker: the service as a plain process answers as the
fake `api: orders` destination does, and the probe turns its listing (HTTP, or a sqlite query) into effect rows
of the harness's ledger, with flow ids inferred from a journal; a probe that cannot list says why."""

from __future__ import annotations

import json
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fake_destinations.host import DestinationHost
from fake_destinations.ledger import count_effects, read_effects
from harness.containers.probe import (
    LedgerSync,
    ProbeError,
    SyncedEffect,
    infer_flows,
    list_http,
    list_sql,
    to_effect,
)
from harness.fingerprint import fingerprint
from tests.containers.sample import HTTP_LEDGER, SQL_LEDGER, sample_process

FIELDS = {name: None for name in ("kind", "operation_key", "client_reference", "committed_at", "params", "flow_id")}


@pytest.fixture
def sample(tmp_path: Path) -> Iterator[str]:
    with sample_process(tmp_path) as url:
        yield url


def call(url: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
         raw: bytes | None = None) -> tuple[int, dict[str, str], Any]:
    data = raw if raw is not None else json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


# the same requests to both: every answer the orders profile gives (created, replayed, 422, 400, 404, 405, lookup)
STORY: list[tuple[str, str, Any, dict[str, str], bytes | None]] = [
    ("POST", "/orders", {"item": "book", "quantity": 2, "client_reference": "r1"}, {"Idempotency-Key": "k1"}, None),
    ("POST", "/orders", {"item": "book", "quantity": 2, "client_reference": "r1"}, {"Idempotency-Key": "k1"}, None),
    ("POST", "/orders", {"item": "pen", "quantity": 2, "client_reference": "r1"}, {"Idempotency-Key": "k1"}, None),
    ("POST", "/orders", {"item": "pen", "quantity": 1}, {}, None),
    ("POST", "/orders", {"item": "pen", "quantity": 1}, {}, None),
    ("POST", "/orders", {"item": "pen"}, {"Idempotency-Key": "k2"}, None),
    ("POST", "/orders", {"item": "pen", "quantity": 5}, {"Idempotency-Key": "k2"}, None),
    ("POST", "/orders", None, {}, b"not json"),
    ("POST", "/orders", None, {}, b"[1, 2]"),
    ("GET", "/orders/ord_0001", None, {}, None),
    ("GET", "/orders/ord_0099", None, {}, None),
    ("GET", "/orders?client_reference=r1", None, {}, None),
    ("GET", "/orders?client_reference=nobody", None, {}, None),
    ("DELETE", "/orders/ord_0001", None, {}, None),
    ("PUT", "/orders", None, {}, None),
    ("GET", "/elsewhere", None, {}, None),
]
COMPARED_HEADERS = ("Idempotent-Replayed", "Content-Type")


def test_the_sample_service_answers_as_the_fake_orders_destination(tmp_path: Path, sample: str) -> None:
    with DestinationHost({"orders": {"api": "orders"}}, tmp_path / "fake" / "ledger.sqlite") as fake:
        for method, path, body, headers, raw in STORY:
            want = call(fake.urls["orders"], method, path, body, headers, raw)
            got = call(sample, method, path, body, headers, raw)
            said = f"{method} {path} {body or raw!r} {headers}"
            assert got[0] == want[0], f"{said}: status {got[0]}, the fake answers {want[0]}: {want[2]}"
            assert got[2] == want[2], f"{said}: body {got[2]}, the fake answers {want[2]}"
            for name in COMPARED_HEADERS:
                assert got[1].get(name, "").split(";")[0] == want[1].get(name, "").split(";")[0], (said, name)
            assert ("Request-Id" in got[1]) == ("Request-Id" in want[1]), said
        fake_effects = read_effects(fake.ledger_path)
    # the harness's own ledger of the fake, and what the sample's probe lists, name the same effects
    sync = LedgerSync("orders", tmp_path / "ledger.sqlite", lambda: list_http(sample + "/_effects", "items"),
                      HTTP_LEDGER["fields"], default_kind=None)
    sync.sync()
    listed = read_effects(tmp_path / "ledger.sqlite")
    compared = ("effect_ref", "kind", "operation_key", "client_reference", "payload_fingerprint", "committed_params")
    assert [{k: e[k] for k in compared} for e in listed] == [{k: e[k] for k in compared} for e in fake_effects]


def test_the_http_probe_writes_each_listed_effect_once_in_the_ledger_schema(tmp_path: Path, sample: str) -> None:
    ledger = tmp_path / "ledger.sqlite"
    sync = LedgerSync("shop", ledger, lambda: list_http(sample + "/_effects", "items"), HTTP_LEDGER["fields"],
                      default_kind="order_created")
    assert sync.sync() == 0 and count_effects(ledger) == 0
    params = {"item": "book", "quantity": 2, "client_reference": "op-1"}
    call(sample, "POST", "/orders", params, {"Idempotency-Key": "op-1"})
    call(sample, "POST", "/orders", params, {"Idempotency-Key": "op-1"})  # replayed: no new effect
    assert sync.sync() == 1 and sync.sync() == 0
    (effect,) = read_effects(ledger)
    assert effect["destination"] == "shop" and effect["effect_ref"] == "ord_0001"
    assert effect["kind"] == "order_created" and effect["operation_key"] == "op-1"
    assert effect["client_reference"] == "op-1" and effect["request_seq"] is None and effect["replay"] == 0
    assert effect["payload_fingerprint"] == fingerprint(params)  # what the proxy journal's body_fingerprint says
    assert json.loads(effect["committed_params"]) == params
    assert sync.final([]) is None  # no journal flow spans it: no flow id, and no problem
    assert read_effects(ledger)[0]["flow_id"] is None


def sqlite_exec(words: Sequence[str]) -> tuple[int, bytes, bytes]:
    """The query run here, as `docker exec` runs it in the container (the same sqlite3 program of Debian)."""
    done = subprocess.run(list(words), capture_output=True, timeout=30, check=False)
    return done.returncode, done.stdout, done.stderr


def test_the_sql_probe_reads_the_services_database_file(tmp_path: Path, sample: str) -> None:
    sql = {**SQL_LEDGER["sql"], "database": str(tmp_path / "orders.db")}
    lister = lambda: list_sql(sql, sqlite_exec, "orders: sqlite query")  # noqa: E731
    assert lister() == []  # sqlite3 -json prints nothing for no rows
    call(sample, "POST", "/orders", {"item": "book", "quantity": 1, "client_reference": "a"})
    call(sample, "POST", "/orders", {"item": "pen", "quantity": 3}, {"Idempotency-Key": "k"})
    sync = LedgerSync("orders", tmp_path / "ledger.sqlite", lister, SQL_LEDGER["fields"], default_kind="order_created")
    assert sync.sync() == 2
    first, second = read_effects(tmp_path / "ledger.sqlite")
    assert (first["effect_ref"], first["operation_key"], first["client_reference"]) == ("ord_0001", None, "a")
    assert (second["effect_ref"], second["operation_key"]) == ("ord_0002", "k")
    assert json.loads(second["committed_params"]) == {"item": "pen", "quantity": 3}  # a JSON text column, read
    assert first["committed_at"] < second["committed_at"]


def test_a_bad_query_says_what_the_database_said(tmp_path: Path, sample: str) -> None:
    sql = {**SQL_LEDGER["sql"], "database": str(tmp_path / "orders.db"), "query": "SELECT id FROM no_such_table"}
    with pytest.raises(ProbeError, match="sqlite3 exited with status 1: .*no such table: no_such_table"):
        list_sql(sql, sqlite_exec, "orders: sqlite query")
    with pytest.raises(ProbeError, match="status 127 \\(is sqlite3 installed in that container\\?\\): .*not found"):
        list_sql(sql, lambda words: (127, b"", b'exec: "sqlite3": executable file not found'), "orders: sqlite query")


class _Answer(BaseHTTPRequestHandler):
    body = b""
    status = 200

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[Any]:
    """A server answering whatever the test sets: ``set(status, body)``; yields (set, url)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def set_answer(status: int, body: bytes) -> str:
        _Answer.status, _Answer.body = status, body
        return f"http://127.0.0.1:{server.server_address[1]}/_effects"
    try:
        yield set_answer
    finally:
        server.shutdown()
        server.server_close()


def test_probe_failures_say_what_went_wrong(answering: Any) -> None:
    url = answering(200, b"<html>not json</html>")
    with pytest.raises(ProbeError, match=r"GET .*/_effects answered no JSON .*not json"):
        list_http(url, "items")
    url = answering(500, b'{"error": "boom"}')
    with pytest.raises(ProbeError, match=r"answered 500: .*boom"):
        list_http(url, "items")
    url = answering(200, b'{"effects": []}')
    with pytest.raises(ProbeError, match=r"the answer has no 'items' \(ledger.http.rows\); it holds keys effects"):
        list_http(url, "items")
    url = answering(200, b'{"items": {"id": 1}}')
    with pytest.raises(ProbeError, match="'items' is a JSON dict, not the list of effects"):
        list_http(url, "items")
    with pytest.raises(ProbeError, match=r"GET http://127.0.0.1:1/_effects failed: .*refused"):
        list_http("http://127.0.0.1:1/_effects", "items")


def test_a_row_without_a_declared_field_is_a_probe_failure() -> None:
    fields = {**FIELDS, "effect_ref": "id", "operation_key": "key"}
    with pytest.raises(ProbeError, match=r"row 2: no field 'key' \(ledger.fields.operation_key\); the row's fields: "
                                         r"id, kind"):
        to_effect({"id": "x", "kind": "k"}, fields, default_kind=None, where="row 2")
    with pytest.raises(ProbeError, match="row 1: field 'id' .* is empty"):
        to_effect({"id": None, "key": "k"}, fields, default_kind=None, where="row 1")
    with pytest.raises(ProbeError, match="a JSON list, not an object"):
        to_effect([1], fields, default_kind=None, where="row 1")
    with pytest.raises(ProbeError, match="committed_at 'yesterday' is neither unix seconds nor an ISO 8601 time"):
        to_effect({"id": "x", "key": None, "at": "yesterday"}, {**fields, "committed_at": "at"}, default_kind=None,
                  where="row 1")
    null_key = to_effect({"id": "x", "key": None}, fields, default_kind="order_created", where="row 1")
    assert null_key["operation_key"] is None and null_key["kind"] == "order_created"  # present, and null: no key


def test_committed_at_reads_unix_seconds_and_iso_times_with_their_precision() -> None:
    fields = {**FIELDS, "effect_ref": "id", "committed_at": "at"}
    read = lambda at: to_effect({"id": "x", "at": at}, fields, default_kind=None, where="r")  # noqa: E731
    assert (read(1700000000.25)["committed_at"], read(1700000000.25)["precision"]) == (1700000000.25, 0.0)
    assert read(1700000000)["precision"] == 1.0  # whole seconds: the commit is somewhere in that second
    assert read("2023-11-14T22:13:20Z")["committed_at"] == 1700000000.0
    assert read("2023-11-14 22:13:20.5")["committed_at"] == 1700000000.5  # no zone: UTC
    assert read("2023-11-14T22:13:20.500+00:00")["precision"] == pytest.approx(0.001)
    assert read("1700000000.5")["committed_at"] == 1700000000.5


def flow(flow_id: str, start: float, end: float | None, *, key: str | None = None, method: str = "POST",
         destination: str = "shop", forwarded: bool = True, printed: str | None = None,
         count: int = 1) -> dict[str, Any]:
    return {"flow_id": flow_id, "ts_request": start, "ts_done": end, "idempotency_key": key, "method": method,
            "destination": destination, "forwarded": forwarded, "body_fingerprint": printed, "forward_count": count}


def synced(seq: int, at: float, *, key: str | None = None, precision: float = 0.0, printed: str | None = None,
           flow_id: str | None = None) -> SyncedEffect:
    return SyncedEffect(seq, {"operation_key": key, "flow_id": flow_id, "payload_fingerprint": printed}, at,
                        at + precision)


def inferred(journal: list[dict[str, Any]], *effects: SyncedEffect) -> dict[int, str]:
    return infer_flows(list(effects), "shop", journal)


def test_the_flow_of_an_effect_is_the_forwarded_write_spanning_its_commit() -> None:
    journal = [flow("f1", 10.0, 11.0, key="k"), flow("f2", 12.0, 14.0, key="k"), flow("read", 12.0, 14.0, method="GET"),
               flow("other", 12.0, 14.0, destination="else"), flow("refused", 12.0, 14.0, forwarded=False)]
    assert inferred(journal, synced(1, 10.5, key="k")) == {1: "f1"}
    assert inferred(journal, synced(1, 13.0, key="k")) == {1: "f2"}  # reads, other destinations, refused: not it
    assert inferred(journal, synced(1, 11.5, key="k")) == {}  # between the two: none spans it
    assert inferred(journal, synced(1, 10.0, key="k", precision=2.5)) == {}  # a whole second: both may have
    keyed = [flow("a", 10.0, 15.0, key="k1"), flow("b", 12.0, 14.0, key="k2")]
    assert inferred(keyed, synced(1, 13.0, key="k2")) == {1: "b"}  # the key tells them apart
    assert inferred([flow("held", 10.0, None)], synced(1, 99.0)) == {1: "held"}  # no end: in flight at the end


def test_two_writes_in_flight_are_told_apart_by_payload_or_by_what_the_other_effect_took() -> None:
    # a keyless retry while the first answer is held: the first write spans both commits, the retry one
    held = [flow("first", 10.0, 12.5), flow("retry", 11.0, 11.2)]
    assert inferred(held, synced(1, 10.1)) == {1: "first"}
    assert inferred(held, synced(2, 11.1)) == {}  # alone, the second commit could be either's
    assert inferred(held, synced(1, 10.1), synced(2, 11.1)) == {1: "first", 2: "retry"}  # one effect per write
    assert inferred(held, synced(1, 10.1, flow_id="first"), synced(2, 11.1)) == {2: "retry"}  # the service's own
    twice = [flow("twice", 10.0, 12.5, count=2), flow("retry", 11.0, 11.2)]
    assert inferred(twice, synced(1, 10.1), synced(2, 11.1)) == {1: "twice"}  # delivered twice: it may have both
    other = [flow("a", 10.0, 12.0, printed="sha256:a"), flow("b", 10.5, 11.5, printed="sha256:b")]
    assert inferred(other, synced(1, 11.0, printed="sha256:b")) == {1: "b"}  # another payload: not that one
    assert inferred([flow("a", 10.0, 15.0), flow("b", 12.0, 14.0)], synced(1, 13.0), synced(2, 13.5)) == {}
