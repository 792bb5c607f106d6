"""YAML scenarios: load, validate, and turn into typed objects.

A scenario declares the destinations (with their idempotency semantics), the faults the proxy
injects, the intents handed to the agent, and what a correct agent achieves. Validation errors name
the file, the line, the key path, the bad value and the valid choices; nothing is half-loaded.
"""

from __future__ import annotations

import difflib
import glob
import json
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, field_validator

from fake_destinations.api_spec import ApiSpec
from fake_destinations.spec import DestinationSpec, describe
from harness.contract import (
    AGENT_LOGS,
    DESTINATION_ENV_PREFIX,
    NAME_PATTERN,
    DestinationContract,
    agent_words,
    destination_env_name,
    env_suffix,
)
from harness.errors import ScenarioError
from harness.events import ResolutionState
from harness.proxy.rules import FaultRule, ProxyMode
from harness.resources import API_SCHEMA_FILE, SCENARIO_SCHEMA_FILE, schema_file

# names become file names (the evidence folder NAME-YYYYmmdd-HHMMSS-xxxxxx, a destination's
# NAME.ssh_host_key) and variable names: stay well under the 255-byte file name limit
MAX_NAME_LENGTH = 100


class Intent(BaseModel):
    """One external effect the agent is asked to bring about."""

    model_config = ConfigDict(extra="forbid")
    intent_id: str = Field(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH,
                           description="Stable name of the intent, unique in the scenario.")
    kind: str = Field(description="Operation kind offered by the destination, e.g. create_ticket.")
    destination: str = Field(description="Name of a destination declared under `destinations`.")
    params: dict[str, Any] = Field(default_factory=dict, description="Payload of the operation.")
    supersedes: str | None = Field(
        None, description="Intent id this intent replaces with a changed payload: a correct agent "
        "opens a new operation with supersedes_operation_id, it does not retry the old one.")
    delegate_to_worker: bool = Field(
        False, description="Ask the agent to hand this intent to a worker process (delegation "
        "scenarios): the worker must carry the owner's operation id.")


class AgentRestart(BaseModel):
    """Crash the agent mid-flight: SIGKILL it once the destinations committed `after_effects` effects
    (typically while the proxy holds the response), then start it again with the same state dir."""

    model_config = ConfigDict(extra="forbid")
    after_effects: int = Field(1, ge=1, description="Effects in the ledger that trigger the crash.")


class DestinationRestart(BaseModel):
    """Crash the destinations (SIGKILL) once they committed `after_effects` effects, then start them
    again on the same ports: the ledger and the idempotency keys survive, as in a real database."""

    model_config = ConfigDict(extra="forbid")
    after_effects: int = Field(1, ge=1, description="Effects in the ledger that trigger the crash.")


# an image reference as `docker run` takes it: [registry[:port]/]name[:tag][@digest]; docker itself says what else
# is wrong with one (an upper-case repository, say) when the harness starts it
IMAGE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
HARNESS_ENV_PREFIX = "HARNESS_"  # the contract's variables (harness.contract) and the operator's settings
AGENT_SHAPES = ("an agent is a command (shell words, a string: 'python -m mypkg.agent') or a container: "
                "{image: NAME, command: [...] or 'words', env: {NAME: value}}")


