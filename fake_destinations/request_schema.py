"""A generic destination's write checked against its request schema (``ApiRoute.request_schema``), as the real
API would check it: every violation listed, nothing committed.

jsonschema (and for an OpenAPI 3.0 schema openapi-schema-validator) are imported here only, and only when a route
declares a schema: a destination process starts on every scenario's critical path, and most declare none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Violations = Callable[[dict[str, Any]], list[str]]
_SCALARS: dict[str, Callable[[str], Any]] = {
    "integer": int, "number": float, "boolean": lambda text: {"true": True, "false": False}[text.lower()]}


def _validator_class(dialect: str) -> Any:
    if dialect == "openapi-3.0":  # nullable, exclusiveMaximum as a flag...: not JSON Schema, its own validator
        from openapi_schema_validator import OAS30Validator  # (its package imports pydantic-settings: ~0.2 s more)
        return OAS30Validator
    # 3.1's schemas are JSON Schema 2020-12 (OAS31Validator adds only annotations and the int32-like formats, which
    # it does not assert either): jsonschema's own validator, without openapi-schema-validator's imports
    from jsonschema import Draft202012Validator
    return Draft202012Validator


def schema_problem(schema: dict[str, Any], dialect: str) -> str | None:
    """Why ``schema`` is no schema of ``dialect`` (the declaration's check), or None."""
    from jsonschema.exceptions import SchemaError

    try:
        _validator_class(dialect).check_schema(schema)
    except SchemaError as exc:
        where = ".".join(str(p) for p in exc.absolute_path)
        return f"{where + ': ' if where else ''}{exc.message}"
    return None


def violations_of(schema: dict[str, Any], dialect: str, *, form: bool) -> Violations:
    """A function listing what a request body breaks in ``schema`` (empty: none), each as ``field: why``. A form's
    values are strings: those the schema types as numbers or booleans are read as such first, as the API would."""
    validator = _validator_class(dialect)(schema)
    properties = schema.get("properties")
    form_types = {name: sub.get("type") for name, sub in properties.items() if isinstance(sub, dict)} \
        if form and isinstance(properties, dict) else {}

    def violations(body: dict[str, Any]) -> list[str]:
        if form_types:
            body = {name: _typed(value, form_types.get(name)) for name, value in body.items()}
        found = sorted(validator.iter_errors(body), key=lambda e: [str(p) for p in e.absolute_path])
        return [f"{'.'.join(str(p) for p in e.absolute_path) or '(body)'}: {e.message}" for e in found]

    return violations


def _typed(value: Any, kind: Any) -> Any:
    convert = _SCALARS.get(kind) if isinstance(kind, str) and isinstance(value, str) else None
    if convert is None:
        return value
    try:
        return convert(value)
    except (ValueError, KeyError):
        return value  # left as the string it is: the validator names it
