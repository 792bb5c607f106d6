"""An OpenAPI document read for ``harness.openapi``: YAML or JSON within the harness's bounds, its version checked,
every ``$ref`` resolved by ``referencing`` (an unresolvable one named with its place), the whole validated by
openapi-spec-validator; errors name the file, the line and the JSON pointer.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from harness.errors import OpenApiError, ScenarioError
from harness.yaml_files import line_of, load_yaml_mapping, suggest

MAX_INLINED_NODES = 20_000  # a schema's $refs inlined: past this, what is left accepts anything (said so)


def prefix(where: str) -> str:
    """The configuration's place, first in a message (``pyproject.toml: tool.retry-harness...: ``)."""
    return f"{where}: " if where else ""


class OpenApiDocument:
    """The document as data, its node tree (lines), its version, and a resolver of its ``$ref``s."""

    def __init__(self, path: Path, where: str) -> None:
        self.path, self.where = path, where
        try:
            data, self.root = load_yaml_mapping(path, "an OpenAPI document is a mapping with keys openapi, info, "
                                                      "paths")
        except ScenarioError as exc:
            raise OpenApiError(f"{prefix(where)}{exc}") from None
        self.data: dict[str, Any] = json_like(data)
        version = self.data.get("openapi")
        if not isinstance(version, str) or not re.match(r"^3\.[01](\.\d+)?(-.+)?$", version):
            if "swagger" in self.data:
                raise self.error(("swagger",), f"Swagger {self.data['swagger']!r} is not read here: convert the "
                                 "document to OpenAPI 3 (e.g. with swagger2openapi), then give that file")
            raise self.error(("openapi",), f"openapi: {version!r} is not a version read here (valid: 3.0.x, 3.1.x)")
        self.version = version[:3]
        self.resolver = self._resolver()
        self._check_refs()
        self._validate()

    def error(self, loc: tuple[Any, ...], message: str) -> OpenApiError:
        pointer = "#" + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in loc)
        return OpenApiError(f"{prefix(self.where)}{self.path}:{line_of(self.root, loc)}: {pointer}: {message}")

    def _resolver(self) -> Any:
        from referencing import Registry, Specification

        uri = self.path.resolve().as_uri()
        resource = Specification.OPAQUE.create_resource(self.data)
        registry = Registry(retrieve=self._retrieve)  # type: ignore[call-arg]  # attrs' alias of _retrieve
        return registry.with_resource(uri, resource).resolver(base_uri=uri)

    def _retrieve(self, uri: str) -> Any:
        """Another file a ``$ref`` names, beside this one (never a URL: the harness fetches nothing); referencing
        turns what this raises into an ``Unresolvable``."""
        from referencing import Specification

        parsed = urlparse(uri)
        if parsed.scheme != "file":
            raise LookupError(uri)
        try:
            data, _ = load_yaml_mapping(Path(parsed.path), "a document a $ref names is a mapping")
        except ScenarioError:
            raise LookupError(uri) from None
        return Specification.OPAQUE.create_resource(json_like(data))

    def _check_refs(self) -> None:
        from referencing.exceptions import Unresolvable

        for loc, ref in _refs(self.data, ()):
            if not isinstance(ref, str):
                raise self.error(loc, f"$ref {ref!r} is not a string (valid: a reference such as "
                                      "'#/components/schemas/Ticket')")
            try:
                self.resolver.lookup(ref)
            except Unresolvable as exc:
                why = "no such place in the document" if ref.startswith("#") else f"{type(exc).__name__}"
                raise self.error(loc, f"$ref {ref!r} resolves to nothing ({why}{self._near(ref)}); valid: a JSON "
                                      "pointer into this document such as '#/components/schemas/Ticket', or a file "
                                      "beside it") from None
            except Exception as exc:  # noqa: BLE001 - a malformed reference: a message, never a traceback
                raise self.error(loc, f"$ref {ref!r} cannot be read: {exc}") from None

    def _near(self, ref: str) -> str:
        """'; did you mean ...' for a ref into this document whose last name is misspelt."""
        parent, _, name = ref.removeprefix("#").rpartition("/")
        node: Any = self.data
        for part in parent.split("/")[1:] if ref.startswith("#/") else [None]:
            node = node.get(str(part).replace("~1", "/").replace("~0", "~")) if isinstance(node, dict) else None
        hint = suggest(name, [str(k) for k in node]) if isinstance(node, dict) else []
        return f"; did you mean '#{parent}/{hint[0]}'?" if hint else ""

    def _validate(self) -> None:
        from jsonschema.exceptions import best_match
        from openapi_spec_validator import OpenAPIV30SpecValidator, OpenAPIV31SpecValidator

        validator = OpenAPIV30SpecValidator if self.version == "3.0" else OpenAPIV31SpecValidator
        try:
            found = best_match(validator(self.data).iter_errors())
        except RecursionError:
            raise self.error((), "the document nests too deeply to validate") from None
        except Exception as exc:  # noqa: BLE001 - the validator on a document it cannot walk: said, not raised
            raise self.error((), f"not a valid OpenAPI {self.version} document: {exc}") from None
        if found is not None:
            found = _deepest(found)
            raise self.error(tuple(found.absolute_path), f"not a valid OpenAPI {self.version} document: "
                                                         f"{_short(found.message)}")

    def deref(self, node: Any, loc: tuple[Any, ...]) -> tuple[Any, str | None]:
        """``node`` with its ``$ref`` chain followed (the last ref's name, e.g. Ticket), as the library resolves it."""
        name = None
        seen: set[str] = set()
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in seen:
                raise self.error(loc, f"$ref {ref!r} refers to itself through {', '.join(sorted(seen))}")
            seen.add(ref)
            node = self.resolver.lookup(ref).contents
            name = ref.rsplit("/", 1)[-1]
        return node, name

    def inline(self, schema: Any, loc: tuple[Any, ...]) -> tuple[dict[str, Any], list[str]]:
        """A schema with every ``$ref`` replaced by what it names: self-contained for the fake's validator. A ref
        met again inside itself (a recursive schema) becomes ``{}`` (anything), said in the second value."""
        notes: list[str] = []
        budget = [MAX_INLINED_NODES]

        def walk(node: Any, stack: tuple[str, ...]) -> Any:
            budget[0] -= 1
            if isinstance(node, list):
                return [walk(v, stack) for v in node]
            if not isinstance(node, dict):
                return node
            ref = node.get("$ref")
            if isinstance(ref, str):
                if ref in stack or budget[0] <= 0:
                    notes.append(f"{ref} {'inside itself (recursive)' if ref in stack else 'past the size limit'}: "
                                 "accepted as anything")
                    return {}
                target = walk(self.resolver.lookup(ref).contents, (*stack, ref))
                siblings = {k: walk(v, stack) for k, v in node.items() if k != "$ref"}
                return {"allOf": [target], **siblings} if siblings else target
            return {k: walk(v, stack) for k, v in node.items()}

        try:
            out = walk(schema, ())
        except RecursionError:
            raise self.error(loc, "the schema nests too deeply to inline") from None
        return (out if isinstance(out, dict) else {}), notes


def _deepest(error: Any) -> Any:
    """The error a person can act on: within a oneOf/anyOf, the branch that is no bare ``$ref``'s complaint."""
    from jsonschema.exceptions import best_match

    while error.context:
        inner = best_match(e for e in error.context if "'$ref'" not in e.message)
        if inner is None:
            break
        error = inner
    return error


def json_like(value: Any) -> Any:
    """The YAML as JSON would hold it: keys as strings (``200:`` is the status "200"), dates as text."""
    if isinstance(value, dict):
        return {str(k): json_like(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_like(v) for v in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return value


def _refs(node: Any, loc: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(node, dict):
        if "$ref" in node:
            yield (*loc, "$ref"), node["$ref"]
        for key, value in node.items():
            if key != "$ref":
                yield from _refs(value, (*loc, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _refs(value, (*loc, i))


def _short(text: str) -> str:
    return text if len(text) <= 300 else text[:297] + "..."


