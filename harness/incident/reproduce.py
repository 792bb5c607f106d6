"""From an incident to the scenario that puts an agent in the same position.

Two roads, by what the incident holds:

- **an evidence folder of the harness** knows the destinations as declared, the intents, the faults and
  crashes the run was set to apply, and the journal says on which request each fault fired: the scenario
  keeps the destinations and intents, and each rule that fired becomes a rule on the same requests
  (``nth`` positions among the requests to that route), with the declared rule's parameters;
- **anything else** (a HAR, a flow dump, an audit log alone) is inferred: each destination seen becomes a
  generic destination (``api:``) with the routes that were called, the contract the requests and answers
  show, and answers shaped like the ones seen; each operation becomes an intent; each request the client got
  no good answer to becomes a fault on the same request. What cannot be inferred is a commented choice at
  the top of the file, never a silent default.

Secrets never reach the scenario: params that look like credentials become ``HARNESS_SECRET_*`` references.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

import yaml

from fake_destinations.api_spec import HTTP_METHODS, PATH_TEMPLATE
from fake_destinations.templates import find
from harness.contract import CLIENT_REFERENCE_FIELD, NAME_PATTERN, SECRET_ENV_PREFIX, ContextKey, env_suffix
from harness.incident.model import Exchange, Incident, IncidentError

if TYPE_CHECKING:
    from fake_destinations.spec import DestinationSpec
    from harness.project import Project
from harness.openapi_schemas import (
    CLIENT_REFERENCE_NAMES,
    IDEMPOTENCY_HEADER_NAME,
    id_candidates,
    noun_of,
    value_schema,
)

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
TOKEN_FIELDS = ("client_token", "ClientToken", "clientToken", "idempotency_key")
REPLAY_HEADERS = ("idempotent-replayed",)
SECRET_NAMES = re.compile(r"(pass(word)?|secret|token|api[_-]?key|apikey|auth|credential|cvc|cvv|card_?number|"
                          r"private[_-]?key|session)", re.I)
SECRET_VALUES = re.compile(r"^(sk|rk|pk)_(live|test)_|^(bearer|basic) |^hsk_|^gh[pousr]_|^xox[abp]-|^AKIA[0-9A-Z]{12}|"
                           r"^eyJ[A-Za-z0-9_-]{10,}\.", re.I)
HOLD_PAST_TIMEOUT_MS = 3000  # a held answer's hold when the incident does not say the client's timeout


@dataclass
class Draft:
    """The scenario being written, and the choices made for it (the file's header comments)."""

    data: dict[str, Any]
    choices: list[str] = field(default_factory=list)
    cites: list[str] = field(default_factory=list)
    named: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)  # operation -> (intent id, kind)

    def choose(self, where: str, said: str) -> None:
        self.choices.append(f"{where}: {said}")


def reproduce(incident: Incident, *, operation: str | None = None, name: str | None = None,
              project: Project | None = None, base_dir: Path | None = None) -> str:
    """The scenario's YAML text (comments first: what it cites, the choices made). With a ``project`` (its
    configuration, ``harness.project``), the traffic to one of its destinations lands on that destination as the
    project declares it (``base_dir``: the scenario's folder, which its paths are written relative to)."""
    if operation is not None and operation not in incident.operations:
        known = ", ".join(sorted(incident.operations)[:20]) or "none (the incident names no operation)"
        raise IncidentError(f"{incident.source}: no operation {operation!r} in the incident; its operations: {known}")
    try:
        draft = _from_evidence(incident, operation) if incident.context is not None else \
            _inferred(incident, operation, project, base_dir or Path.cwd())
    except IncidentError as exc:  # every refusal names the incident
        raise IncidentError(str(exc) if str(exc).startswith(incident.source) else f"{incident.source}: {exc}") from None
    scenario_name = name or _name_of(incident, operation)
    draft.data = {"name": scenario_name, **draft.data}
    draft.data["description"] = _description(incident, operation, draft)
    order = ["name", "description", "agent_log", "destinations", "faults", "intents", "restart_agent",
             "restart_destinations", "proxy", "agent_timeout_seconds", "expect"]
    data = {k: draft.data[k] for k in order if draft.data.get(k) not in (None, [], {})}
    head = [f"# Reproduces {incident.source} ({incident.format}), written by `python -m harness reproduce`."]
    if draft.choices:
        head.append("# Choices the incident could not settle (check each; the scenario runs as written):")
        head += [f"#   - {choice}" for choice in draft.choices]
    head += [f"# note: {note}" for note in incident.notes]
    from harness.scenario import scenario_dumper

    return "\n".join(_printable(line).replace("\n", " ") for line in head) + "\n" + yaml.dump(
        _printable(data), Dumper=scenario_dumper(), sort_keys=False, allow_unicode=True, width=110)


_NOT_PRINTABLE = re.compile("[^\t\n\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _printable(value: Any) -> Any:
    """What a YAML file can hold: a character YAML refuses (NUL, other controls, a lone surrogate) in an
    incident's text becomes U+FFFD, so that the scenario written always loads."""
    if isinstance(value, str):
        return _NOT_PRINTABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_printable(v) for v in value]
    return value


# -- an evidence folder of the harness --------------------------------------------------------------------