class ContainerAgent(BaseModel):
    """An agent shipped as an image: each run of it is a new container of `image` (host networking, the
    harness's user, the evidence folder mounted at its own path, so the contract's environment holds as it
    is), killed for a planned crash, stopped past the time limit, removed after every run (docs/containers.md,
    "An agent in a container")."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    image: str = Field(pattern=IMAGE_PATTERN, max_length=255,
                       description="The image, present on the Docker engine (the harness never pulls): "
                       "`docker build`/`docker load` it first; ours: `python -m harness images build`.")
    command: list[str] | str | None = Field(
        None, description="What runs in the container: a list of words, or one string split as a shell would "
        "(no shell runs). Absent: the image's own command. Run as given, in the image (`python` is the "
        "image's python, not the harness's).")
    env: dict[Annotated[str, Field(pattern=ENV_NAME_PATTERN)], str] = Field(
        default_factory=dict,
        description=f"Variables set in the container beside the contract's ({HARNESS_ENV_PREFIX}* names are the "
        "harness's, so refused here); the harness's own environment does not reach a container.")
    network: Literal["host", "isolated"] = Field(
        "host", description="`host`: the host's network (every loopback port: for an agent you trust); "
        "`isolated`: a network of its own that reaches the fault proxy (and the scenario's SSH hosts) and nothing "
        "else of the host, for an agent you did not write (docs/containers.md, the trust model).")

    @field_validator("command")
    @classmethod
    def _words(cls, v: list[str] | str | None) -> list[str] | None:
        if isinstance(v, str):
            try:
                return agent_words(v)
            except ValueError as exc:
                raise ValueError(f"the agent command {exc}") from None
        if v is not None:
            if not v:
                raise ValueError("is an empty list: give the words of a command, or leave command out to run "
                                 "the image's own")
            if any("\0" in word for word in v):
                raise ValueError("a word holds a NUL character, which no program argument can carry")
        return v

    @field_validator("env", mode="before")
    @classmethod
    def _env_values(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            return v
        out = {}
        for key, value in v.items():
            if isinstance(key, str) and key.startswith(HARNESS_ENV_PREFIX):
                raise ValueError(f"{key}: the {HARNESS_ENV_PREFIX}* variables are the harness's (the contract's, "
                                 "the operator's); name yours otherwise")
            if isinstance(value, bool):  # YAML's yes/no/on/off
                raise ValueError(f"{key}: YAML reads yes, no, on, off, true and false as a boolean ({value}), not "
                                 "as text: quote the value ('yes') to pass it as it is written")
            if isinstance(value, (int, float)):
                value = str(value)
            if isinstance(value, str) and "\0" in value:
                raise ValueError(f"{key}: holds a NUL character, which no environment variable can carry")
            out[key] = value
        return out

    @property
    def argv(self) -> list[str] | None:
        """The command's words (None: the image's own command)."""
        return None if self.command is None else list(self.command)

    @property
    def label(self) -> str:
        """How results name this agent: ``image:NAME`` and the command, as shell words."""
        return f"image:{self.image}" + (f" {shlex.join(self.command)}" if self.command else "")


def _agent_shape(value: Any) -> str:
    return "agent[image]" if isinstance(value, (dict, ContainerAgent)) else "agent[command]"


# a scenario's agent: a command (a process) or a container; the tags carry '[' so that error locations drop them
AgentDeclaration = Annotated[Annotated[str, Tag("agent[command]")] | Annotated[ContainerAgent, Tag("agent[image]")],
                             Discriminator(_agent_shape)]


def agent_label(agent: str | ContainerAgent) -> str:
    """How results and reports name an agent: its command, or a container agent's ``image:NAME command``."""
    return agent.label if isinstance(agent, ContainerAgent) else agent


def chosen_agent(command: str | None, image: str | None,
                 declared: str | ContainerAgent | None) -> str | ContainerAgent | None:
    """The agent a front end's options choose: ``--agent-image IMAGE`` runs ``--agent CMD`` in IMAGE (no CMD:
    the image's own command); ``--agent CMD`` alone, a process; neither, what the scenario declares (None:
    the engine's default). The options replace the scenario's agent whole (its env too)."""
    if image is not None:
        return container_agent(image, command)
    return command or declared


def container_agent(image: str, command: str | None, option: str = "--agent-image") -> ContainerAgent:
    """A ``ContainerAgent`` from front-end options; a ``ScenarioError`` naming the option when it is none."""
    try:
        return ContainerAgent(image=image, command=command)
    except ValidationError as exc:
        err = exc.errors()[0]
        what = "the command" if err["loc"][:1] == ("command",) else f"{option} {image!r}"
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "string_pattern_mismatch":
            message = "is not an image reference such as 'my-agent:dev' or 'registry.local/team/agent:1.2'"
        raise ScenarioError(f"{what}: {message}") from None


