"""Templates of a generic destination's answers: placeholders, JSON and XML bodies, effect ref paths.

A placeholder is ``{name}`` or ``{name:spec}`` (a Python format spec): ``{id}``, ``{n}``, ``{now}``,
``{request_id}``, ``{key}``, ``{params.NAME}`` (NAME may hold brackets, as Stripe's form fields do), and in
error bodies ``{status}``, ``{code}``, ``{message}``. ``{{`` and ``}}`` are literal braces. A JSON string
that is exactly one placeholder takes the value with its type (``"{params.amount:d}"``: the number a
form field spells); an XML body is a string whose values are
escaped by ``xml.sax.saxutils`` and which must parse.

Standard library only: the destination process renders every answer with it, and the scenario's
validation (``fake_destinations.api_spec``) checks declarations with the same functions, so a template
that validates is one that renders.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from typing import Any
from xml.sax.saxutils import escape

ANSWER_NAMES = ("id", "n", "now", "request_id", "key")
ERROR_NAMES = ("status", "code", "message")
PARAMS_PREFIX = "params."
_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*(?:\.[^{}:]+)?)(?::([^{}]*))?\}|[{}]")


class TemplateError(ValueError):
    """A template that cannot render: an unknown placeholder, a bad format spec, a lone brace, bad XML."""


def placeholders(text: str) -> list[tuple[str, str | None]]:
    """The ``(name, spec)`` pairs of a template, in order; a ``TemplateError`` on a lone brace."""
    found = []
    for m in _TOKEN.finditer(text):
        token = m.group(0)
        if token in ("{{", "}}"):
            continue
        if m.group(1) is None:
            raise TemplateError(f"{text!r} has a lone {token!r}: write {token * 2} for a literal brace, or a "
                                "placeholder such as {id} or {params.amount}")
        found.append((m.group(1), m.group(2)))
    return found


def check(text: str, names: tuple[str, ...]) -> None:
    """Raise ``TemplateError`` unless every placeholder is one of ``names`` (or ``params.X``) and its
    format spec applies to a sample value."""
    for name, spec in placeholders(text):
        samples: tuple[Any, ...]
        if name.startswith(PARAMS_PREFIX):
            samples = ("x", 1)  # a form's string or a JSON number: either may come
        elif name in names:
            samples = (1,) if name in ("n", "now", "status") else ("x",)
        else:
            valid = ", ".join("{" + n + "}" for n in names)
            raise TemplateError(f"{text!r}: unknown placeholder {{{name}}}; valid: {valid}, {{params.NAME}}")
        if spec:
            problems = []
            for sample in samples:
                try:
                    format(sample, spec)
                except ValueError as exc:
                    problems.append(f"{'a number' if isinstance(sample, int) else 'a string'} ({exc})")
            if len(problems) == len(samples):
                raise TemplateError(f"{text!r}: format spec {spec!r} of {{{name}}} does not apply to "
                                    f"{' or '.join(problems)}")


def _lookup(name: str, values: Mapping[str, Any], params: Mapping[str, Any]) -> Any:
    if name.startswith(PARAMS_PREFIX):
        return params.get(name[len(PARAMS_PREFIX):])
    return values.get(name)


def _text(value: Any, spec: str | None) -> str:
    if value is None:
        return ""
    if spec:
        try:
            return format(value, spec)
        except ValueError:  # a form field's "1999" under {params.amount:d}: format the number it holds
            try:
                return format(int(value), spec)
            except (TypeError, ValueError):
                return str(value)
    return value if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)


def render_text(text: str, values: Mapping[str, Any], params: Mapping[str, Any], *, xml: bool = False) -> str:
    """``text`` with every placeholder replaced (escaped for XML when ``xml``)."""
    def replace(m: re.Match[str]) -> str:
        token = m.group(0)
        if token in ("{{", "}}"):
            return token[0]
        if m.group(1) is None:
            return token
        out = _text(_lookup(m.group(1), values, params), m.group(2))
        return escape(out, {'"': "&quot;", "'": "&apos;"}) if xml else out

    return _TOKEN.sub(replace, text)


def render_value(template: Any, values: Mapping[str, Any], params: Mapping[str, Any]) -> Any:
    """A JSON template rendered: strings in mappings and lists, keys too; a string that is one
    placeholder and nothing else keeps the value's type."""
    if isinstance(template, str):
        m = _TOKEN.fullmatch(template)
        if m is not None and m.group(1) is not None and m.group(2) in (None, "", "d"):
            value = _lookup(m.group(1), values, params)
            if m.group(2) == "d":  # "{params.amount:d}": the number a form field spells
                try:
                    return int(value)
                except (TypeError, ValueError):
                    return value
            return value
        return render_text(template, values, params)
    if isinstance(template, Mapping):
        return {render_text(str(k), values, params): render_value(v, values, params) for k, v in template.items()}
    if isinstance(template, list):
        return [render_value(v, values, params) for v in template]
    return template


def render_body(template: Any, values: Mapping[str, Any], params: Mapping[str, Any]) -> Any:
    """A declared body: a string is text (XML escaped when it looks like XML), anything else JSON."""
    if isinstance(template, str):
        return render_text(template, values, params, xml=looks_like_xml(template))
    return render_value(template, values, params)


def nest(path: str | None, value: Any) -> Any:
    """``value`` at the dotted ``path`` of a new mapping (``ticket`` -> ``{"ticket": value}``); None: as it is."""
    for part in reversed(path.split(".") if path else []):
        value = {part: value}
    return value


def read_param(path: str) -> str | None:
    """The path param a reads route names its resource by: ``{id}``, else its only one (``/tickets/{ticket_id}``)."""
    names = re.findall(r"\{(\w+)\}", path)
    return "id" if "id" in names else names[0] if len(names) == 1 else None


def looks_like_xml(text: str) -> bool:
    return text.lstrip().startswith("<")


def parse_xml(text: str) -> ElementTree.Element:
    """The root element of an XML body; ``TemplateError`` when it does not parse."""
    try:
        return ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        raise TemplateError(f"the XML body does not parse: {exc}") from None


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


_MISSING = object()


def find(body: Any, path: str) -> Any:
    """The value at a dotted ``path`` in an answer body (None when nothing is there): keys and list
    indexes in JSON, element local names in XML (the root element's own name is left out)."""
    if isinstance(body, str) and looks_like_xml(body):
        try:
            node: ElementTree.Element | None = ElementTree.fromstring(body)
        except ElementTree.ParseError:
            return None
        for part in path.split("."):
            node = next((child for child in node if _local(child.tag) == part), None) if node is not None else None
        return node.text if node is not None else None
    value: Any = body
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value
