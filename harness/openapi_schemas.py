"""The JSON Schemas of an OpenAPI document (their ``$ref``s inlined) read for ``harness.openapi``: an object's
properties through allOf, the id-like fields of an answer, and the answers' templates made from a schema (a
commit's answer, an error's)."""

from __future__ import annotations

import re
from typing import Any

MAX_ID_DEPTH = 4
# the words of an API's contract, read from a document here and from traffic by harness.incident.reproduce
IDEMPOTENCY_HEADER_NAME = re.compile(r"^(x-)?idempotency[-_]?(key|token)$", re.IGNORECASE)
CLIENT_REFERENCE_NAMES = {"external_id", "externalid", "client_reference", "client_reference_id", "clientreference",
                          "reference", "idempotency_key", "request_id", "client_id", "correlation_id"}
MESSAGE_FIELDS = ("message", "detail", "error_description", "description", "title", "msg", "reason")
CODE_FIELDS = ("code", "type", "error_code", "error", "kind")


# -- schemas ----------------------------------------------------------------------------------------------------

def merged_schema(schema: Any) -> dict[str, Any]:
    """An inlined schema's object view: allOf's properties and required merged; oneOf/anyOf: the first."""
    if not isinstance(schema, dict):
        return {}
    out = dict(schema)
    properties = dict(schema.get("properties") or {}) if isinstance(schema.get("properties"), dict) else {}
    required = list(schema.get("required") or []) if isinstance(schema.get("required"), list) else []
    parts = [p for p in (schema.get("allOf") or []) if isinstance(p, dict)] if isinstance(schema.get("allOf"),
                                                                                             list) else []
    for key in ("oneOf", "anyOf"):
        if not properties and isinstance(schema.get(key), list) and schema[key] and isinstance(schema[key][0], dict):
            parts.append(schema[key][0])
    for part in parts:
        sub = merged_schema(part)
        properties.update(sub.get("properties") or {})
        required += [r for r in sub.get("required") or [] if r not in required]
        for key in ("type", "enum"):
            if key in sub and key not in out:
                out[key] = sub[key]
    out["properties"], out["required"] = properties, required
    return out