def agent_image_problem(value: str, option: str = "--agent-image") -> str | None:
    """Why ``value`` given to a front end's ``option`` is not an image reference, or None when it is one."""
    if not re.fullmatch(IMAGE_PATTERN, value) or len(value) > 255:
        return (f"{value!r} is not an image reference such as 'my-agent:dev' or 'registry.local/team/agent:1.2' "
                f"(an empty value, typically an unset variable, is an error too); leave {option} out to run the "
                "agent as a process")
    return None


class ProxySettings(BaseModel):
    """How the fault proxy sits between the agent and the HTTP destinations."""

    model_config = ConfigDict(extra="forbid")
    mode: ProxyMode = Field(
        "reverse", description="reverse: the agent gets proxy URLs and needs no settings; forward: "
        "HTTP(S)_PROXY; the -https modes go through mitmproxy's CA (its path handed to the agent as "
        "SSL_CERT_FILE and REQUESTS_CA_BUNDLE).")
    seed: int = Field(0, description="Seed of the probabilistic faults and jitter: same seed, same outcome.")


class Expectation(BaseModel):
    """What a correct agent achieves in this scenario."""

    model_config = ConfigDict(extra="forbid")
    verdict: Literal["pass", "fail"] = Field("pass", description="Verdict of the bundled reference agent.")
    effects: dict[str, Annotated[int, Field(ge=0)]] = Field(
        default_factory=dict, description="Distinct effects each destination must hold at the end.")
    states: dict[str, ResolutionState | list[ResolutionState]] = Field(
        default_factory=dict,
        description="Per intent id, the final operation state (or list of states) a correct agent may reach.")

    def allowed_states(self) -> dict[str, list[str]]:
        return {k: [v] if isinstance(v, str) else list(v) for k, v in self.states.items()}


class Limits(BaseModel):
    """How much of the agent's log the harness reads to judge a run (harness.limits; docs/checker.md,
    "Limits"): a log beyond one is not judged (INCOMPLETE, naming the limit), and stays on disk."""

    model_config = ConfigDict(extra="forbid")
    agent_log_bytes: int | None = Field(None, ge=1, description="Largest agent log (or trace) read, in bytes "
                                        "(default 268435456, 256 MiB).")
    line_bytes: int | None = Field(None, ge=1, description="Longest line of the agent log read, in UTF-8 bytes "
                                   "(default 1048576, 1 MiB).")
    operations: int | None = Field(None, ge=1, description="Most operations (distinct operation ids) read from "
                                   "the agent log (default 100000).")

    def given(self) -> dict[str, int]:
        """The limits this scenario sets (the others are the harness's defaults)."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


def _pattern_as_property_names(schema: dict[str, Any]) -> None:
    """pydantic publishes constrained dict keys as ``patternProperties``, which lets any other key
    through unchecked (and drops their length limit); ``propertyNames`` rejects it, as loading does."""
    (pattern, value), = schema.pop("patternProperties").items()
    schema["propertyNames"] = {"pattern": pattern, "maxLength": MAX_NAME_LENGTH}
    schema["additionalProperties"] = value


# what the agent writes: "events" (its audit log), "otel" (spans) or "none" (black-box); one truth in harness.contract
if TYPE_CHECKING:
    AgentLog = str
else:
    AgentLog = Literal[AGENT_LOGS]

DestinationName = Annotated[str, Field(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH)]


class Summary(BaseModel):
    """A scenario in two phrases, for the catalogue's table (docs/scenarios.md is made from them)."""

    model_config = ConfigDict(extra="forbid")
    happens: str = Field(min_length=1, description="What the scenario does to the agent, in a phrase.")
    correct_agent: str = Field(min_length=1, description="What a correct agent does about it, in a phrase.")