def _from_evidence(incident: Incident, operation: str | None) -> Draft:
    context = incident.context or {}  # context.json's keys (ContextKey); draft.data's are the scenario's YAML keys
    intents = [dict(i) for i in context.get(ContextKey.INTENTS) or [] if isinstance(i, dict)]
    exchanges = incident.exchanges
    if operation is not None:
        wanted = _intent_ids_of(incident, operation)
        intents = [i for i in intents if i.get("intent_id") in wanted]
        lines = _flow_lines_of(incident, operation)
        exchanges = [x for x in exchanges if x.line in lines]
    declared = {r.get("id"): r for r in context.get(ContextKey.FAULTS) or [] if isinstance(r, dict)}
    draft = Draft({})
    agent_log = context.get(ContextKey.AGENT_LOG)
    draft.data["agent_log"] = agent_log if agent_log != "events" else None
    draft.data["destinations"] = {n: _spec_as_declared(e.get("spec") or {})
                                  for n, e in context[ContextKey.DESTINATIONS].items() if isinstance(e, dict)}
    faults: list[dict[str, Any]] = []
    fired: dict[str, list[int]] = {}
    routes: dict[str, tuple[str, str, str]] = {}
    counts: dict[tuple[str, str, str], int] = {}
    for x in sorted(exchanges, key=lambda x: (x.started or 0.0, x.line or 0)):
        where = (x.destination, x.method.upper(), x.path)
        counts[where] = counts.get(where, 0) + 1
        if x.rule_id and x.rule_id in declared and declared[x.rule_id].get("action") != "refuse_connection":
            fired.setdefault(x.rule_id, []).append(counts[where])
            routes.setdefault(x.rule_id, where)
    for rule_id, rule in declared.items():
        if rule.get("action") == "refuse_connection":  # the listener is closed for the run: as declared
            faults.append(rule)
        elif rule_id in fired:
            destination, method, path = routes[rule_id]
            positions = fired[rule_id]
            match = {"destination": destination, "method": method, "path": path,
                     "nth": positions[0] if len(positions) == 1 else positions}
            faults.append({"id": rule_id, "match": match,
                           **{k: v for k, v in rule.items() if k not in ("id", "match")}})
        else:
            draft.cites.append(f"rule {rule_id} ({rule.get('action')}) never fired in the incident: left out")
    draft.data["faults"] = faults
    draft.data["intents"] = [_scrubbed_intent(i, draft) for i in intents]
    for key, said in (("restart_agent", ContextKey.RESTART_AGENT), ("restart_destinations",
                                                                     ContextKey.RESTART_DESTINATIONS)):
        if context.get(said) and operation is None:
            draft.data[key] = context[said]
    proxy = context.get(ContextKey.PROXY) or {}
    if proxy.get("mode") not in (None, "reverse") or proxy.get("seed"):
        draft.data["proxy"] = proxy
    timeout = context.get(ContextKey.AGENT_TIMEOUT)
    if isinstance(timeout, (int, float)) and timeout != 30:
        draft.data["agent_timeout_seconds"] = timeout
    expect = context.get(ContextKey.EXPECT) or {}
    ids = {i.get("intent_id") for i in intents}
    states = {k: v[0] if isinstance(v, list) and len(v) == 1 else v
              for k, v in (expect.get("states") or {}).items() if k in ids}
    effects = dict(expect.get("effects") or {})
    if operation is not None:
        effects = {}
        for intent in intents:
            effects[intent["destination"]] = effects.get(intent["destination"], 0) + 1
        draft.choose("expect.effects", "one effect per intent kept (the whole run's counts cover other intents)")
    draft.data["expect"] = {k: v for k, v in (("states", states), ("effects", effects)) if v}
    return draft


def _spec_as_declared(spec: dict[str, Any]) -> dict[str, Any]:
    from fake_destinations.spec import DestinationSpec

    model = DestinationSpec.model_validate(spec)
    out = model.model_dump(mode="json", exclude_defaults=True, exclude={"api"} if model.api is not None else set())
    if model.api is not None:
        out.pop("service", None)
        out.pop("idempotency", None)
        out.pop("lookup", None)
        out["api"] = model.api.model_dump(mode="json", exclude_defaults=True)
    return out


def _intent_ids_of(incident: Incident, operation: str) -> set[str]:
    found = set()
    for record in incident.operations.get(operation, []):
        if record.get("event") == "operation" and isinstance(record.get("intent_id"), str):
            found.add(record["intent_id"])
    if not found:
        raise IncidentError(f"{incident.source}: operation {operation!r} names no intent (no operation event with an "
                            "intent_id): reproduce the whole run instead")
    return found


def _flow_lines_of(incident: Incident, operation: str) -> set[int]:
    from pathlib import Path

    from harness.checker import correlation_of
    from harness.evidence import load_evidence

    flows = correlation_of(load_evidence(Path(incident.source))).flows_of(operation)
    return {e["_line"] for e in flows if isinstance(e.get("_line"), int)}


# -- anything else: inferred ------------------------------------------------------------------------------

def _inferred(incident: Incident, operation: str | None, project: Project | None, base_dir: Path) -> Draft:
    draft = Draft({})
    for op_id, records in incident.operations.items():  # what an audit log says each operation was
        first = next((r for r in records if r.get("event") == "operation"), {})
        intent: dict[str, Any] = first["intent"] if isinstance(first.get("intent"), dict) else {}
        intent_id = first.get("intent_id") or intent.get("intent_id")
        draft.named[op_id] = (intent_id if isinstance(intent_id, str) else None,
                              intent.get("kind") if isinstance(intent.get("kind"), str) else None)
    exchanges = incident.exchanges or _exchanges_from_log(incident, draft)
    if operation is not None:
        exchanges = [x for x in exchanges if x.operation_id in (None, operation)]
    if not exchanges:
        raise IncidentError(f"{incident.source}: the incident holds no request to reproduce")
    names = _destination_names(exchanges)
    destinations: dict[str, Any] = {}
    intents: list[dict[str, Any]] = []
    faults: list[dict[str, Any]] = []
    for origin, name in names.items():
        mine = [x for x in exchanges if x.destination == origin]
        configured = _configured_destination(origin, mine, project, draft) if project is not None else None
        if project is not None and configured is not None and configured[0] not in destinations:
            dest, spec, routes_of = configured
            destinations[dest] = _as_declared(project, dest, base_dir)
            intents += _configured_intents(dest, spec, mine, routes_of, project, draft)
            faults += _infer_faults(dest, mine, draft, _route_path(routes_of), len(faults))
            continue
        api, routes = _infer_api(name, mine, draft)
        destinations[name] = {"api": api}
        intents += _infer_intents(name, mine, routes, api, draft, operation)
        faults += _infer_faults(name, mine, draft, lambda x: path_template(x.path), len(faults))
    if not intents:
        raise IncidentError(f"{incident.source}: no write (POST, PUT, PATCH, DELETE) in the incident: nothing an "
                            "agent was asked to bring about")
    draft.data["destinations"] = destinations
    draft.data["faults"] = faults
    draft.data["intents"] = intents
    effects: dict[str, int] = {}
    for intent in intents:
        effects[intent["destination"]] = effects.get(intent["destination"], 0) + 1
    draft.data["expect"] = {"effects": effects}
    draft.choose("expect", "one effect per intent, and no final state (the incident does not say which state a "
                           "correct agent ends in; add expect.states if it does)")
    return draft


