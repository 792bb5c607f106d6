"""The ledger probe of a container destination: the team's own listing of the effects its service committed,
synced into a ledger SQLite in the harness's schema (``fake_destinations.ledger``), so that ``count_effects``,
``save_run_ledger`` and the checker read a real service's ground truth as they read a fake's.

A probe lists rows (``list_http``: a GET on the service's port; ``list_sql``: a query run by exec in a
container, through the ``Exec`` the caller gives, so this module imports no docker), and ``to_effect`` turns
each row into an effect row through the declaration's ``ledger.fields``. ``LedgerSync`` polls while the agent
runs (``start``/``stop``) and makes the last listing after it ended (``final``), where the effects the service
does not tie to a flow get one from the proxy journal: the forwarded write of that destination (with the
same idempotency key, when the effect has one) whose time spans the effect's commit (``infer_flows``). The
reads the proxy forwarded become ``requests`` rows with no effect (``forwarded_reads``); writes get none.

A probe that cannot list (the service does not answer, the answer is no JSON list, a declared field is
missing) raises ``ProbeError``; its message is what the evidence says when the final listing fails, and the
run is then INCOMPLETE: a ground truth that could not be read never makes a PASS.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from fake_destinations.ledger import EffectWriter
from fake_destinations.templates import find
from harness.errors import HarnessError
from harness.fingerprint import fingerprint

# a command run in a container: its words -> (exit status, stdout, stderr)
Exec = Callable[[Sequence[str]], tuple[int, bytes, bytes]]
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
HTTP_TIMEOUT = 5.0
_FRACTION = re.compile(r"[T ]\d{2}:\d{2}:\d{2}\.(\d+)")


class ProbeError(HarnessError):
    """The ledger probe could not list the service's effects: why, naming the listing and the row."""


def _tail(data: bytes, limit: int = 300) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def list_http(url: str, rows: str | None, *, where: str = "", timeout: float = HTTP_TIMEOUT) -> list[Any]:
    """The rows a GET on ``url`` lists: the answer's ``rows`` (a dotted path), or the answer itself; ``where``
    begins each error's sentence (which probe)."""
    try:
        return _list_http(url, rows, timeout)
    except ProbeError as exc:
        if not where:
            raise
        raise ProbeError(f"{where}: {exc}") from None


def _list_http(url: str, rows: str | None, timeout: float) -> list[Any]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": "application/json"}),
                                    timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise ProbeError(f"GET {url} answered {exc.code}: {_tail(exc.read()) or exc.reason}") from None
    except (OSError, urllib.error.URLError) as exc:
        raise ProbeError(f"GET {url} failed: {getattr(exc, 'reason', None) or exc}") from None
    try:
        answer = json.loads(body)
    except ValueError as exc:
        raise ProbeError(f"GET {url} answered no JSON ({exc}): {_tail(body)!r}") from None
    return _rows_of(answer, rows, f"GET {url}")


def _rows_of(answer: Any, rows: str | None, where: str) -> list[Any]:
    listed = find(answer, rows) if rows else answer
    if rows and not (isinstance(answer, dict) and listed is not None):
        shown = f"keys {', '.join(map(str, answer))}" if isinstance(answer, dict) else f"a JSON {type(answer).__name__}"
        raise ProbeError(f"{where}: the answer has no {rows!r} (ledger.http.rows); it holds {shown}")
    if not isinstance(listed, list):
        raise ProbeError(f"{where}: {repr(rows) if rows else 'the answer'} is a JSON {type(listed).__name__}, not the "
                         "list of effects" + ("" if rows else " (ledger.http.rows names the list inside an object)"))
    return listed


def sql_command(sql: Mapping[str, Any]) -> list[str]:
    """The words that run ``sql``'s query in its container and print its rows as one JSON array."""
    query = str(sql["query"]).strip().rstrip(";")
    if sql["engine"] == "sqlite":
        return ["sqlite3", "-json", "-bail", str(sql["database"]), query]
    wrapped = f"SELECT coalesce(json_agg(t), '[]'::json) FROM ({query}) AS t"
    return ["psql", "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-U", sql.get("user") or "postgres",
            "-d", str(sql["database"]), "-c", wrapped]