def schema_type(schema: dict[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind is None and schema.get("properties"):
        return "object"
    return kind if isinstance(kind, str) else None


def id_candidates(schema: Any, noun: str) -> list[tuple[int, int, str, str]]:
    """The id-like fields of an answer's schema, nested too (never inside a list): (rank, depth, dotted path, type),
    best first. Rank 0: ``id``; 1: the resource's own id (``ticket_id``, ``ticketId``); 2: any ``*_id``/``*Id``."""
    found: list[tuple[int, int, str, str]] = []

    def walk(node: Any, path: tuple[str, ...]) -> None:
        merged = merged_schema(node)
        for name, sub in merged["properties"].items():
            sub = merged_schema(sub)
            kind = schema_type(sub)
            rank = id_rank(name, noun)
            if rank is not None and kind in ("string", "integer", None):
                found.append((rank, len(path) + 1, ".".join((*path, name)), kind or "string"))
            if kind == "object" and len(path) + 1 < MAX_ID_DEPTH:
                walk(sub, (*path, name))

    walk(schema, ())
    return sorted(found)


def id_rank(name: str, noun: str) -> int | None:
    lowered = name.lower()
    if lowered in ("id", "uuid", "guid"):
        return 0
    if noun and lowered in (f"{noun}_id", f"{noun}id"):
        return 1
    if lowered.endswith("_id") or re.search(r"[a-z0-9](Id|ID)$", name):
        return 2
    return None


def noun_of(path: str) -> str:
    """The resource's name from its collection path: /api/v2/tickets -> ticket."""
    literal = [s for s in path.split("/") if s and "{" not in s]
    word = (literal[-1] if literal else "").lower().replace("-", "_")
    for plural, singular in (("ies", "y"), ("sses", "ss"), ("s", "")):
        if word.endswith(plural) and len(word) > len(plural) + 1:
            return word[: -len(plural)] + singular
    return word


def snake(text: str) -> str:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", text)
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()


def literal(text: str) -> str:
    """A value written into an answer template as itself (its braces are no placeholder)."""
    return text.replace("{", "{{").replace("}", "}}")


_FORMAT_SAMPLES = {"date-time": "2026-01-01T00:00:00Z", "date": "2026-01-01", "time": "00:00:00Z",
                   "email": "someone@example.com", "uri": "https://example.com/", "url": "https://example.com/",
                   "uuid": "00000000-0000-4000-8000-000000000000", "hostname": "example.com", "ipv4": "192.0.2.1",
                   "ipv6": "2001:db8::1"}


def sample(schema: Any, name: str, depth: int = 0) -> Any:
    """A plausible value of ``schema`` as template text: its example, its first enum value, a value of its
    format, else the least its type allows."""
    merged = merged_schema(schema)
    if "const" in merged:
        value = merged["const"]
    elif isinstance(merged.get("enum"), list) and merged["enum"]:
        value = merged["enum"][0]
    elif "example" in merged and not isinstance(merged["example"], (dict, list)):
        value = merged["example"]
    else:
        kind = schema_type(merged)
        if kind == "object" and depth < 8:
            return {literal(k): sample(merged["properties"][k], k, depth + 1)
                    for k in merged["required"] if k in merged["properties"]}
        if kind == "array":
            items = merged.get("items")
            return [sample(items, name, depth + 1)] if (merged.get("minItems") or 0) > 0 and depth < 8 else []
        if kind in ("integer", "number"):
            low = merged.get("minimum", 0)
            return low if isinstance(low, (int, float)) and not isinstance(low, bool) else 0
        if kind == "boolean":
            return False
        if kind == "null":
            return None
        if kind == "object":
            return {}
        value = _FORMAT_SAMPLES.get(str(merged.get("format")), name or "text")
        value = value.ljust(merged.get("minLength") or 0, "x") if isinstance(merged.get("minLength"), int) else value
    return literal(value) if isinstance(value, str) else value


def echoes(request: dict[str, Any], answer: dict[str, Any]) -> bool:
    """Whether every value the request field may take is one the answer's property may show."""
    if "const" in answer:
        return False
    if isinstance(answer.get("enum"), list):
        return isinstance(request.get("enum"), list) and all(v in answer["enum"] for v in request["enum"])
    return True


def answer_template(schema: Any, id_path: tuple[str, ...], echoed: dict[str, dict[str, Any]],
                     depth: int = 0) -> Any:
    """The commit's answer: the required properties with plausible values, the new ``{id}`` at the id's path, a
    property named like a required request field echoing it (``{params.summary}``)."""
    merged = merged_schema(schema)
    out: dict[str, Any] = {}
    for name, sub in merged["properties"].items():
        on_path = bool(id_path) and id_path[0] == name
        if not (on_path or name in merged["required"] or (name in echoed and depth <= 1)):
            continue
        sub_merged = merged_schema(sub)
        kind = schema_type(sub_merged)
        if on_path and len(id_path) == 1:
            out[literal(name)] = "{id}"
        elif on_path:
            out[literal(name)] = answer_template(sub, id_path[1:], echoed, depth + 1)
        elif name in echoed and kind in ("string", "integer", "number", "boolean", None) \
                and echoes(echoed[name], sub_merged):
            out[literal(name)] = f"{{params.{name}:d}}" if kind == "integer" else f"{{params.{name}}}"
        elif kind == "object" and depth < 8:
            out[literal(name)] = answer_template(sub, (), echoed, depth + 1)
        else:
            out[literal(name)] = sample(sub, name, depth + 1)
    return out


def error_template(schema: Any, depth: int = 0) -> Any:
    """An error answer in the document's shape: its code-like field ``{code}`` (``{status}`` when a number),
    its message-like field ``{message}``, the rest plausible; None when it has no place for the message."""
    merged = merged_schema(schema)
    kind = schema_type(merged)
    if kind == "array" and depth < 4:
        inner = error_template(merged.get("items"), depth + 1)
        return [inner] if inner is not None else None
    if kind != "object" or depth >= 4:
        return None
    out: dict[str, Any] = {}
    said_message = False
    for name, sub in merged["properties"].items():
        sub_kind = schema_type(merged_schema(sub))
        lowered = name.lower()
        if lowered in MESSAGE_FIELDS and sub_kind == "string" and not said_message:
            out[literal(name)], said_message = "{message}", True
        elif lowered in CODE_FIELDS and sub_kind == "string" and not merged_schema(sub).get("enum"):
            out[literal(name)] = "{code}"
        elif lowered in CODE_FIELDS + ("status", "status_code") and sub_kind == "integer":
            out[literal(name)] = "{status}"
        elif sub_kind in ("object", "array") and not said_message:
            inner = error_template(sub, depth + 1)
            if inner is not None:
                out[literal(name)], said_message = inner, True
            elif name in merged["required"]:
                out[literal(name)] = sample(sub, name)
        elif name in merged["required"]:
            out[literal(name)] = sample(sub, name)
    return out if said_message else None




def value_schema(value: Any, depth: int = 0) -> dict[str, Any]:
    """The schema a JSON value shows (an answer seen on the wire): its type, an object's properties; so that
    ``id_candidates`` ranks the id-like fields of an observed answer as it ranks a document's (one vocabulary)."""
    if isinstance(value, dict) and depth < MAX_ID_DEPTH:
        return {"type": "object", "properties": {str(k): value_schema(v, depth + 1) for k, v in value.items()}}
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        return {"type": "array"}
    return {"type": "null"} if value is None else {}