def _exchanges_from_log(incident: Incident, draft: Draft) -> list[Exchange]:
    """An audit log's attempts as exchanges (its own word: what each attempt sent and saw)."""
    out = []
    for op_id, records in incident.operations.items():
        intent = next((r.get("intent") for r in records if r.get("event") == "operation"
                       and isinstance(r.get("intent"), dict)), None) or {}
        # the log's own reconciliation: effects it found beyond those its answered attempts made were made by an
        # attempt whose answer it did not get, or got as a 5xx (the destination acted, then failed)
        found = {ref for r in records if r.get("event") in ("observation", "resolution")
                 for ref in r.get("effect_refs") or [] if isinstance(ref, str)}
        answered = {ref for r in records if r.get("event") == "attempt" and isinstance(r.get("http_status"), int)
                    and 200 <= r["http_status"] < 300 for ref in r.get("effect_refs") or [] if isinstance(ref, str)}
        surplus = len(found - answered)
        for record in records:
            if record.get("event") != "attempt":
                continue
            destination = str(record.get("destination") or intent.get("destination") or "service")
            kind: str = intent["kind"] if isinstance(intent.get("kind"), str) else "operation"
            path = record.get("path") if isinstance(record.get("path"), str) else None
            if path is None or not PATH_TEMPLATE.match(path):
                said = "does not say the path" if path is None else f"gives a path that is no path template ({path!r})"
                path = "/" + (re.sub(r"[^A-Za-z0-9_.-]", "_", kind) or "operation")
                draft.choose(f"destinations.{destination}", f"the log {said} of {kind}: {path}")
            headers = {}
            if record.get("idempotency_key"):
                headers["idempotency-key"] = str(record["idempotency_key"])
            state = record.get("dispatch_state")
            status = record.get("http_status") if state == "response_received" else None
            if state == "response_received" and status is None:
                status = 200
            body = json.dumps(intent.get("params") or {}).encode()
            ts = record.get("ts")
            upstream = None
            if surplus and isinstance(status, int) and status >= 500:
                surplus -= 1
                upstream = 201
                draft.choose(f"faults ({record.get('attempt_id')})", f"answered {status}, and the log's reconciliation "
                             "found an effect no answered attempt made: the destination acted before failing "
                             "(replace_status)")
            method = str(record.get("method") or "POST").upper()
            if method not in HTTP_METHODS:
                draft.choose(f"destinations.{destination}", f"the log's method {record.get('method')!r} is none of "
                             f"{', '.join(HTTP_METHODS)}: POST")
                method = "POST"
            out.append(Exchange(destination=destination, method=method,
                                path=path, headers=headers, body=body,
                                started=ts if isinstance(ts, (int, float)) else None, status=status,
                                response_headers={"retry-after": str(record["retry_after_seconds"])}
                                if record.get("retry_after_seconds") is not None else {},
                                error=None if status is not None else
                                str(record.get("result") or record.get("error") or state), operation_id=op_id,
                                line=record.get("_line"), upstream_status=upstream,
                                fault="refuse_connection" if state == "not_sent" else None))
    out.sort(key=lambda x: (x.started or 0.0, x.line or 0))
    return out


def _destination_names(exchanges: Iterable[Exchange]) -> dict[str, str]:
    names: dict[str, str] = {}
    for x in exchanges:
        if x.destination in names:
            continue
        host = x.destination.split(":")[0]
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", x.destination if re.fullmatch(NAME_PATTERN, x.destination)
                      else host)
        base = re.sub(r"^[^A-Za-z0-9]+", "", base)[:90]
        if not base or base in ("127.0.0.1", "localhost") or re.fullmatch(r"[0-9.]+", base):
            base = "service"
        name, n = base, 1
        # two names the agent could not tell apart (one variable name) are one too many
        while name in names.values() or env_suffix(name) in {env_suffix(v) for v in names.values()}:
            n += 1
            name = f"{base}{n}"
        names[x.destination] = name
    return names


_ID_SEGMENT = re.compile(r"^(?=.*\d)[A-Za-z0-9_.-]{4,}$|^[0-9a-f]{8}-[0-9a-f-]{27}$|^\d+$")


def path_template(path: str) -> str:
    """A path with its id-like segments as placeholders: /v1/charges/ch_000123 -> /v1/charges/{id}."""
    parts = path.split("/")
    out = [p if not _ID_SEGMENT.match(p) or i == 1 else "{id}" for i, p in enumerate(parts)]
    template = "/".join(out)
    numbers = itertools.count(1)
    return re.sub(r"\{id\}", lambda _: "{id" + (str(n) if (n := next(numbers)) > 1 else "") + "}", template)


def _params(x: Exchange) -> tuple[dict[str, Any], str]:
    """A request's params and the format they came in: json, form or aws_query."""
    content_type = x.headers.get("content-type", "")
    text = x.body.decode("utf-8", errors="replace") if x.body else ""
    if text and ("form" in content_type or (not content_type.startswith("application/json") and "=" in text
                                            and not text.lstrip().startswith("{"))):
        fields = dict(parse_qsl(text, keep_blank_values=True))
        return fields, "aws_query" if "Action" in fields else "form"
    if text:
        try:
            body = json.loads(text)
        except ValueError:
            return {}, "json"
        return (body if isinstance(body, dict) else {}), "json"
    return dict(parse_qsl(x.query)), "json"


def _answer(x: Exchange) -> Any:
    if x.status is None or not x.response_body:
        return None
    text = x.response_body.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text if text.lstrip().startswith("<") else None


