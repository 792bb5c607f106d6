"""YAML scenarios: load, validate, and turn into typed objects.

A scenario declares the destinations (with their idempotency semantics), the faults the proxy
injects, the intents handed to the agent, and what a correct agent achieves. Validation errors name
the file, the line, the key path, the bad value and the valid choices; nothing is half-loaded.
"""

from __future__ import annotations

import glob
import json
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, ValidationError, field_validator

from fake_destinations.api_spec import ApiSpec
from fake_destinations.services import MCP_SERVICE
from fake_destinations.spec import DestinationSpec, describe, read_api_files
from harness.contract import (
    AGENT_LOGS,
    DESTINATION_ENV_PREFIX,
    ENV_NAME_PATTERN,
    HARNESS_ENV_PREFIX,
    IMAGE_PATTERN,
    MCP_TRANSPORTS,
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
from harness.yaml_files import dotted, format_validation, line_of, load_yaml_mapping, suggest, unknown_name

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
AGENT_SHAPES = ("an agent is a command (shell words, a string: 'python -m mypkg.agent') or a container: "
                "{image: NAME, command: [...] or 'words', env: {NAME: value}}")


class ContainerAgent(BaseModel):
    """An agent shipped as an image: each run of it is a new container of `image` (host networking, the
    harness's user, the contract's files mounted at their own paths, so the contract's environment holds as it
    is, and nothing else of the evidence folder), killed for a planned crash, stopped past the time limit, given
    the late window after it exits and removed after every run (docs/containers.md, "An agent in a container")."""

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


def chosen_agent(command: str | ContainerAgent | None, image: str | None, declared: str | ContainerAgent | None,
                 *, configured: str | None = None, default: str | None = None,
                 option: str = "--agent-image") -> str | ContainerAgent | None:
    """The agent a run uses, chosen the one way for the CLI, the plugin and the engine: a ``ContainerAgent`` given
    as it is; an image (``--agent-image IMAGE``, ``option``) runs ``command`` in it (no command: the image's own);
    else ``command`` (``--agent CMD``: a process); else what the scenario declares (``declared``); else
    ``configured`` (the plugin's ini option retry_harness_agent); else ``default`` (None: the engine's, the
    bundled reference agent). The options replace the scenario's agent whole (its env too)."""
    if isinstance(command, ContainerAgent):
        return command
    if image:
        return container_agent(image, command, option)
    return command or declared or configured or default


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


def _effect_count(value: Any) -> Any:
    """One count, or the counts a correct agent may leave: checked here, so that a bad value reads as one error
    and not as one per branch of the union."""
    counts = value if isinstance(value, list) else [value]
    if not counts or not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
        raise ValueError("expected a count of effects (a whole number) or a non-empty list of counts")
    if any(c < 0 for c in counts):
        raise ValueError("Input should be greater than or equal to 0")
    return value


EffectCount = Annotated[Annotated[int, Field(ge=0)] | list[Annotated[int, Field(ge=0)]], BeforeValidator(_effect_count)]


class Expectation(BaseModel):
    """What a correct agent achieves in this scenario."""

    model_config = ConfigDict(extra="forbid")
    verdict: Literal["pass", "fail"] = Field("pass", description="Verdict of the bundled reference agent.")
    effects: dict[str, EffectCount] = Field(
        default_factory=dict, description="Distinct effects each destination must hold at the end (or the list of "
        "counts a correct agent may leave: an operator-approved rerun of a destructive command adds one).")
    states: dict[str, ResolutionState | list[ResolutionState]] = Field(
        default_factory=dict,
        description="Per intent id, the final operation state (or list of states) a correct agent may reach.")

    def allowed_states(self) -> dict[str, list[str]]:
        return {k: [v] if isinstance(v, str) else list(v) for k, v in self.states.items()}

    def allowed_effects(self) -> dict[str, list[int]]:
        return {k: [v] if isinstance(v, int) else list(v) for k, v in self.effects.items()}


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




class Needs(BaseModel):
    """What a catalogue scenario needs of a destination to put an agent in its position: a project's own
    destination takes the scenario's role when it has all of it (``harness.catalogue``); else the scenario is not
    applicable to it, with the reason ``unmet`` gives. The scenario's own destination meets its needs (checked at
    load)."""

    model_config = ConfigDict(extra="forbid")
    transport: Literal["http", "ssh", "mcp"] = Field("http", description="How the agent reaches it: http, ssh or mcp.")
    write: Literal["create", "create_async", "exec", "tool"] = Field(
        "create", description="The write the fault lands on: create (an HTTP write that commits and answers with "
        "the new resource), create_async (answered 202 with an operation to poll), exec (an SSH command), tool "
        "(an MCP tool call with an effect).")
    idempotency: Literal["keyed", "natural_key", "none", "any"] = Field(
        "any", description="keyed: the write deduplicates on a key the client sends (a header, a body field, a "
        "tool argument); natural_key: on a field of the payload; none: every write commits; any.")
    lookup: Literal["yes", "no", "any"] = Field("any", description="A lookup by client reference: yes, no, any.")
    settle: Literal["key_or_lookup", "any"] = Field(
        "any", description="key_or_lookup: the destination offers a way to settle a lost answer (a key or a "
        "lookup), so a correct agent closes the operation succeeded.")
    intents: int = Field(1, ge=1, le=2, description="Intents of one write the scenario takes (two: the first "
                         "two of the same destination and operation, in the configuration's order).")
    families: list[str] | None = Field(None, description="ssh: the command family of each intent, in order "
                                       "(set_state, append, destructive).")
    delegation: bool = Field(False, description="The agent hands an intent to a worker process (the contract's "
                             "delegation): a project says its agent does with `delegation = true`.")
    annotations: dict[str, bool] | None = Field(
        None, description="mcp: annotations the scenario publishes on the tool, whatever the server says (the "
        "fault: a hint that lies).")

    def unmet(self, name: str, contract: DestinationContract, kinds: Sequence[str]) -> str | None:
        """Why destination ``name`` (its ``contract``, the intents' operation ``kinds``) cannot take this role,
        in a phrase a user reads ("billing declares no lookup"); None when it can."""
        transport = contract.reached_over
        if transport != self.transport:
            return f"{name} is reached over {transport}, and this scenario's faults are on {self.transport}"
        operations = [contract.operations[k] for k in kinds if k in contract.operations]
        if self.write == "create_async" and contract.status is None:
            return (f"{name} declares no asynchronous write (a 202 Accepted with an operation to poll)")
        if self.families is not None:
            families = [op.family for op in operations]
            if families[:len(self.families)] != self.families:
                return (f"{name}'s intents run commands of the families {', '.join(map(str, families)) or 'none'}, "
                        f"and this scenario needs {', '.join(self.families)} in that order")
        style = contract.idempotency.style
        keyed = style in ("stripe", "ietf", "client_token")
        if self.idempotency == "keyed" and not keyed:
            return (f"{name} declares no idempotency key (style {style!r}): a retry under a key is not what it "
                    "offers")
        if self.idempotency == "natural_key" and style != "natural_key":
            return f"{name} does not deduplicate on a natural key (style {style!r})"
        if self.idempotency == "none" and style != "none":
            return (f"{name} deduplicates writes (style {style!r}): this scenario is about a destination that does "
                    "not")
        lookup = contract.lookup
        has_lookup = lookup is not None
        if self.lookup == "yes" and not has_lookup:
            return (f"{name} declares no lookup: after a lost answer your agent can only retry under the key or "
                    "ask" if keyed else f"{name} declares no lookup, and no key: a lost answer stays unknown")
        if self.lookup == "no" and lookup is not None:
            return (f"{name} declares a lookup ({lookup.path}): this scenario is about a destination "
                    "without one")
        if self.settle == "key_or_lookup" and not (keyed or has_lookup or style == "natural_key"):
            return (f"{name} declares neither an idempotency key nor a lookup: after this fault a correct agent can "
                    "only end the operation unknown (see response_lost_no_dedup_no_lookup)")
        return None


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
    requires: dict[DestinationName, Needs] | None = Field(
        None, description="A catalogue pattern: what the scenario needs of each of its destinations, so that a "
        "project's own destination can take its place (docs/your-api.md); absent: the scenario runs only as "
        "written.")

    source: Path | None = Field(None, exclude=True, description="File the scenario was loaded from.")
    not_applicable: dict[str, str] = Field(
        default_factory=dict, exclude=True, description="Placed on a project (harness.catalogue): the catalogue's "
        "scenarios that project cannot take, and why; said in the verdict's coverage.")

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
    for name, field in Scenario.model_fields.items():  # set by the loader and the catalogue, never written
        if field.exclude:
            schema["properties"].pop(name, None)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCENARIO_SCHEMA_ID
    schema["title"] = "retry-harness scenario"
    return schema


# -- finding scenario files ------------------------------------------------------------------------

def resolve(selector: str, search_dirs: list[Path]) -> list[Path]:
    """Scenario files for a `--scenario` value: a path, a name, a glob, `all`, or a glob of files
    (`path/*.yaml`, from the current folder). A name or a glob is looked up in every folder of ``search_dirs``
    (a project's own folders first, the bundled catalogue last): `all` and a glob take the matching files of
    every folder, never one folder's alone; a file of a name an earlier folder also holds is shadowed by it
    (``shadowed`` says which)."""
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
    by_name: dict[str, Path] = {}
    for directory in dirs:
        for found in sorted(p.resolve() for p in directory.glob(f"{pattern}.yaml")):
            by_name.setdefault(found.stem, found)
    if by_name:
        return sorted(by_name.values(), key=lambda p: (dirs.index(_folder_of(p, dirs)), p.stem))
    known = sorted({p.stem for d in dirs for p in d.glob("*.yaml")})
    hint = suggest(selector, known)
    did_you_mean = f" Did you mean {hint[0]!r}?" if hint else ""
    raise ScenarioError(
        f"no scenario {selector!r} in {', '.join(str(d) for d in dirs) or 'no scenario folder'}."
        f"{did_you_mean} Known scenarios: {', '.join(known) or 'none'}. "
        "Give a name, a glob such as 'response_*', 'all', or a path to a .yaml file.")


def shadowed(selector: str, search_dirs: list[Path]) -> list[tuple[Path, Path]]:
    """The files ``resolve`` left out for a name an earlier folder also holds: (the one run, the one shadowed)."""
    if selector.endswith((".yaml", ".yml")):
        return []
    dirs = [d for d in dict.fromkeys(search_dirs) if d.is_dir()]
    pattern = "*" if selector == "all" else selector
    first: dict[str, Path] = {}
    out = []
    for directory in dirs:
        for found in sorted(p.resolve() for p in directory.glob(f"{pattern}.yaml")):
            if found.stem in first and first[found.stem] != found:
                out.append((first[found.stem], found))
            first.setdefault(found.stem, found)
    return out


def _folder_of(path: Path, dirs: list[Path]) -> Path:
    return next(d for d in dirs if path.parent == d.resolve())


# -- loading and validation ------------------------------------------------------------------------

def load(path: str | Path) -> Scenario:
    """Load and validate one scenario file."""
    path = Path(path)
    data, root = load_yaml_mapping(path, "a scenario is a mapping with keys name, description, destinations, "
                                         "intents")
    try:
        # a destination's `api: NAME-or-./file.yaml` read first (relative to the scenario's folder): validating reads
        # no file
        destinations = read_api_files(data.get("destinations"), path.parent)
        read = {**data, "destinations": destinations} if "destinations" in data else data
        scenario = Scenario.model_validate({**read, "source": path})
    except ValidationError as exc:
        raise ScenarioError(format_validation(path, root, exc, Scenario)) from None
    _check_references(path, root, scenario)
    return scenario


def with_mcp_transport(scenario: Scenario, transport: str) -> Scenario:
    """The scenario with each of its MCP destinations reached over ``transport`` (``MCP_TRANSPORTS``): how a
    front end runs the catalogue's MCP scenarios over stdio as well as over HTTP. A ``ScenarioError`` names a
    transport that is none, and a scenario with no MCP destination is returned as it is."""
    if transport not in MCP_TRANSPORTS:
        raise ScenarioError(f"MCP transport {transport!r} is none; valid: {', '.join(MCP_TRANSPORTS)}")
    destinations = {name: spec.model_copy(update={"mcp_transport": transport}) if spec.service == MCP_SERVICE
                    else spec for name, spec in scenario.destinations.items()}
    return scenario.model_copy(update={"destinations": destinations})


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
    problems += _agent_env_clashes(scenario)
    seen: set[str] = set()
    for i, intent in enumerate(scenario.intents):
        loc: tuple[Any, ...] = ("intents", i)
        if intent.intent_id in seen:
            problems.append((loc + ("intent_id",), f"duplicate intent id {intent.intent_id!r}"))
        if intent.supersedes is not None and intent.supersedes == intent.intent_id:
            problems.append((loc + ("supersedes",), f"intent {intent.intent_id!r} supersedes itself; "
                             "supersedes names an earlier intent whose payload this one changes"))
        elif intent.supersedes is not None and intent.supersedes not in seen:
            problems.append((loc + ("supersedes",), unknown_name(
                "earlier intent id", intent.supersedes, sorted(seen))))
        seen.add(intent.intent_id)
        if intent.destination not in scenario.destinations:
            problems.append((loc + ("destination",), unknown_name("destination", intent.destination, names)))
            continue
        kinds = list(contracts[intent.destination].operations)
        if kinds and intent.kind not in kinds:
            problems.append((loc + ("kind",), unknown_name(
                f"operation kind for {intent.destination!r}", intent.kind, kinds)))
    for i, rule in enumerate(scenario.faults):
        dest = rule.match.destination
        if dest is not None and dest not in scenario.destinations:
            problems.append((("faults", i, "match", "destination"), unknown_name("destination", dest, names)))
    for intent_id in scenario.expect.states:
        if intent_id not in seen:
            problems.append((("expect", "states", intent_id), unknown_name("intent id", intent_id, sorted(seen))))
    for dest in scenario.expect.effects:
        if dest not in scenario.destinations:
            problems.append((("expect", "effects", dest), unknown_name("destination", dest, names)))
    for dest, needs in (scenario.requires or {}).items():
        if dest not in scenario.destinations:
            problems.append((("requires", dest), unknown_name("destination", dest, names)))
            continue
        kinds = [i.kind for i in scenario.intents if i.destination == dest]
        unmet = needs.unmet(dest, contracts[dest], kinds)
        if unmet is None and len(kinds) != needs.intents:
            unmet = f"it has {len(kinds)} intent(s), and the pattern takes {needs.intents} (requires.{dest}.intents)"
        if unmet is not None:
            problems.append((("requires", dest), f"the scenario's own destination does not meet its needs: {unmet}"))
    if problems:
        raise ScenarioError("\n".join(
            f"{path}:{line_of(root, loc)}: {dotted(loc)}: {msg}" for loc, msg in problems))


def _agent_env_clashes(scenario: Scenario) -> list[tuple[tuple[Any, ...], str]]:
    """A variable the agent is given twice (two destinations' ``agent_env``, or one and a container agent's
    ``env``) could hold only one of its values: refused, rather than one silently winning."""
    problems: list[tuple[tuple[Any, ...], str]] = []
    set_by: dict[str, str] = {}
    for name, spec in scenario.destinations.items():
        for variable in spec.agent_env:
            first = set_by.setdefault(variable, name)
            if first != name:
                problems.append((("destinations", name, "agent_env", variable), (
                    f"destinations {first!r} and {name!r} both set the agent's variable {variable}, which holds "
                    "one value; name one otherwise")))
    if isinstance(scenario.agent, ContainerAgent):
        for variable in scenario.agent.env:
            if variable in set_by:
                problems.append((("agent", "env", variable), (
                    f"destination {set_by[variable]!r} sets {variable} for the agent (its agent_env), which holds "
                    "one value; set it in one place")))
    return problems


if __name__ == "__main__":  # python -m harness.scenario: regenerate the published schema
    print(write_schema())