def list_sql(sql: Mapping[str, Any], run: Exec, where: str) -> list[Any]:
    """The rows of ``sql``'s query, run in a container by ``run``."""
    words = sql_command(sql)
    try:
        status, out, err = run(words)
    except ProbeError:
        raise
    except Exception as exc:  # noqa: BLE001 - the engine's own error, whatever it is, is the probe's failure
        raise ProbeError(f"{where}: cannot run {words[0]}: {exc}") from None
    if status != 0:
        hint = (f" (is {words[0]} installed in that container?)" if status in (126, 127) else "")
        raise ProbeError(f"{where}: {words[0]} exited with status {status}{hint}: {_tail(err or out)}")
    text = out.decode("utf-8", "replace").strip()
    if not text:  # sqlite3 -json prints nothing for no rows
        return []
    try:
        answer = json.loads(text)
    except ValueError as exc:
        raise ProbeError(f"{where}: the query's output is no JSON ({exc}): {_tail(out)!r}") from None
    return _rows_of(answer, None, where)


def _committed_at(value: Any, where: str) -> tuple[float, float]:
    """Unix seconds and the precision the value was given with (1 s for whole seconds)."""
    if isinstance(value, bool):
        raise ProbeError(f"{where}: committed_at {value!r} is no time")
    if isinstance(value, (int, float)):
        return float(value), 1.0 if float(value).is_integer() else 0.0
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            pass
        else:
            return number, 0.0 if "." in text else 1.0
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ProbeError(f"{where}: committed_at {value!r} is neither unix seconds nor an ISO 8601 time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        fraction = _FRACTION.search(text)
        return moment.timestamp(), 10.0 ** -len(fraction.group(1)) if fraction else 1.0
    raise ProbeError(f"{where}: committed_at {value!r} is neither unix seconds nor an ISO 8601 time")


def _params(value: Any, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ProbeError(f"{where}: params is a string that is no JSON object: {value[:80]!r}") from None
    if not isinstance(value, dict):
        raise ProbeError(f"{where}: params is a JSON {type(value).__name__}, not an object of the committed "
                         "parameters")
    return value


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else json.dumps(value)


def to_effect(row: Any, fields: Mapping[str, str | None], *, default_kind: str | None,
              where: str) -> dict[str, Any]:
    """One listed row as the ledger's effect columns (``committed_at`` may be None: not said). Every field
    ``fields`` names must be in the row."""
    if not isinstance(row, dict):
        raise ProbeError(f"{where}: a JSON {type(row).__name__}, not an object (each listed effect is one)")
    values: dict[str, Any] = {}
    for column, name in fields.items():
        if name is None:
            values[column] = None
            continue
        value = find(row, name)
        if value is None and not (name in row or "." in name):
            present = ", ".join(map(str, row)) or "none"
            raise ProbeError(f"{where}: no field {name!r} (ledger.fields.{column}); the row's fields: {present}")
        values[column] = value
    ref = values.get("effect_ref")
    if ref is None or ref == "":
        raise ProbeError(f"{where}: field {fields['effect_ref']!r} (ledger.fields.effect_ref) is empty")
    kind = values.get("kind") if fields.get("kind") else default_kind
    params = _params(values.get("params"), where)
    when = _committed_at(values["committed_at"], where) if values.get("committed_at") is not None else None
    return {"effect_ref": _text(ref), "kind": _text(kind) or "effect",
            "operation_key": _text(values.get("operation_key")),
            "client_reference": _text(values.get("client_reference")),
            "payload_fingerprint": fingerprint(params) if params is not None else None,
            "flow_id": _text(values.get("flow_id")), "committed_at": when[0] if when else None,
            "precision": when[1] if when else 0.0, "committed_params": params}


@dataclass
class SyncedEffect:
    """An effect the probe listed and wrote to the ledger: its row's seq, and when it was committed (as far
    as is known: [low, high])."""

    seq: int
    effect: dict[str, Any]
    low: float
    high: float


def spanning_writes(effect: SyncedEffect, destination: str,
                    journal: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The forwarded writes of ``destination`` (with the effect's key, when it has one) whose time, from the
    proxy's receipt to the flow's end, overlaps the effect's commit."""
    key = effect.effect["operation_key"]
    found = []
    for entry in journal:
        if entry.get("destination") != destination or not entry.get("forwarded") or not entry.get("flow_id"):
            continue
        if str(entry.get("method", "")).upper() in READ_METHODS:
            continue
        if key is not None and entry.get("idempotency_key") != key:
            continue
        start, end = entry.get("ts_request"), entry.get("ts_done")
        if not isinstance(start, (int, float)):
            continue
        end_at = float(end) if isinstance(end, (int, float)) else float("inf")
        if float(start) <= effect.high and effect.low <= end_at:
            found.append(entry)
    return found


def infer_flows(effects: Sequence[SyncedEffect], destination: str,
                journal: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """The flow of each effect that names none (by its ledger seq): the one write that spans its commit
    (``spanning_writes``). Where several do, the one carrying the effect's payload (the journal's body
    fingerprint) when exactly one does; then, writes another effect already has are set aside (a write commits
    one effect, one per delivery when the proxy delivered it twice) until one is left. None is inferred
    where more than one stays possible (two keyless writes of one payload in flight at once, neither taken)."""
    capacity: dict[str, int] = {}
    candidates: dict[int, list[str]] = {}
    for effect in effects:
        if effect.effect["flow_id"] is not None:
            continue
        spanning = spanning_writes(effect, destination, journal)
        printed = effect.effect.get("payload_fingerprint")
        same = [e for e in spanning if printed is not None and e.get("body_fingerprint") == printed]
        if len(spanning) > 1 and len(same) == 1:
            spanning = same
        for entry in spanning:
            capacity[str(entry["flow_id"])] = max(1, int(entry.get("forward_count") or 1))
        candidates[effect.seq] = list(dict.fromkeys(str(entry["flow_id"]) for entry in spanning))
    taken: dict[str, int] = {}
    for effect in effects:
        if effect.effect["flow_id"] is not None:
            taken[str(effect.effect["flow_id"])] = taken.get(str(effect.effect["flow_id"]), 0) + 1
    found: dict[int, str] = {}
    for seq, flows in candidates.items():
        if len(flows) == 1:
            found[seq] = flows[0]
            taken[flows[0]] = taken.get(flows[0], 0) + 1
    progress = True
    while progress:
        progress = False
        for seq, flows in candidates.items():
            if seq in found:
                continue
            free = [f for f in flows if taken.get(f, 0) < capacity.get(f, 1)]
            if len(free) == 1:
                found[seq] = free[0]
                taken[free[0]] = taken.get(free[0], 0) + 1
                progress = True
    return found


def forwarded_reads(destination: str, journal: Iterable[Mapping[str, Any]],
                    lookup: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """The ``requests`` rows of the reads the proxy forwarded to ``destination`` and it answered: a read commits
    nothing, so its row says no effect, as a fake's does (rule H028 holds an attempt's claimed effects against
    it). ``lookup``: the contract's lookup (path, query parameter), whose value is the row's client reference.
    Writes get no row: what a team's service did with one is not seen from outside it."""
    rows = []
    for entry in journal:
        method = str(entry.get("method", "")).upper()
        if entry.get("destination") != destination or method not in READ_METHODS or not entry.get("forwarded") \
                or entry.get("upstream_status") is None:
            continue
        reference = None
        if lookup is not None and entry.get("path") == lookup[0] and entry.get("query"):
            reference = dict(parse_qsl(str(entry["query"]))).get(lookup[1])
        rows.append({"destination": destination, "method": method, "path": entry.get("path"),
                     "query": entry.get("query") or None, "idempotency_key": entry.get("idempotency_key"),
                     "client_reference": reference, "flow_id": entry.get("flow_id"),
                     "traceparent": entry.get("traceparent"), "status": entry.get("upstream_status"),
                     "received_at": entry.get("ts_request") or 0.0})
    return rows


@dataclass
class LedgerSync:
    """Keeps a ledger's effect rows of one container destination equal to what its probe lists.

    ``lister`` returns the probe's rows (``list_http`` or ``list_sql`` bound to the service). Rows are matched
    by effect ref (the n-th listing of one ref is the n-th effect of it): a row listed once is written once,
    and a row the service stops listing stays (what was committed was committed)."""

    destination: str
    ledger_path: Path
    lister: Callable[[], list[Any]]
    fields: Mapping[str, str | None]
    default_kind: str | None
    interval: float = 0.2
    lookup: tuple[str, str] | None = None  # the contract's lookup (path, query parameter), for the reads' rows
    key: bytes | None = None  # signs the rows written (fake_destinations.ledger, PROBE_WRITER)
    synced: list[SyncedEffect] = field(default_factory=list)
    errors: int = 0
    last_error: str | None = None
    listings: int = 0
    reads: int = 0

    def __post_init__(self) -> None:
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sync(self) -> int:
        """List once and write the effects not written yet; returns how many were new. ``ProbeError`` when the
        listing fails (nothing is written then)."""
        with self._lock:
            rows = self.lister()
            now = time.time()
            effects = [to_effect(row, self.fields, default_kind=self.default_kind,
                                 where=f"destination {self.destination}: ledger probe row {i + 1}")
                       for i, row in enumerate(rows)]
            self.listings += 1
            counts: dict[str, int] = {}
            new = []
            for effect in effects:
                ref = effect["effect_ref"]
                counts[ref] = counts.get(ref, 0) + 1
                if counts[ref] > self._seen.get(ref, 0):
                    new.append(effect)
            if not new:
                return 0
            writer = EffectWriter(self.ledger_path, self.key)
            try:
                for effect in sorted(new, key=lambda e: e["committed_at"] if e["committed_at"] is not None else now):
                    committed_at = effect["committed_at"]
                    row = {**effect, "destination": self.destination,
                           "committed_at": committed_at if committed_at is not None else now}
                    seq = writer.add(row)
                    low, high = ((committed_at, committed_at + effect["precision"]) if committed_at is not None
                                 else (float("-inf"), now))
                    self.synced.append(SyncedEffect(seq, effect, low, high))
                    self._seen[effect["effect_ref"]] = self._seen.get(effect["effect_ref"], 0) + 1
            finally:
                writer.close()
            return len(new)

    # -- while the agent runs ------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._poll, name=f"ledger-probe-{self.destination}", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sync()
            except ProbeError as exc:  # a service restarting does not answer for a while: the final listing counts
                self.errors += 1
                self.last_error = str(exc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    # -- after the agent ended -----------------------------------------------------------------

    def final(self, journal: Sequence[Mapping[str, Any]], *, attempts: int = 3, pause: float = 0.5) -> str | None:
        """The last listing, and the flow ids inferred from the journal; returns why it failed (None: it did not).
        A listing is tried ``attempts`` times (a service restarted by the scenario may still be starting)."""
        self.stop()
        problem = None
        for attempt in range(attempts):
            try:
                self.sync()
                problem = None
                break
            except ProbeError as exc:
                problem = str(exc)
                if attempt + 1 < attempts:
                    time.sleep(pause)
        if problem is not None:
            return f"the ledger probe's last listing failed: {problem}"
        writer = EffectWriter(self.ledger_path, self.key)
        try:
            inferred = infer_flows(self.synced, self.destination, journal)
            for synced in self.synced:
                if synced.seq in inferred:
                    synced.effect["flow_id"] = inferred[synced.seq]
                    writer.set_flow(synced.seq, inferred[synced.seq])
            for read in forwarded_reads(self.destination, journal, self.lookup):
                writer.add_read(read)
                self.reads += 1
        finally:
            writer.close()
        return None

    def report(self) -> dict[str, Any]:
        """What the probe did, for context.json."""
        return {"listings": self.listings, "effects": len(self.synced), "reads": self.reads,
                "errors_while_running": self.errors,
                "last_error": self.last_error,
                "flow_ids": {s.effect["effect_ref"]: s.effect["flow_id"] for s in self.synced}}
