"""A project's own configuration: its agent, the destinations its agent calls and the intents to hand it.

Read from ``[tool.retry-harness]`` in pyproject.toml, or from a ``retry-harness.toml`` with the same keys (as ruff
and mypy do: the first of the two found walking up from the folder a command runs in; retry-harness.toml wins
beside a pyproject.toml). The CLI and the pytest plugin read it the same way (``find_project``), and
``harness.catalogue`` puts the catalogue's scenarios on its destinations. docs/your-api.md is the user's reference.

    [tool.retry-harness]
    agent = "python billing_agent.py refund --order {params.order_id} --amount {params.amount}"
    mode = "black-box"

    [tool.retry-harness.destinations.billing]
    openapi = "openapi/billing.yaml"
    env = { BILLING_URL = "{url}" }

    [[tool.retry-harness.intents]]
    intent_id = "refund-1042"
    destination = "billing"
    operation = "createRefund"
    params = { order_id = "ord_1042", amount = 1999 }

Every error names the file, the line, the key path, the bad value and what is valid (``ProjectError``).
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fake_destinations.services import API_SERVICE, MCP_SERVICE, SERVICES
from fake_destinations.spec import ApiFileError, DestinationSpec, describe, read_api_files
from harness.contract import NAME_PATTERN, agent_words
from harness.errors import ProjectError
from harness.scenario import MAX_NAME_LENGTH, Intent
from harness.yaml_files import dotted, format_validation, unknown_name

CONFIG_FILE = "retry-harness.toml"
PYPROJECT_FILE = "pyproject.toml"
TABLE = ("tool", "retry-harness")
MAX_CONFIG_BYTES = 1_000_000
# how the agent's work is judged: black-box from the wire and the ledger; events: it writes the contract's audit
# log; otel: spans only (the scenario's agent_log, spelled as a team says it)
MODES = {"black-box": "none", "events": "events", "otel": "otel"}
# the keys of a destination table that say what the destination is; the rest describe or override it
KINDS_OF_DESTINATION = ("openapi", "api", "service", "image")
PLACEHOLDER = re.compile(r"(?<!\{)\{(?!\{)([^{}]*)\}")


class IntentTable(BaseModel):
    """One ``[[tool.retry-harness.intents]]``: an effect the agent is asked to bring about."""

    model_config = ConfigDict(extra="forbid")
    intent_id: str = Field(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH,
                           description="Stable name of the intent, unique in the configuration.")
    destination: str = Field(description="A destination of [tool.retry-harness.destinations].")
    operation: str = Field(min_length=1, description="The write it calls: an OpenAPI operationId, 'POST /v1/refunds' "
                           "(method and path as the document writes it), or a route or operation kind's name.")
    params: dict[str, Any] = Field(default_factory=dict, description="Its payload.")


class ProjectTable(BaseModel):
    """``[tool.retry-harness]``."""

    model_config = ConfigDict(extra="forbid")
    agent: str | None = Field(None, description="The agent: a command template filled from each intent "
                              "({params.NAME}, {intent_id}, {kind}, {destination}) and run once per intent, or a "
                              "command (no placeholder) that reads the intents file as the contract says.")
    mode: Literal["black-box", "events", "otel"] = Field(
        "black-box", description="black-box: judged from the wire and the ledger (an agent that writes no log); "
        "events: the agent writes the contract's audit log; otel: OpenTelemetry spans.")
    agent_timeout_seconds: float | None = Field(None, gt=0, le=600, description="Wall-clock limit of one agent run "
                                                "(default: each scenario's).")
    delegation: bool = Field(False, description="The agent hands intents to a worker process as the contract's "
                             "delegation section says (the delegated_worker scenario applies).")
    scenarios: list[str] = Field(default_factory=list, description="Folders of the team's own scenario files, "
                                 "relative to the configuration (default: ./scenarios when it exists).")
    destinations: dict[str, dict[str, Any]] = Field(min_length=1, description="The destinations the agent calls, by "
                                                    "name (the name makes HARNESS_DESTINATION_<NAME>).")
    intents: list[IntentTable] = Field(min_length=1, description="What the agent is asked to do.")

    @field_validator("destinations")
    @classmethod
    def _names(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name in value:
            if not re.fullmatch(NAME_PATTERN, name) or len(name) > MAX_NAME_LENGTH:
                raise ValueError(f"{name!r} is not a valid destination name: ASCII letters, digits, '_', '.' and '-', "
                                 "starting with a letter or digit")
        return value


@dataclass(frozen=True)
class Project:
    """A project's configuration, read and checked: what ``harness.catalogue`` needs to put the catalogue on it."""

    path: Path                        # the file it was read from
    folder: Path                      # its folder: the agent runs there, relative paths start there
    agent_words: tuple[str, ...] | None
    mode: str                         # a key of MODES
    destinations: dict[str, DestinationSpec]
    intents: tuple[Intent, ...]
    operations: dict[str, dict[str, str]]  # destination -> every spelling of a write -> its kind
    scenario_dirs: tuple[Path, ...]
    agent_timeout_seconds: float | None = None
    delegation: bool = False
    inferences: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # destination -> what was inferred
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)  # destination -> its table as written
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)  # what is worked out once from it

    @property
    def agent_log(self) -> str:
        return MODES[self.mode]

    @property
    def per_intent(self) -> bool:
        """The agent is a template run once per intent (it names a placeholder), not a command that reads the
        intents file."""
        return any(PLACEHOLDER.search(word) for word in self.agent_words or ())

    def agent_command(self) -> str | None:
        """The command the engine runs: the agent through ``harness.intent_runner`` (in the configuration's folder;
        once per intent for a template; in black-box mode its exit status left to the evidence)."""
        if self.agent_words is None:
            return None
        from harness.intent_runner import runner_command

        argv = runner_command(list(self.agent_words), exit_zero=self.mode == "black-box", cwd=self.folder,
                              per_intent=self.per_intent)
        return shlex.join(argv)

    def where(self, *keys: Any) -> str:
        return dotted(TABLE + keys)