def _key_of(x: Exchange, params: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(key, header, field) the request carries."""
    for header, value in sorted(x.headers.items()):  # names lower-case (Exchange)
        if IDEMPOTENCY_HEADER_NAME.match(header) and value:
            return value, header, None
    for name in TOKEN_FIELDS:
        if isinstance(params.get(name), str):
            return params[name], None, name
    return None, None, None


def _route_name(method: str, template: str, taken: set[str], *, verb: str | None = None) -> str:
    """A route's name from its method and path, its noun singular as ``harness.openapi`` names a route of a document
    (``POST /api/v2/tickets`` -> ``create_ticket``); an AWS query action's (``/RunInstances``) as it is."""
    if "{" not in template and re.fullmatch(r"/[A-Z][A-Za-z0-9]*", template):
        noun = template[1:]
    else:
        noun = noun_of(template) or "root"
    verb = verb or {"POST": "create", "PUT": "put", "PATCH": "update", "DELETE": "delete", "GET": "get"}.get(method,
                                                                                                           method)
    name = re.sub(r"[^a-z0-9_]+", "_", f"{verb}_{noun}".lower())
    n = 1
    while name in taken:
        n += 1
        name = f"{verb}_{noun}_{n}".lower()
    taken.add(name)
    return name


def _infer_api(name: str, exchanges: list[Exchange], draft: Draft) -> tuple[dict[str, Any], dict[tuple[str, str], str]]:
    """The generic destination the exchanges show, and (method, path template) -> route name."""
    where = f"destinations.{name}.api"
    routes: dict[tuple[str, str], str] = {}
    api_routes: dict[str, Any] = {}
    taken: set[str] = set()
    formats: set[str] = set()
    key_headers: set[str] = set()
    token_fields: set[str] = set()
    replayed = any(h in x.response_headers for x in exchanges for h in REPLAY_HEADERS)
    statuses = {x.status for x in exchanges if x.status is not None}
    writes = [x for x in exchanges if x.method.upper() in WRITE_METHODS]
    for x in writes:
        params, fmt = _params(x)
        formats.add(fmt)
        _, header, token = _key_of(x, params)
        if header:
            key_headers.add(header)
        if token:
            token_fields.add(token)
        template = path_template(x.path)
        key = (x.method.upper(), template if fmt != "aws_query" else f"{template}?{params.get('Action')}")
        kind = draft.named.get(x.operation_id or "", (None, None))[1]
        if key not in routes:
            if kind and re.fullmatch(NAME_PATTERN, kind) and kind not in taken:
                routes[key] = kind
                taken.add(kind)
            else:
                routes[key] = _route_name(x.method.upper(), template if fmt != "aws_query" else
                                          "/" + str(params.get("Action")), taken)
    request_format = "aws_query" if "aws_query" in formats else "form" if "form" in formats else "json"
    api: dict[str, Any] = {"request_format": request_format}
    if len(formats) > 1:
        draft.choose(f"{where}.request_format", f"requests came in several formats; {request_format} assumed")
    # the contract the requests and answers show
    if key_headers and _key_ignored(writes):
        header = _header_name(sorted(key_headers)[0])
        api["idempotency"] = {"style": "none"}
        draft.choose(f"{where}.idempotency", f"requests carried {header}, and one key got two different resources: "
                     "the destination ignores it (style none)")
    elif key_headers:
        header = sorted(key_headers)[0]
        style = "stripe"
        if 400 in statuses and any(not _key_of(x, _params(x)[0])[0] and x.status == 400 for x in writes):
            style = "ietf"
        api["idempotency"] = {"style": style, "header": _header_name(header)}
        if not replayed:
            draft.choose(f"{where}.idempotency", f"requests carried {_header_name(header)} but no answer said it was "
                         "a replay: deduplication (style stripe: the first answer replayed) assumed; set style none if "
                         "the destination ignores the key")
    elif token_fields:
        api["idempotency"] = {"style": "client_token", "field": sorted(token_fields)[0]}
        draft.choose(f"{where}.idempotency", f"requests carried a {sorted(token_fields)[0]} field: an EC2-like client "
                     "token assumed (same token and params return the existing resource)")
    else:
        draft.choose(f"{where}.idempotency", "no request carried a key: style none (every write commits) assumed; "
                     "declare the destination's style if it deduplicates otherwise")
    # client reference and lookups: a GET on a write's collection whose query value a write's param held
    reference_field, lookups = _infer_lookups(exchanges, writes)
    if reference_field is not None:
        query_param, _, _, seen = next(iter(lookups.values()))
        draft.choose(f"{where}.client_reference_field", f"{reference_field}: the value a write sent in it was later "
                     f"the query param {query_param} of GET {seen} (a lookup), so it is the client's own reference of "
                     "the resource, kept by the destination and searched by the lookup")
    elif any(CLIENT_REFERENCE_FIELD in _params(x)[0] for x in writes):
        reference_field = CLIENT_REFERENCE_FIELD  # the harness's own name for it: an agent's tag, not the intent's
    else:
        reference_field = _reference_by_name(writes, token_fields)
        if reference_field is not None:
            draft.choose(f"{where}.client_reference_field", f"{reference_field}: named like a client reference (as "
                         "harness.openapi reads a document: " + ", ".join(sorted(CLIENT_REFERENCE_NAMES)) + "), though "
                         "no lookup by it was seen; delete the key if it is a plain param")
    if reference_field:
        api["client_reference_field"] = reference_field
    for (method, path_key), route_name in routes.items():
        template = path_key.split("?")[0]
        samples = [x for x in writes if (x.method.upper(), path_template(x.path)) == (method, template)
                   and (request_format != "aws_query" or _params(x)[0].get("Action") == path_key.split("?")[-1])]
        route: dict[str, Any] = {"method": method, "path": template}
        if request_format == "aws_query":
            route["match"] = {"Action": path_key.split("?")[-1]}
        route["commits"] = f"{route_name.split('_', 1)[-1]}_{'created' if method == 'POST' else 'changed'}"
        answered = [x for x in samples if x.status is not None and 200 <= x.status < 300]
        listed = [item for lookup_path, (_, result_field, target, _) in lookups.items() if target == template
                  for x in exchanges if x.method.upper() == "GET" and x.path == lookup_path
                  and isinstance(answer := _answer(x), dict) and isinstance(answer.get(result_field), list)
                  for item in answer[result_field] if isinstance(item, dict)]
        answer_of = _infer_answer(answered, listed, noun_of(template), f"{where}.routes.{route_name}", draft)
        route["id_format"] = answer_of.id_format
        if answer_of.id_type != "string":
            route["id_type"] = answer_of.id_type
        route["response"] = answer_of.response
        route["effect_ref"] = answer_of.ref
        if answer_of.resource:
            route["resource"] = answer_of.resource
        api_routes[route_name] = route
    for lookup_path, (query_param, result_field, target_path, _) in lookups.items():
        target = next((n for (m, p), n in routes.items() if p.split("?")[0] == target_path and m == "POST"), None)
        if target is None:
            continue
        lookup_name = _route_name("GET", lookup_path, taken, verb="find")
        api_routes[lookup_name] = {"method": "GET", "path": lookup_path, "lookup": target,
                                   "query_param": query_param, "result_field": result_field}
        for x in exchanges:
            if x.method.upper() == "GET" and x.path == lookup_path:
                routes[("GET", lookup_path)] = lookup_name
    for x in exchanges:  # reads of a resource a route created
        template = path_template(x.path)
        if x.method.upper() != "GET" or ("GET", template) in routes or template == x.path:
            continue
        parent = template.rsplit("/", 1)[0]
        target = next((n for (m, p), n in routes.items() if p.split("?")[0] == parent and m == "POST"), None)
        if target is not None and template.endswith("{id}"):
            read_name = _route_name("GET", parent, taken)
            api_routes[read_name] = {"method": "GET", "path": template, "reads": target}
            resource = api_routes[target].get("resource")
            answer = _answer(x)
            if resource and isinstance(answer, dict) and isinstance(find(answer, resource), dict):
                api_routes[read_name]["wrap"] = resource  # the read answers the resource where the write did
            routes[("GET", template)] = read_name
    if not api_routes:
        raise IncidentError(f"the incident shows no write to {name}: no route commits an effect")
    api["routes"] = api_routes
    return api, routes


def _key_ignored(writes: list[Exchange]) -> bool:
    """Two successful writes under one key answered with different ids: the destination does not deduplicate."""
    ids: dict[str, set[str]] = {}
    for x in writes:
        key = _key_of(x, _params(x)[0])[0]
        answer = _answer(x)
        if key and x.status is not None and 200 <= x.status < 300 and isinstance(answer, dict) and \
                isinstance(answer.get("id"), str):
            ids.setdefault(key, set()).add(answer["id"])
    return any(len(found) > 1 for found in ids.values())


def _header_name(lower: str) -> str:
    return "-".join(part.capitalize() for part in lower.split("-"))


def _infer_lookups(exchanges: list[Exchange], writes: list[Exchange]) -> tuple[
        str | None, dict[str, tuple[str, str, str, str]]]:
    """The write param agents tag resources with (the client reference: a value a write sent, later a lookup's query
    value), and lookup path -> (query param, result field, collection, the lookup as seen)."""
    values: dict[str, str] = {}
    for x in writes:
        for k, v in _params(x)[0].items():
            if isinstance(v, str) and len(v) >= 3:
                values.setdefault(v, k)
    lookups: dict[str, tuple[str, str, str, str]] = {}
    field_name: str | None = None
    collections = {path_template(x.path) for x in writes}
    for x in exchanges:
        if x.method.upper() != "GET" or not x.query:
            continue
        for k, v in parse_qsl(x.query):
            if v in values:
                answer = _answer(x)
                result = next((f for f, val in answer.items() if isinstance(val, list)), None) \
                    if isinstance(answer, dict) else None
                target = x.path if x.path in collections else next(
                    (c for c in collections if x.path.startswith(c)), None)
                if target is None:
                    continue
                field_name = field_name or values[v]
                lookups.setdefault(x.path, (k, result or "items", target, f"{x.path}?{k}={v}"))
    return field_name, lookups


@dataclass(frozen=True)
class InferredAnswer:
    """A commit route's answer as the incident shows it: the template, where it names the effect, the ids' shape."""

    response: dict[str, Any]
    ref: str
    id_format: str
    id_type: str = "string"
    resource: str | None = None  # the object holding the ref, when nested (what reads and lookups answer)


def _infer_answer(answered: list[Exchange], listed: list[dict[str, Any]], noun: str, where: str,
                  draft: Draft) -> InferredAnswer:
    """A commit route's declared answer from its 2xx answers seen: the effect ref is the id-like field (ranked as
    ``harness.openapi_schemas.id_candidates`` ranks a document's, nested too) that is no echo of the request and,
    where several answers (or a lookup's listed resources) show it, differs across them; the other fields echo the
    request's params where they show them (``{params.NAME}``), the rest as seen."""
    x = next((a for a in answered if isinstance(_answer(a), dict)), answered[0] if answered else None)
    if x is None:
        draft.choose(where, "no successful answer was seen: the answer is {id: ...} (status 200); declare the "
                            "body the client expects")
        return InferredAnswer({"status": 200, "body": {"id": "{id}"}}, "body.id", "res_{n:04d}")
    params, _ = _params(x)
    answer = _answer(x)
    status = x.status or 200
    if isinstance(answer, dict):
        ref_path = _effect_ref_path(answer, [_answer(a) for a in answered], listed, params, noun, where, draft)
        body = _answer_template(answer, ref_path, params, ())
        if ref_path is None:
            body["id"] = "{id}"
            draft.choose(where, "the answer names no id field: an `id` field added for the effect ref")
            ref_path = ("id",)
        seen = find(answer, ".".join(ref_path))
        resource = ".".join(ref_path[:-1]) or None
        if isinstance(seen, int) and not isinstance(seen, bool):
            return InferredAnswer({"status": status, "body": body}, "body." + ".".join(ref_path), "{n}", "integer",
                                  resource)
        return InferredAnswer({"status": status, "body": body}, "body." + ".".join(ref_path),
                              _id_format(str(seen or "")), "string", resource)
    if not x.response_body:
        draft.choose(where, "the incident does not hold the answer's body: {id: ...} declared (write the body the "
                            "client parses, with {id} where the ref is)")
    else:
        draft.choose(where, "the answer was not JSON: a JSON answer {id: ...} declared instead (write the XML "
                            "template the client parses, with {id} where the ref is)")
    return InferredAnswer({"status": status, "body": {"id": "{id}"}}, "body.id", "res_{n:04d}")


def _effect_ref_path(answer: dict[str, Any], answers: list[Any], listed: list[dict[str, Any]], params: dict[str, Any],
                     noun: str, where: str, draft: Draft) -> tuple[str, ...] | None:
    """Where the answer names the new resource: the best id-like field whose value the request did not send and
    that differs across the answers and listed resources seen; None when it names none."""
    echoed = {str(v) for v in params.values() if isinstance(v, (str, int)) and not isinstance(v, bool)}
    candidates: list[str] = []
    echoes: list[str] = []
    for _, _, path, _ in id_candidates(value_schema(answer), noun):
        value = find(answer, path)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and value != "":
            (echoes if str(value) in echoed else candidates).append(path)
    if not candidates:
        return None

    def values(path: str) -> list[Any]:
        seen = [find(a, path) for a in answers if isinstance(a, dict)]
        inner = path.split(".", 1)[1] if "." in path else path  # a listed resource is the object holding the ref
        seen += [find(item, inner) for item in listed]
        return [v for v in seen if v is not None]

    distinct = [p for p in candidates if len(set(map(str, values(p)))) > 1]
    chosen = (distinct or candidates)[0]
    others = [p for p in candidates if p != chosen]
    why = ("it differs across the answers seen" if distinct else
           "the best ranked id-like field (one answer seen: nothing to compare)")
    draft.choose(f"{where}.effect_ref", f"body.{chosen}: {why}" + (f" (also id-like: {', '.join(others)})"
                                                                 if others else "")
                 + (f"; not {', '.join(echoes)}: the request's own value" if echoes else ""))
    return tuple(chosen.split("."))


def _answer_template(value: dict[str, Any], ref_path: tuple[str, ...] | None, params: dict[str, Any],
                     at: tuple[str, ...]) -> dict[str, Any]:
    """An answer seen, as the template of the answer the destination gives: the ref's field ``{id}``, a field echoing
    a request param ``{params.NAME}`` (so each request gets its own answer), a secret ``redacted``, the rest as seen
    (its braces escaped)."""
    body: dict[str, Any] = {}
    for k, v in value.items():
        here = (*at, str(k))
        if ref_path is not None and here == ref_path:
            body[k] = "{id}"
        elif _looks_secret(k, v):
            body[k] = "redacted"
        elif isinstance(v, dict):
            body[_escape_braces(k)] = _answer_template(v, ref_path, params, here)
        elif (param := _echoed_param(k, v, params)) is not None:
            body[_escape_braces(k)] = "{params." + param + "}"
        else:
            body[_escape_braces(k)] = _escape_braces(v)
    return body


def _echoed_param(name: Any, value: Any, params: dict[str, Any]) -> str | None:
    """The request param an answer's field shows: the same name and value, or a value too long to be chance."""
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        return None
    if name in params and params[name] == value and re.fullmatch(r"[A-Za-z0-9_.-]+", str(name)):
        return str(name)
    if isinstance(value, str) and len(value) >= 3:
        return next((p for p, pv in params.items() if pv == value and re.fullmatch(r"[A-Za-z0-9_.-]+", p)), None)
    return None


def _reference_by_name(writes: list[Exchange], token_fields: set[str]) -> str | None:
    """A write's string field named like a client reference (the names ``harness.openapi`` reads in a document)."""
    for x in writes:
        for k, v in _params(x)[0].items():
            if isinstance(v, str) and k.lower() in CLIENT_REFERENCE_NAMES and k not in token_fields:
                return str(k)
    return None


def _escape_braces(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("{", "{{").replace("}", "}}")
    if isinstance(value, dict):
        return {_escape_braces(k): _escape_braces(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escape_braces(v) for v in value]
    return value


def _id_format(seen: str) -> str:
    m = re.fullmatch(r"([A-Za-z][A-Za-z_-]*?)(\d+)", seen)
    if m:
        return f"{m.group(1).replace('{', '').replace('}', '')}{{n:0{len(m.group(2))}d}}"
    m = re.fullmatch(r"([A-Za-z]+[_-])[0-9a-f]+", seen)
    if m:
        return f"{m.group(1)}{{n:0{len(seen) - len(m.group(1))}x}}"
    return "res_{n:04d}"


def _infer_intents(name: str, exchanges: list[Exchange], routes: dict[tuple[str, str], str], api: dict[str, Any],
                   draft: Draft, operation: str | None) -> list[dict[str, Any]]:
    """One intent per operation: the writes of one route with one payload (its key or token left out) are
    one operation's attempts, whatever key each carried (a changed key is the incident, not a new intent)."""
    reference_field = api.get("client_reference_field")
    token = (api.get("idempotency") or {}).get("field")
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for x in exchanges:
        if x.method.upper() not in WRITE_METHODS:
            continue
        params, fmt = _params(x)
        route = routes.get((x.method.upper(), path_template(x.path) if fmt != "aws_query"
                            else f"{path_template(x.path)}?{params.get('Action')}"))
        if route is None:
            continue
        payload = {k: v for k, v in params.items() if k not in (token, reference_field, "Action", "Version")}
        signature = (route, json.dumps(payload, sort_keys=True, default=str))
        if signature in seen:
            continue
        logged = draft.named.get(x.operation_id or "", (None, None))[0] or x.operation_id
        intent_id = logged if logged and re.fullmatch(NAME_PATTERN, logged) else \
            f"{route.replace('_', '-')}-{len(seen) + 1}"
        if reference_field not in (None, CLIENT_REFERENCE_FIELD) and reference_field in params:
            # a team's own reference (external_id) is part of what the agent was asked: kept, so that the agent
            # tags and looks up the resource as it did (the harness's client_reference is the agent's own tag)
            payload = {**payload, reference_field: params[reference_field]}
        seen[signature] = {"intent_id": intent_id, "kind": route, "destination": name,
                           "params": _scrub(payload, name, draft, f"intents[{len(seen)}].params")}
    return _intents_said(name, seen, draft)


def _intents_said(name: str, seen: dict[tuple[str, str], dict[str, Any]], draft: Draft) -> list[dict[str, Any]]:
    """The intents found, one per route and payload; several are a choice the header says."""
    if len(seen) > 1:
        draft.choose(f"intents ({name})", "writes with the same route and payload are one intent's attempts; writes "
                     "with another payload are another intent (merge them if one intent changed its payload)")
    return list(seen.values())


def _infer_faults(name: str, exchanges: list[Exchange], draft: Draft, route_path: Callable[[Exchange], str | None],
                  taken: int = 0) -> list[dict[str, Any]]:
    """Each request the client got no good answer to, as a fault on the same request (its position among the
    requests to its route, ``route_path`` giving the route's path template; None: on no route, left out)."""
    faults: list[dict[str, Any]] = []
    counts: dict[tuple[str, str], int] = {}
    for x in exchanges:
        template = route_path(x)
        if template is None:
            continue
        where = (x.method.upper(), template)
        counts[where] = counts.get(where, 0) + 1
        nth = counts[where]
        match = {"destination": name, "method": x.method.upper(), "path": template, "nth": nth}
        rule_id = f"incident_{x.method.lower()}_{taken + len(faults) + 1}"
        said = f"request {nth} of {x.method.upper()} {template}"
        fault: dict[str, Any] | None = None
        if x.fault in ("refuse_connection",):
            draft.choose(f"faults ({said})", "it was never sent (refused): the harness cannot refuse one request "
                         "only (refuse_connection closes the destination for the whole run); left out")
            continue
        if x.status is None:
            error = (x.error or "").lower()
            if x.fault == "hold_response" or "timeout" in error or "timed_out" in error or "timed out" in error:
                hold = max(HOLD_PAST_TIMEOUT_MS, int((x.seconds or 0) * 1000) + 1500)
                fault = {"action": "hold_response", "hold_ms": hold, "then": "deliver"}
                draft.choose(f"faults.{rule_id}", f"{said} timed out: its answer held {hold} ms then delivered "
                             "(longer than the client waited)")
            else:
                action = x.fault if x.fault in ("drop_response_after_commit", "reset_after_commit", "drop_request",
                                                "truncate_body", "malformed_chunk") else "drop_response_after_commit"
                fault = {"action": action}
                if x.fault is None:
                    draft.choose(f"faults.{rule_id}", f"{said} got no answer ({x.error or 'none'}): the destination "
                                 "is assumed to have acted (drop_response_after_commit, the worst case); use "
                                 "drop_request if it never received it")
        elif x.status == 429 or (x.status >= 500 and x.fault != "replace_status" and
                                 (x.upstream_status is None or x.upstream_status == x.status)):
            after = x.fault == "replace_status" or (x.upstream_status is not None and x.upstream_status < 400)
            fault = {"action": "replace_status" if after else "synthetic_status", "status": x.status}
            retry_after = x.response_headers.get("retry-after")
            if retry_after and retry_after.isdigit():
                fault["retry_after"] = int(retry_after)
            if x.status >= 500 and x.fault is None and x.upstream_status is None:
                draft.choose(f"faults.{rule_id}", f"{said} answered {x.status}: assumed before the destination acted "
                             "(synthetic_status); use replace_status if it had committed")
        elif x.fault == "replace_status" or (x.status >= 500 and x.upstream_status is not None):
            fault = {"action": "replace_status", "status": x.status}
        if fault is not None:
            faults.append({"id": rule_id, "match": match, **fault})
    return faults


# -- on a project's own destinations ---------------------------------------------------------------------------

RouteOf = Callable[[Exchange], "tuple[str, str, str] | None"]  # an exchange -> (route name, role, path template)


def _route_path(route_of: RouteOf) -> Callable[[Exchange], str | None]:
    """The path template of the configured route an exchange is on (what a fault's match names), or None."""
    def path(x: Exchange) -> str | None:
        found = route_of(x)
        return found[2] if found is not None else None

    return path


def _configured_routes(spec: DestinationSpec) -> list[tuple[str, str, str, str, dict[str, str]]]:
    """(name, role, method, path template, params it must carry) of each HTTP route a configured destination
    serves: an api declaration's routes (whole wire paths, the base path included), a service's operations and
    lookup."""
    from fake_destinations.spec import describe

    if spec.api is not None:
        return [(n, r.role, r.method, r.path, dict(r.match)) for n, r in spec.api.routes.items()]
    contract = describe(spec)
    out: list[tuple[str, str, str, str, dict[str, str]]] = [
        (kind, "commits", op.method, op.path, {}) for kind, op in contract.operations.items()
        if op.path and op.method in HTTP_METHODS]
    if contract.lookup is not None and contract.lookup.method in HTTP_METHODS:
        out.append(("lookup", "lookup", contract.lookup.method, contract.lookup.path, {}))
    return out


def _route_finder(routes: list[tuple[str, str, str, str, dict[str, str], re.Pattern[str]]]) -> RouteOf:
    def route_of(x: Exchange) -> tuple[str, str, str] | None:
        params = _params(x)[0] if any(r[4] for r in routes) else {}
        for n, role, method, path, match, pattern in routes:
            if method == x.method.upper() and pattern.match(x.path) and \
                    all(str(params.get(k)) == v for k, v in match.items()):
                return n, role, path
        return None

    return route_of


def _configured_destination(origin: str, exchanges: list[Exchange], project: Project,
                            draft: Draft) -> tuple[str, DestinationSpec, RouteOf] | None:
    """The project's destination whose routes the requests to ``origin`` are on (its writes by method and path
    template), and how each request finds its route; None when no destination's write matches one."""
    from harness.contract import path_template_pattern

    best: tuple[int, str] | None = None
    route_tables: dict[str, RouteOf] = {}
    for dest, spec in project.destinations.items():
        routes = [(n, role, m, path, match, path_template_pattern(path, trailing_slash=True))
                  for n, role, m, path, match in _configured_routes(spec)]

        route_of = _route_finder(routes)
        route_tables[dest] = route_of
        writes = sum(1 for x in exchanges if (found := route_of(x)) is not None and found[1] == "commits")
        if writes and (best is None or writes > best[0]):
            best = (writes, dest)
    if best is None:
        draft.choose(f"destinations ({origin})", f"no write to {origin} is on a route of {project.path}'s "
                     f"destinations ({', '.join(project.destinations)}): a destination inferred from the traffic")
        return None
    dest = best[1]
    route_of = route_tables[dest]
    off = sorted({f"{x.method.upper()} {x.path}" for x in exchanges if route_of(x) is None})
    draft.choose(f"destinations.{dest}", f"the requests to {origin} are on the routes of {dest}, as {project.path} "
                 "declares it: the scenario runs against the team's API (in the project's folder, with its agent and "
                 "mode)" + (f"; requests on none of its routes left out: {', '.join(off[:5])}" if off else ""))
    return dest, project.destinations[dest], route_of


def _as_declared(project: Project, dest: str, base_dir: Path) -> dict[str, Any]:
    """The destination as the project's table declares it, its files' paths relative to the scenario's folder: an
    OpenAPI document (``openapi:``, its overrides beside it), an api declaration file, a service; its ``env`` as the
    agent's variables (``agent_env``)."""
    table = dict(project.tables.get(dest) or {})
    env = table.pop("env", None)

    def relative(given: str) -> str:
        return os.path.relpath((project.folder / given).resolve(), base_dir.resolve())

    if isinstance(table.get("openapi"), str):
        document = relative(table.pop("openapi"))
        out: dict[str, Any] = {"openapi": {"document": document, **table} if table else document}
    else:
        out = table
        api = table.get("api")
        if isinstance(api, str) and ("/" in api or api.endswith((".yaml", ".yml"))):
            out["api"] = relative(api)
    if env:
        out["agent_env"] = env
    return out


def _configured_intents(dest: str, spec: DestinationSpec, exchanges: list[Exchange], route_of: RouteOf,
                        project: Project, draft: Draft) -> list[dict[str, Any]]:
    """One intent per operation, its kind the configured route's (create_ticket, never a name re-read from the
    traffic), its params as the request sent them (a client reference such as external_id included; the key or
    token left out); the project's own intent id when one asks for the same."""
    token = spec.api.idempotency.field if spec.api is not None else None
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for x in exchanges:
        found = route_of(x)
        if found is None or found[1] != "commits":
            continue
        kind = found[0]
        params = {k: v for k, v in _params(x)[0].items() if k not in (token, "Action", "Version")}
        signature = (kind, json.dumps(params, sort_keys=True, default=str))
        if signature in seen:
            continue
        own = next((i.intent_id for i in project.intents if i.destination == dest and i.kind == kind
                    and i.params == params), None)
        intent_id = own or f"{kind.replace('_', '-')}-{len(seen) + 1}"
        seen[signature] = {"intent_id": intent_id, "kind": kind, "destination": dest,
                           "params": _scrub(params, dest, draft, f"intents[{len(seen)}].params")}
    return _intents_said(dest, seen, draft)


# -- secrets -------------------------------------------------------------------------------------------------

def _looks_secret(name: str, value: Any) -> bool:
    return bool(SECRET_NAMES.search(str(name))) or (isinstance(value, str) and bool(SECRET_VALUES.search(value)))


def _scrub(params: dict[str, Any], destination: str, draft: Draft, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in params.items():
        if isinstance(v, dict):
            out[k] = _scrub(v, destination, draft, f"{where}.{k}")
        elif _looks_secret(k, v):
            reference = f"{SECRET_ENV_PREFIX}{env_suffix(destination)}"
            out[k] = f"${{{reference}}}"
            draft.choose(f"{where}.{k}", f"looked like a credential: replaced by a reference to {reference} (the "
                                         "harness gives the agent a stand-in credential there)")
        else:
            out[k] = v
    return out


def _scrubbed_intent(intent: dict[str, Any], draft: Draft) -> dict[str, Any]:
    out = {k: v for k, v in intent.items() if v not in (None, False, {}) or k == "params"}
    out["params"] = _scrub(dict(intent.get("params") or {}), str(intent.get("destination")), draft,
                           f"intents.{intent.get('intent_id')}.params")
    return out


# -- the description ---------------------------------------------------------------------------------------

def _name_of(incident: Incident, operation: str | None) -> str:
    base = (incident.context or {}).get(ContextKey.SCENARIO) or re.sub(r"[^A-Za-z0-9_.-]", "_",
                                                              incident.source.rstrip("/").split("/")[-1])
    base = re.sub(r"^[^A-Za-z0-9]+", "", base.rsplit(".", 1)[0] if not incident.context else base) or "incident"
    name = f"reproduce_{base}" + (f"_{operation}" if operation else "")
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:100]


def _description(incident: Incident, operation: str | None, draft: Draft) -> str:
    lines = [f"Reproduces the incident in {incident.source} ({incident.format})"
             + (f", operation {operation}" if operation else "") + "."]
    times = [x.started for x in incident.exchanges if x.started]
    if not times:  # an audit log: its records' own clock
        from harness.checker.readings import ts_value

        times = [t for records in incident.operations.values() for r in records if (t := ts_value(r.get("ts")))]
    times = [t for t in times if 0 < t < 32503680000]  # a clock a log may hold: 1970 to the year 3000
    if times:
        import datetime

        first, last = (datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
                       for t in (min(times), max(times)))
        lines.append(f"From {first} to {last}" + (f": {len(incident.exchanges)} request(s)." if incident.exchanges
                                                   else "."))
    ops = sorted(incident.operations) if operation is None else [operation]
    if ops:
        lines.append("Operations: " + ", ".join(ops[:10]) + (f" and {len(ops) - 10} more" if len(ops) > 10 else "")
                     + ".")
    lines += _what_went_wrong(incident)
    lines += draft.cites
    lines.append("A correct agent, put in the same position, brings about each intended effect once.")
    return "\n".join(lines)


def _what_went_wrong(incident: Incident) -> list[str]:
    """The incident's own verdict (an evidence folder's), else what its exchanges show."""
    if incident.context is not None:
        from pathlib import Path

        from harness.contract import EvidenceLayout

        verdict = EvidenceLayout(Path(incident.source)).verdict_json
        try:
            data = json.loads(verdict.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        findings = [f for f in data.get("findings") or [] if isinstance(f, dict)]
        if not findings:
            return ["The run passed: nothing went wrong in it."]
        codes = sorted({str(f.get("code")) for f in findings})
        first = str(findings[0].get("message") or "")
        return [f"What went wrong: {', '.join(codes)} (agent {data.get('agent')}). {first[:300]}"]
    said_by_log = []
    for op_id, records in list(incident.operations.items())[:10]:
        resolution = next((r for r in reversed(records) if r.get("event") == "resolution"), None)
        attempts = sum(1 for r in records if r.get("event") == "attempt")
        if resolution is not None and attempts:
            refs = ", ".join(str(ref) for ref in resolution.get("effect_refs") or [])
            reason = f": {resolution['reason']}" if isinstance(resolution.get("reason"), str) else ""
            said_by_log.append(f"{op_id} ({attempts} attempt(s)) was resolved {resolution.get('state')}"
                               + (f" [{refs}]" if refs else "") + reason)
    if said_by_log:
        return ["What the log says happened: " + "; ".join(said_by_log) + "."]
    lost = sum(1 for x in incident.exchanges if x.status is None)
    failed = sum(1 for x in incident.exchanges if x.status is not None and x.status >= 500)
    limited = sum(1 for x in incident.exchanges if x.status == 429)
    said = [f"{n} {what}" for n, what in ((lost, "request(s) without an answer"), (failed, "5xx answer(s)"),
                                         (limited, "429 answer(s)")) if n]
    return [f"What the client met: {', '.join(said)}."] if said else []
