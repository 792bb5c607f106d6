"""The OpenAPI documents the tests read (tests/data/openapi/, their sources in its README; the docs' helpdesk in
examples/openapi/), and a validator of a
document's own schemas, independent of the inference: openapi-schema-validator over the document itself."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from openapi_schema_validator import OAS30Validator, OAS31Validator
from referencing import Registry, Resource, Specification

DOCUMENTS = Path(__file__).resolve().parents[1] / "data" / "openapi"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "openapi"  # the docs' helpdesk


def document_schema(document: Path, *pointer: str) -> Callable[[Any], list[str]]:
    """A function listing what an instance breaks in the schema at ``pointer`` of ``document`` (its ``$ref``s
    resolved by referencing, as the document's own readers would)."""
    data = yaml.safe_load(document.read_text())
    data = _keys_as_text(data)
    uri = "urn:document"
    registry: Registry[Any] = Registry().with_resource(uri, Resource(contents=data,
                                                                     specification=Specification.OPAQUE))
    ref = uri + "#" + "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in pointer)
    cls = OAS30Validator if str(data["openapi"]).startswith("3.0") else OAS31Validator
    validator = cls({"$ref": ref}, registry=registry)
    return lambda instance: [e.message for e in validator.iter_errors(instance)]


def _keys_as_text(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _keys_as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_keys_as_text(v) for v in value]
    return value