def find_project(start: Path | None = None) -> Path | None:
    """The configuration file that applies in ``start`` (default: the current folder): walking up, the first folder
    with a retry-harness.toml, or a pyproject.toml holding [tool.retry-harness]; None when there is none."""
    folder = (start or Path.cwd()).resolve()
    for here in (folder, *folder.parents):
        own = here / CONFIG_FILE
        if own.is_file():
            return own
        pyproject = here / PYPROJECT_FILE
        if pyproject.is_file() and _has_our_table(pyproject):
            return pyproject
    return None


def _has_our_table(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")[:MAX_CONFIG_BYTES]
    except OSError:
        return False
    return bool(re.search(r"^\s*\[\[?\s*tool\s*\.\s*[\"']?retry-harness[\"']?\s*[.\]]", text, re.MULTILINE))


def load_project(path: Path) -> Project:
    """Read and check the configuration at ``path``; a ``ProjectError`` naming the place of every problem."""
    path = path.resolve()
    text = _read(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"\(at line (\d+)", str(exc))
        raise ProjectError(f"{path}:{line.group(1) if line else 1}: not valid TOML: {exc}") from None
    in_pyproject = path.name != CONFIG_FILE
    table = data.get("tool", {}).get("retry-harness") if in_pyproject else data
    prefix: tuple[Any, ...] = TABLE if in_pyproject else ()
    lines = _key_lines(text)

    def locate(loc: tuple[Any, ...]) -> int:
        whole = prefix + loc
        for end in range(len(whole), 0, -1):
            if whole[:end] in lines:
                return lines[whole[:end]]
        return 1

    def fail(loc: tuple[Any, ...], message: str) -> ProjectError:
        return ProjectError(f"{path}:{locate(loc)}: {dotted(prefix + loc)}: {message}")

    if not isinstance(table, dict):
        raise ProjectError(f"{path}:1: no [{'.'.join(TABLE)}] table" if in_pyproject else f"{path}:1: empty")
    try:
        declared = ProjectTable.model_validate(table)
    except ValidationError as exc:
        raise ProjectError(format_validation(path, None, exc, ProjectTable, locate=locate, prefix=prefix)) from None
    folder = path.parent
    words = _agent(declared, fail)
    destinations: dict[str, DestinationSpec] = {}
    operations: dict[str, dict[str, str]] = {}
    inferences: dict[str, tuple[Any, ...]] = {}
    for name, entry in declared.destinations.items():
        spec, spellings, inferred = _destination(name, entry, folder, path, locate, prefix, fail)
        destinations[name], operations[name], inferences[name] = spec, spellings, inferred
    intents = _intents(declared, destinations, operations, fail)
    if words is not None and PLACEHOLDER.search(" ".join(words)):
        from harness.intent_runner import check_template

        try:
            check_template(list(words), [i.model_dump() for i in intents])
        except ValueError as exc:
            raise fail(("agent",), str(exc)) from None
    dirs = [folder / d for d in declared.scenarios] or [folder / "scenarios"]
    for i, d in enumerate(declared.scenarios):
        if not (folder / d).is_dir():
            raise fail(("scenarios", i), f"{d!r} is not a folder (relative to {folder})")
    return Project(path=path, folder=folder, agent_words=words, mode=declared.mode, destinations=destinations,
                   intents=tuple(intents), operations=operations, scenario_dirs=tuple(dirs),
                   agent_timeout_seconds=declared.agent_timeout_seconds, delegation=declared.delegation,
                   inferences=inferences, tables={n: dict(t) for n, t in declared.destinations.items()})


def _read(path: Path) -> str:
    try:
        if not path.is_file():
            raise ProjectError(f"{path}: not a file (a configuration is a pyproject.toml or a {CONFIG_FILE})")
        with path.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ProjectError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ProjectError(f"{path}: larger than {MAX_CONFIG_BYTES:,} bytes; a configuration is a few dozen lines")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProjectError(f"{path}: not UTF-8 text (byte {exc.start}); TOML files are UTF-8") from None


def _agent(declared: ProjectTable, fail: Callable[[tuple[Any, ...], str], ProjectError]) -> tuple[str, ...] | None:
    if declared.agent is None:
        return None
    try:
        return tuple(agent_words(declared.agent))
    except ValueError as exc:
        raise fail(("agent",), f"{declared.agent!r}: the agent command {exc}") from None


def _destination(name: str, entry: dict[str, Any], folder: Path, path: Path, locate: Callable[[tuple[Any, ...]], int],
                 prefix: tuple[Any, ...], fail: Callable[[tuple[Any, ...], str], ProjectError],
                 ) -> tuple[DestinationSpec, dict[str, str], tuple[Any, ...]]:
    """One destination table as the scenario's ``DestinationSpec``, the spellings of its writes, what was inferred."""
    loc = ("destinations", name)
    given = [k for k in KINDS_OF_DESTINATION if k in entry]
    if not given:
        raise fail(loc, "say what the destination is: openapi = \"path/to/openapi.yaml\" (your API's document), "
                        "api = \"a declaration file or a bundled profile\", service = \"tickets\" (a bundled fake) or "
                        "image = \"your-service:dev\" (your own service in a container)")
    if "openapi" in entry and len(given) > 1:
        raise fail(loc + (given[1],), f"openapi already says what {name!r} is; give one of "
                                      f"{', '.join(KINDS_OF_DESTINATION)} (an image's contract is api or service)")
    env = entry.get("env", {})
    if not isinstance(env, dict):
        raise fail(loc + ("env",), f"{env!r:.80}: a table of variable = template, e.g. "
                                   "{ BILLING_URL = \"{url}\" }")
    rest = {k: v for k, v in entry.items() if k not in ("env", "openapi")}
    spellings: dict[str, str] = {}
    inferred: tuple[Any, ...] = ()
    if "openapi" in entry:
        document = entry["openapi"]
        if not isinstance(document, str) or not document:
            raise fail(loc + ("openapi",), f"{document!r:.80}: the path of an OpenAPI 3.0 or 3.1 document (YAML or "
                                           "JSON), relative to the configuration")
        from harness.openapi import api_from_openapi

        where = f"{path}:{locate(loc + ('openapi',))}: {dotted(prefix + loc)}"
        api = api_from_openapi(folder / document, rest, where=where)
        data: dict[str, Any] = {"api": api.declaration, **api.destination_options}
        spellings = dict(api.operations)
        inferred = tuple(api.inferences)
    else:
        data = read_api_files({name: rest}, folder)[name]
        if isinstance(data.get("api"), ApiFileError):
            raise fail(loc + ("api",), data["api"].message)
    if env:
        data["agent_env"] = env
    try:
        spec = DestinationSpec.model_validate(data)
    except ValidationError as exc:
        raise ProjectError(format_validation(path, None, exc, DestinationSpec, prefix=prefix + loc,
                                             locate=lambda sub: locate(loc + sub))) from None
    contract = describe(spec)
    for kind, operation in contract.operations.items():
        spellings.setdefault(kind, kind)
        if operation.path and operation.method not in ("EXEC",):
            spellings.setdefault(f"{operation.method} {operation.path}", kind)
    if spec.service not in (API_SERVICE, MCP_SERVICE) and spec.service in SERVICES:
        for op in SERVICES[spec.service].operations:
            spellings.setdefault(op.kind, op.kind)
    return spec, spellings, inferred


def _intents(declared: ProjectTable, destinations: dict[str, DestinationSpec], operations: dict[str, dict[str, str]],
             fail: Callable[[tuple[Any, ...], str], ProjectError]) -> list[Intent]:
    intents: list[Intent] = []
    seen: set[str] = set()
    for i, table in enumerate(declared.intents):
        loc = ("intents", i)
        if table.intent_id in seen:
            raise fail(loc + ("intent_id",), f"{table.intent_id!r} names two intents; each needs its own")
        seen.add(table.intent_id)
        if table.destination not in destinations:
            raise fail(loc + ("destination",), unknown_name("destination", table.destination, list(destinations)))
        spellings = operations[table.destination]
        kind = spellings.get(table.operation) or spellings.get(_method_upper(table.operation))
        if kind is None:
            raise fail(loc + ("operation",), unknown_name(f"write of {table.destination!r}", table.operation,
                                                      list(spellings)))
        intents.append(Intent(intent_id=table.intent_id, kind=kind, destination=table.destination,
                              params=table.params))
    return intents


def _method_upper(operation: str) -> str:
    method, _, rest = operation.strip().partition(" ")
    return f"{method.upper()} {rest.strip()}" if rest else operation


# -- where each key is: TOML readers give values, not lines ------------------------------------------------------

def _key_lines(text: str) -> dict[tuple[Any, ...], int]:
    """The line of each table header and each ``key =`` (the first line where a key path shows), so that an error
    names the line; arrays of tables are numbered as the parser numbers them."""
    lines: dict[tuple[Any, ...], int] = {}
    table: tuple[Any, ...] = ()
    counts: dict[tuple[Any, ...], int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if m := re.match(r"^\[\[\s*([^\[\]]+?)\s*\]\]", line):
            path = _split_key(m.group(1))
            counts[path] = counts.get(path, -1) + 1
            table = (*path, counts[path])
            lines.setdefault(path, number)
            lines[table] = number
        elif m := re.match(r"^\[\s*([^\[\]]+?)\s*\]", line):
            table = _split_key(m.group(1))
            lines.setdefault(table, number)
        elif m := re.match(r"^((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)"
                           r"\s*=", line):
            key = (*table, *_split_key(m.group(1)))
            lines.setdefault(key, number)
            # an inline table's keys on the same line: `env = { BILLING_URL = "{url}" }`
            for inner in re.finditer(r"[{,]\s*([A-Za-z0-9_-]+)\s*=", line[m.end():]):
                lines.setdefault((*key, inner.group(1)), number)
    return lines


def _split_key(text: str) -> tuple[str, ...]:
    return tuple(part.strip().strip("\"'") for part in re.findall(r"\"[^\"]*\"|'[^']*'|[^.]+", text))

