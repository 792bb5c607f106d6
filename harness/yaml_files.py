"""The harness's YAML files (scenarios, api declarations) read within bounds, and their errors as people read
them: ``file:line: key.path: message``, with "did you mean" from the valid names.

Both the scenario loader (``harness.scenario``) and the destinations' api declarations
(``fake_destinations.api_spec``) read their files here, so neither imports the other for it.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from harness.contract import ENV_NAME_PATTERN, IMAGE_PATTERN, NAME_PATTERN
from harness.errors import ScenarioError


def load_yaml_mapping(path: Path, what: str) -> tuple[dict[str, Any], yaml.Node | None]:
    """A YAML file of the harness's (a scenario, an api declaration) read within the limits below, and
    its node tree (for line numbers); a ``ScenarioError`` naming the file and line, and ``what`` the
    file should hold when it is not a mapping."""
    text = _read_text(path)
    try:
        loader = _BoundedLoader(text)  # the reader rejects non-printable characters here
        try:
            root = loader.get_single_node()
            data = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except _LimitExceeded as exc:
        raise ScenarioError(f"{path}:{exc.line}: {exc.where}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).split("\n", 1)[0]
        raise ScenarioError(f"{_where(path, text, exc)}: not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}:1: {what} (got {type(data).__name__})")
    return data, root


def validation_message(path: Path, root: yaml.Node | None, exc: Exception, model: type[BaseModel]) -> str | None:
    """The lines a ``ValidationError`` of ``model`` (the root of the file at ``path``) makes, as the
    scenario's own errors read; None when ``exc`` is another error."""
    if not isinstance(exc, ValidationError):
        return None
    return format_validation(path, root, exc, model)


# Limits of a scenario file. Scenarios are a few hundred nodes, a handful of levels deep; the limits
# sit far above that and far below what hurts: Python's recursion limit (~1000 frames, a few per
# level in the composer, pydantic and json), memory and time (an alias bomb of 1.3 KB expands to
# 10**9 nodes), and the 4300-digit limit of int().
MAX_FILE_BYTES = 1_000_000
MAX_DEPTH = 64
MAX_NODES = 100_000
MAX_INT_DIGITS = 100


def _read_text(path: Path) -> str:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read scenario file: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ScenarioError(f"{path}: scenario file larger than {MAX_FILE_BYTES:,} bytes; "
                            "a scenario is a short YAML file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ScenarioError(f"{path}:{line}: not UTF-8 text: byte 0x{raw[exc.start]:02x} at column {column} "
                            "cannot be decoded; save the file as UTF-8") from None