class Scenario(BaseModel):
    """A fault-injection scenario, as written in a YAML file (the bundled ones: `harness/scenarios/NAME.yaml`)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH,
                      description="Scenario name; `pytest --scenario NAME` selects it.")
    description: str = Field(min_length=1, description="What happens and what a correct agent does, for a person.")
    summary: Summary | None = Field(None, description="The description in two phrases, for a catalogue's table.")
    destinations: dict[DestinationName, DestinationSpec] = Field(
        min_length=1, json_schema_extra=_pattern_as_property_names,
        description="The fake destinations, by name. A name also makes the agent's "
        f"{DESTINATION_ENV_PREFIX}<NAME> variable, so it uses the same characters as other ids.")
    faults: list[FaultRule] = Field(default_factory=list)
    intents: list[Intent] = Field(min_length=1)
    agent: AgentDeclaration | None = Field(
        None, description="The agent of this scenario (default: the reference agent): a command, run as a "
        "process, or a container {image, command, env} (docs/containers.md, 'An agent in a container').")
    agent_log: AgentLog = Field(
        "events", description="What the agent writes: events (an audit log, judged by every rule), otel "
        "(OpenTelemetry spans only, OTLP JSON lines in HARNESS_TRACE_FILE: read as events and judged by the same "
        "rules; docs/otel.md) or none (a program that writes no audit log, e.g. a vendor SDK: judged in black-box "
        "mode, from the proxy journal and the effect ledger alone; docs/checker.md, 'Black-box mode').")
    agent_timeout_seconds: float = Field(30.0, gt=0, le=600, description="Wall-clock limit of one agent run.")
    restart_agent: AgentRestart | None = None
    restart_destinations: DestinationRestart | None = None
    proxy: ProxySettings = Field(default_factory=ProxySettings)
    expect: Expectation = Field(default_factory=Expectation)
    limits: Limits = Field(default_factory=Limits)

    source: Path | None = Field(None, exclude=True, description="File the scenario was loaded from.")

    @field_validator("agent_log", mode="before")
    @classmethod
    def _agent_log_not_a_yaml_boolean(cls, v: Any) -> Any:
        if isinstance(v, bool):  # `agent_log: no` or `off` is YAML for false
            raise ValueError(f"YAML reads no, off, yes and on as booleans, not as a choice; valid: "
                             f"{', '.join(repr(a) for a in AGENT_LOGS[:-1])} or {AGENT_LOGS[-1]!r} (agent_log: none "
                             "for a program that writes no audit log, otel for one that writes only spans)")
        return v

    @field_validator("agent", mode="before")
    @classmethod
    def _agent_shape(cls, v: Any) -> Any:
        if v is not None and not isinstance(v, (str, dict, ContainerAgent)):
            raise ValueError(AGENT_SHAPES)
        return v

    @field_validator("agent")
    @classmethod
    def _agent_command(cls, v: str | ContainerAgent | None) -> str | ContainerAgent | None:
        # fail at load, naming the line, rather than after the destinations and the proxy started
        if isinstance(v, str):
            try:
                agent_words(v)
            except ValueError as exc:
                raise ValueError(f"the agent command {exc}") from None
        return v

    def contracts(self) -> dict[str, DestinationContract]:
        """The agent-facing contract of each destination."""
        return {name: describe(spec) for name, spec in self.destinations.items()}


SCHEMA_PATH = schema_file(SCENARIO_SCHEMA_FILE)  # package data (harness.resources)
# a name, not a download: editors find the file through each catalogue file's yaml-language-server
# modeline (a path relative to the scenario), or `python -m harness schema scenario`
SCENARIO_SCHEMA_ID = "https://retry-harness.invalid/schemas/scenario.schema.json"  # as the audit event schema's


API_SCHEMA_PATH = schema_file(API_SCHEMA_FILE)  # an api declaration in its own file (`api: ./file.yaml`, profiles)
API_SCHEMA_ID = "https://retry-harness.invalid/schemas/api.schema.json"


def schema_text() -> str:
    return json.dumps(scenario_json_schema(), indent=2, sort_keys=True) + "\n"


def api_schema_text() -> str:
    schema = ApiSpec.model_json_schema()
    schema.update({"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": API_SCHEMA_ID,
                   "title": "retry-harness api declaration (a generic destination)"})
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_schema(path: Path = SCHEMA_PATH, api_path: Path = API_SCHEMA_PATH) -> Path:
    """Write the published scenario and api declaration schemas (a test keeps the files up to date)."""
    path.write_text(schema_text(), encoding="utf-8")
    api_path.write_text(api_schema_text(), encoding="utf-8")
    return path


def scenario_json_schema() -> dict[str, Any]:
    """The published JSON Schema of scenario files."""
    schema = Scenario.model_json_schema()
    schema["properties"].pop("source", None)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCENARIO_SCHEMA_ID
    schema["title"] = "retry-harness scenario"
    return schema


# -- finding scenario files ------------------------------------------------------------------------

def resolve(selector: str, search_dirs: list[Path]) -> list[Path]:
    """Scenario files for a `--scenario` value: a path, a name, a glob, `all`, or a glob of files
    (`path/*.yaml`, from the current folder)."""
    as_path = Path(selector)
    if selector.endswith((".yaml", ".yml")) and as_path.is_file():
        return [as_path.resolve()]
    if selector.endswith((".yaml", ".yml")) and any(ch in selector for ch in "*?["):
        files = sorted(Path(f).resolve() for f in glob.glob(selector) if Path(f).is_file())
        if not files:
            raise ScenarioError(f"no scenario file matches {selector!r} (looked from {Path.cwd()}); a glob of files "
                                "names .yaml files, e.g. 'scenarios/*.yaml'")
        return files
    dirs = [d for d in dict.fromkeys(search_dirs) if d.is_dir()]
    pattern = "*" if selector == "all" else selector
    for directory in dirs:
        found = sorted(p.resolve() for p in directory.glob(f"{pattern}.yaml"))
        if found:
            return found
    known = sorted({p.stem for d in dirs for p in d.glob("*.yaml")})
    hint = _suggest(selector, known)
    did_you_mean = f" Did you mean {hint[0]!r}?" if hint else ""
    raise ScenarioError(
        f"no scenario {selector!r} in {', '.join(str(d) for d in dirs) or 'no scenario folder'}."
        f"{did_you_mean} Known scenarios: {', '.join(known) or 'none'}. "
        "Give a name, a glob such as 'response_*', 'all', or a path to a .yaml file.")


# -- loading and validation ------------------------------------------------------------------------

def load(path: str | Path) -> Scenario:
    """Load and validate one scenario file."""
    path = Path(path)
    data, root = load_yaml_mapping(path, "a scenario is a mapping with keys name, description, destinations, "
                                         "intents")
    try:
        # the folder a destination's `api: ./file.yaml` is read from
        scenario = Scenario.model_validate({**data, "source": path}, context={"scenario_dir": path.parent})
    except ValidationError as exc:
        raise ScenarioError(_format_validation(path, root, exc)) from None
    _check_references(path, root, scenario)
    return scenario


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
    return _format_validation(path, root, exc, model)


class _ScenarioDumper(yaml.SafeDumper):
    """Multi-line strings (descriptions) as literal blocks, as the catalogue writes them."""


_ScenarioDumper.add_representer(str, lambda dumper, value: dumper.represent_scalar(
    "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None))


def scenario_dumper() -> type[yaml.SafeDumper]:
    """The YAML dumper of scenario files (multi-line strings as literal blocks)."""
    return _ScenarioDumper


def scenario_yaml(scenario: Scenario) -> str:
    """A scenario as a file `load` reads back to an equal scenario: what was set, without defaults."""
    data = scenario.model_dump(mode="json", exclude={"source"}, exclude_defaults=True)
    for restart in ("restart_agent", "restart_destinations"):  # a crash with default settings is still a crash
        if getattr(scenario, restart) is not None:
            data[restart] = getattr(scenario, restart).model_dump(mode="json")
    return yaml.dump(data, Dumper=_ScenarioDumper, sort_keys=False, allow_unicode=True, width=110)


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
        self.where = _dotted(tuple(path[:8])) + ("..." if len(path) > 8 else "") or "(top level)"
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


def _check_references(path: Path, root: yaml.Node | None, scenario: Scenario) -> None:
    """Cross-references pydantic cannot see: intents and faults name declared destinations and kinds."""
    problems: list[tuple[tuple[Any, ...], str]] = []
    names = list(scenario.destinations)
    contracts = scenario.contracts()
    by_variable: dict[str, str] = {}
    for name in names:
        first = by_variable.setdefault(env_suffix(name), name)
        if first != name:
            problems.append((("destinations", name), (
                f"destinations {first!r} and {name!r} both become the agent's variable "
                f"{destination_env_name(name)}: the agent could not tell them apart; rename one")))
    seen: set[str] = set()
    for i, intent in enumerate(scenario.intents):
        loc: tuple[Any, ...] = ("intents", i)
        if intent.intent_id in seen:
            problems.append((loc + ("intent_id",), f"duplicate intent id {intent.intent_id!r}"))
        if intent.supersedes is not None and intent.supersedes == intent.intent_id:
            problems.append((loc + ("supersedes",), f"intent {intent.intent_id!r} supersedes itself; "
                             "supersedes names an earlier intent whose payload this one changes"))
        elif intent.supersedes is not None and intent.supersedes not in seen:
            problems.append((loc + ("supersedes",), _unknown(
                "earlier intent id", intent.supersedes, sorted(seen))))
        seen.add(intent.intent_id)
        if intent.destination not in scenario.destinations:
            problems.append((loc + ("destination",), _unknown("destination", intent.destination, names)))
            continue
        kinds = list(contracts[intent.destination].operations)
        if kinds and intent.kind not in kinds:
            problems.append((loc + ("kind",), _unknown(
                f"operation kind for {intent.destination!r}", intent.kind, kinds)))
    for i, rule in enumerate(scenario.faults):
        dest = rule.match.destination
        if dest is not None and dest not in scenario.destinations:
            problems.append((("faults", i, "match", "destination"), _unknown("destination", dest, names)))
    for intent_id in scenario.expect.states:
        if intent_id not in seen:
            problems.append((("expect", "states", intent_id), _unknown("intent id", intent_id, sorted(seen))))
    for dest in scenario.expect.effects:
        if dest not in scenario.destinations:
            problems.append((("expect", "effects", dest), _unknown("destination", dest, names)))
    if problems:
        raise ScenarioError("\n".join(
            f"{path}:{_line_of(root, loc)}: {_dotted(loc)}: {msg}" for loc, msg in problems))


def _suggest(value: str, valid: list[str]) -> list[str]:
    """'Did you mean' candidates: close names sharing the first word first (drop_the_response ->
    drop_response_after_commit rather than hold_response), then any close name."""
    head = value.split("_", 1)[0]
    same_head = [v for v in valid if v.split("_", 1)[0] == head]
    return (difflib.get_close_matches(value, same_head, n=1, cutoff=0.4)
            or difflib.get_close_matches(value, valid, n=1))


def _unknown(what: str, value: Any, valid: list[str]) -> str:
    hint = _suggest(str(value), valid)
    did_you_mean = f"; did you mean {hint[0]!r}?" if hint else ""
    return f"unknown {what} {value!r}{did_you_mean} (valid: {', '.join(valid) or 'none declared'})"


def _format_validation(path: Path, root: yaml.Node | None, exc: ValidationError,
                       model: type[BaseModel] | None = None) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(part for part in err["loc"] if not _is_union_tag(part))
        value = err.get("input")
        message = err["msg"]
        ctx = err.get("ctx") or {}
        if err["type"] == "extra_forbidden":
            valid = _valid_keys(loc[:-1], model or Scenario)
            hint = _suggest(str(loc[-1]), valid)
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
            hint = _suggest(str(value), choices)
            message = (f"{_short(value)} is not valid"
                       + (f"; did you mean {hint[0]!r}?" if hint else "")
                       + f" (valid: {ctx['expected']})")
        elif err["type"] == "value_error":
            message = message.removeprefix("Value error, ")  # our own validators' sentences
            if not isinstance(value, (dict, list)):
                message = f"{_short(value)}: {message}"
        else:
            message = f"{_short(value)}: {message}"
        lines.append(f"{path}:{_line_of(root, loc + _named_below(message))}: {_dotted(loc) or '(top level)'}: "
                     f"{message}")
    return "\n".join(lines)


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
    return [name for name in fields if name != "source"]


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _line_of(root: yaml.Node | None, loc: tuple[Any, ...]) -> int:
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


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


if __name__ == "__main__":  # python -m harness.scenario: regenerate the published schema
    print(write_schema())