def _where(path: Path, text: str, exc: yaml.YAMLError) -> str:
    """``file:line`` of a YAML error (a reader error knows only its character position)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        return f"{path}:{mark.line + 1}"
    position = getattr(exc, "position", None)
    if isinstance(position, int):
        return f"{path}:{text.count(chr(10), 0, position) + 1}"
    return str(path)


class _LimitExceeded(yaml.YAMLError):
    """Raised while composing when the document breaks a limit of scenario files, or holds what no
    scenario can mean (a duplicate key, a circular alias, a lone surrogate)."""

    def __init__(self, mark: Any, path: list[Any], problem: str) -> None:
        super().__init__(problem)
        self.line = mark.line + 1
        self.where = dotted(tuple(path[:8])) + ("..." if len(path) > 8 else "") or "(top level)"
        self.problem = problem


_INT_TAG = "tag:yaml.org,2002:int"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_SURROGATE = re.compile("[\ud800-\udfff]")


class _BoundedLoader(yaml.SafeLoader):
    """A SafeLoader that checks each node as it is composed, before anything is built from it:
    nesting depth, the number of nodes after alias expansion (each alias counts the whole subtree it
    repeats), integer length, duplicate keys, circular aliases and lone surrogates. The cost of the
    checks is linear in the file, so a hostile file fails in the time it takes to read it."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._measure: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded nodes, expanded depth)
        self._open_anchors: set[str] = set()
        self._path: list[Any] = []
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> Any:
        pushed = isinstance(parent, yaml.SequenceNode) or isinstance(index, yaml.ScalarNode)
        if pushed:
            self._path.append(index if isinstance(parent, yaml.SequenceNode) else index.value)
        try:
            return self._compose_checked(parent, index)
        finally:
            if pushed:
                self._path.pop()

    def _compose_checked(self, parent: yaml.Node | None, index: Any) -> Any:
        event: Any = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._open_anchors:
                self._fail(event.start_mark, f"alias *{event.anchor} is inside the node it names: a "
                           "circular reference has no value; repeat the content instead")
            target = super().compose_node(parent, index)
            nodes, depth = self._measure.get(id(target), (1, 0))
            self._count(nodes, event.start_mark, f"alias *{event.anchor}")
            if self._depth + depth > MAX_DEPTH:
                self._fail(event.start_mark, f"alias *{event.anchor} nests the document deeper than "
                           f"{MAX_DEPTH} levels (the limit of a scenario)")
            return target
        collection = isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent))
        if collection:
            self._depth += 1
            if self._depth > MAX_DEPTH:
                self._fail(event.start_mark, f"nested deeper than {MAX_DEPTH} levels (the limit of a scenario)")
        anchor = getattr(event, "anchor", None)
        if collection and anchor is not None:
            self._open_anchors.add(anchor)
        try:
            node: Any = super().compose_node(parent, index)
        finally:
            if collection:
                self._depth -= 1
                self._open_anchors.discard(anchor)
        self._count(1, node.start_mark, "this node")
        if isinstance(node, yaml.ScalarNode):
            self._check_scalar(node)
        else:
            children = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode)
                        else node.value)
            measures = [self._measure.get(id(child), (1, 0)) for child in children]
            self._measure[id(node)] = (1 + sum(m[0] for m in measures), 1 + max((m[1] for m in measures), default=0))
            if isinstance(node, yaml.MappingNode):
                self._check_keys(node)
        return node

    def _count(self, nodes: int, mark: Any, what: str) -> None:
        self._nodes += nodes
        if self._nodes > MAX_NODES:
            self._fail(mark, f"the document grows past {MAX_NODES:,} nodes at {what} (aliases count every "
                       "node they repeat); a scenario needs a few hundred: is this an alias bomb?")

    def _check_scalar(self, node: yaml.ScalarNode) -> None:
        if node.tag == _INT_TAG and len(node.value) > MAX_INT_DIGITS:
            self._fail(node.start_mark, f"an integer of {len(node.value):,} characters; the limit is "
                       f"{MAX_INT_DIGITS} digits")
        found = _SURROGATE.search(node.value)
        if found:
            self._fail(node.start_mark, f"not valid Unicode text: lone surrogate \\u{ord(found.group()):04x} "
                       "(a string must be encodable as UTF-8 to reach an agent or a destination)")

    def _check_keys(self, node: yaml.MappingNode) -> None:
        first: dict[tuple[str, str], yaml.Node] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == _MERGE_TAG:
                continue
            earlier = first.setdefault((key.tag, key.value), key)
            if earlier is not key:
                self._path.append(key.value)
                self._fail(key.start_mark, f"duplicate key {key.value!r}, first at line "
                           f"{earlier.start_mark.line + 1}: YAML would keep only the last; remove one")

    def _fail(self, mark: Any, problem: str) -> None:
        raise _LimitExceeded(mark, self._path, problem)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError, KeyError, TypeError, IndexError) as exc:  # !!timestamp 2001-13-45
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {node.tag.rsplit(':', 1)[-1]} value: {exc}", node.start_mark) from None


def suggest(value: str, valid: list[str]) -> list[str]:
    """'Did you mean' candidates: close names sharing the first word first (drop_the_response ->
    drop_response_after_commit rather than hold_response), then any close name."""
    head = value.split("_", 1)[0]
    same_head = [v for v in valid if v.split("_", 1)[0] == head]
    return (difflib.get_close_matches(value, same_head, n=1, cutoff=0.4)
            or difflib.get_close_matches(value, valid, n=1))


def unknown_name(what: str, value: Any, valid: list[str]) -> str:
    hint = suggest(str(value), valid)
    did_you_mean = f"; did you mean {hint[0]!r}?" if hint else ""
    return f"unknown {what} {value!r}{did_you_mean} (valid: {', '.join(valid) or 'none declared'})"


def format_validation(path: Path, root: yaml.Node | None, exc: ValidationError, model: type[BaseModel], *,
                      locate: Callable[[tuple[Any, ...]], int] | None = None, prefix: tuple[Any, ...] = ()) -> str:
    """One line per error of ``exc`` (``model`` the root of the file at ``path``): ``file:line: key.path: message``,
    with "did you mean" from the valid names. ``locate`` finds a key path's line in a file that is not YAML (a
    TOML configuration), ``prefix`` is where ``model`` sits in that file (``tool.retry-harness``)."""
    where = locate or (lambda loc: line_of(root, loc))
    return "\n".join(f"{path}:{where(loc + _named_below(message))}: {dotted(prefix + loc) or '(top level)'}: "
                     f"{message}" for loc, message in validation_lines(exc, model))


def validation_lines(exc: ValidationError, model: type[BaseModel]) -> list[tuple[tuple[Any, ...], str]]:
    """Each error of ``exc`` (``model`` the root of what was validated) as its key path and the message people
    read: "did you mean" from the valid names, the valid choices, our own validators' sentences."""
    lines = []
    for err in exc.errors():
        loc = tuple(part for part in err["loc"] if not _is_union_tag(part))
        value = err.get("input")
        message = err["msg"]
        ctx = err.get("ctx") or {}
        if err["type"] == "extra_forbidden":
            valid = _valid_keys(loc[:-1], model)
            hint = suggest(str(loc[-1]), valid)
            message = (f"unknown key {loc[-1]!r}"
                       + (f"; did you mean {hint[0]!r}?" if hint else "")
                       + (f" (valid keys: {', '.join(valid)})" if valid else ""))
        elif err["type"] == "missing":
            message = "required key is missing"
        elif err["type"] == "string_pattern_mismatch" and ctx.get("pattern") == NAME_PATTERN:
            message = (f"{_short(value)} is not a valid name: use ASCII letters, digits, '_', '.' and '-', "
                       "starting with a letter or digit")
        elif err["type"] == "string_pattern_mismatch" and ctx.get("pattern") == IMAGE_PATTERN:
            message = (f"{_short(value)} is not an image reference such as 'my-agent:dev' or "
                       "'registry.local/team/agent:1.2' (no spaces; letters, digits and . _ / : @ + -)")
        elif err["type"] == "string_pattern_mismatch" and ctx.get("pattern") == ENV_NAME_PATTERN:
            message = (f"{_short(value)} is not an environment variable name: ASCII letters, digits and '_', "
                       "not starting with a digit")
        elif "expected" in ctx:
            choices = re.findall(r"'([^']*)'", str(ctx["expected"]))
            hint = suggest(str(value), choices)
            message = (f"{_short(value)} is not valid"
                       + (f"; did you mean {hint[0]!r}?" if hint else "")
                       + f" (valid: {ctx['expected']})")
        elif err["type"] == "value_error":
            message = message.removeprefix("Value error, ")  # our own validators' sentences
            if isinstance(value, (str, int, float, bool)) or value is None:  # not a loader's note (ApiFileError)
                message = f"{_short(value)}: {message}"
        else:
            message = f"{_short(value)}: {message}"
        lines.append((loc, message))
    return lines


def _named_below(message: str) -> tuple[str, ...]:
    """A model's own check names the key it is about first ("routes.create_order.effect_ref 'x' matches
    nothing"): that key's line is the one to show, not the model's."""
    m = re.match(r"([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+)[ :]", message)
    return tuple(m.group(1).split(".")) if m else ()


def _is_union_tag(part: Any) -> bool:
    # pydantic inserts tags such as 'function-after[...]' or a literal's name in union locations
    return isinstance(part, str) and ("[" in part or part.startswith("function-"))


def _valid_keys(loc: tuple[Any, ...], root_model: type[BaseModel]) -> list[str]:
    """Field names of the model at `loc` in a file of `root_model`, for 'did you mean' hints."""
    model: Any = root_model
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            # a dict key (destination name) or a list index: keep walking into the value type
            model = _inner_model(model)
            continue
        model = _inner_model(field.annotation)
    fields = getattr(model, "model_fields", None)
    if fields is None:
        return []
    return [name for name, field in fields.items() if not field.exclude]  # source, ...: set by the loader


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def line_of(root: yaml.Node | None, loc: tuple[Any, ...]) -> int:
    """Line (1-based) of the deepest YAML node that exists along `loc`."""
    node = root
    line = (node.start_mark.line + 1) if node is not None else 1
    for part in loc:
        child = None
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.value == str(part):
                    line = key.start_mark.line + 1
                    child = value
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None:
            break
        node = child
    return line


def dotted(loc: tuple[Any, ...]) -> str:
    """A key path as a message shows it, on one line: a key holding a control character, a line or paragraph
    separator is quoted as Python writes it ('tick\\nets'), never put raw into the message."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = str(part)
        if not text.isprintable() or not text:
            text = repr(text)
        out += f".{text}" if out else text
    return out


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
