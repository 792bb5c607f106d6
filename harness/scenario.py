"""YAML scenarios: load, validate, and turn into typed objects.

A scenario declares the destinations (with their idempotency semantics), the faults the proxy
injects, the intents handed to the agent, and what a correct agent achieves. Validation errors name
the file, the line, the key path, the bad value and the valid choices; nothing is half-loaded.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fake_destinations.spec import DestinationSpec, describe
from harness.contract import (
    DESTINATION_ENV_PREFIX,
    NAME_PATTERN,
    DestinationContract,
    destination_env_name,
    env_suffix,
)
from harness.errors import ScenarioError
from harness.events import ResolutionState
from harness.proxy.rules import FaultRule, ProxyMode

SCENARIO_DIR_NAME = "scenarios"


class Intent(BaseModel):
    """One external effect the agent is asked to bring about."""

    model_config = ConfigDict(extra="forbid")
    intent_id: str = Field(pattern=NAME_PATTERN, description="Stable name of the intent, unique in the scenario.")
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
    effects: dict[str, int] = Field(
        default_factory=dict, description="Distinct effects each destination must hold at the end.")
    states: dict[str, ResolutionState | list[ResolutionState]] = Field(
        default_factory=dict,
        description="Per intent id, the final operation state (or list of states) a correct agent may reach.")

    def allowed_states(self) -> dict[str, list[str]]:
        return {k: [v] if isinstance(v, str) else list(v) for k, v in self.states.items()}


def _pattern_as_property_names(schema: dict[str, Any]) -> None:
    """pydantic publishes constrained dict keys as ``patternProperties``, which lets any other key
    through unchecked; ``propertyNames`` rejects it, as loading does."""
    (pattern, value), = schema.pop("patternProperties").items()
    schema["propertyNames"] = {"pattern": pattern}
    schema["additionalProperties"] = value


class Scenario(BaseModel):
    """A fault-injection scenario, as written in `scenarios/NAME.yaml`."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=NAME_PATTERN, description="Scenario name; `pytest --scenario NAME` selects it.")
    description: str = Field(min_length=1, description="What happens and what a correct agent does, for a person.")
    destinations: dict[Annotated[str, Field(pattern=NAME_PATTERN)], DestinationSpec] = Field(
        min_length=1, json_schema_extra=_pattern_as_property_names,
        description="The fake destinations, by name. A name also makes the agent's "
        f"{DESTINATION_ENV_PREFIX}<NAME> variable, so it uses the same characters as other ids.")
    faults: list[FaultRule] = Field(default_factory=list)
    intents: list[Intent] = Field(min_length=1)
    agent: str | None = Field(None, description="Agent command for this scenario (default: the reference agent).")
    agent_timeout_seconds: float = Field(30.0, gt=0, le=600, description="Wall-clock limit of one agent run.")
    restart_agent: AgentRestart | None = None
    restart_destinations: DestinationRestart | None = None
    proxy: ProxySettings = Field(default_factory=ProxySettings)
    expect: Expectation = Field(default_factory=Expectation)

    source: Path | None = Field(None, exclude=True, description="File the scenario was loaded from.")

    def contracts(self) -> dict[str, DestinationContract]:
        """The agent-facing contract of each destination."""
        return {name: describe(spec) for name, spec in self.destinations.items()}


SCHEMA_PATH = Path(__file__).parent / "schemas" / "scenario.schema.json"


def schema_text() -> str:
    return json.dumps(scenario_json_schema(), indent=2, sort_keys=True) + "\n"


def write_schema(path: Path = SCHEMA_PATH) -> Path:
    """Write the published scenario schema (a test keeps the file up to date)."""
    path.write_text(schema_text(), encoding="utf-8")
    return path


def scenario_json_schema() -> dict[str, Any]:
    """The published JSON Schema of scenario files."""
    schema = Scenario.model_json_schema()
    schema["properties"].pop("source", None)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "retry-harness scenario"
    return schema


# -- finding scenario files ------------------------------------------------------------------------

def bundled_scenario_dir() -> Path:
    """The catalogue shipped with the project (next to the packages in a clone)."""
    return Path(__file__).resolve().parent.parent / SCENARIO_DIR_NAME


def resolve(selector: str, search_dirs: list[Path]) -> list[Path]:
    """Scenario files for a `--scenario` value: a path, a name, a glob, or `all`."""
    as_path = Path(selector)
    if selector.endswith((".yaml", ".yml")) and as_path.is_file():
        return [as_path.resolve()]
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
        f"no scenario {selector!r} in {', '.join(str(d) for d in dirs) or 'any scenarios/ folder'}."
        f"{did_you_mean} Known scenarios: {', '.join(known) or 'none'}. "
        "Give a name, a glob such as 'response_*', 'all', or a path to a .yaml file.")


# -- loading and validation ------------------------------------------------------------------------

def load(path: str | Path) -> Scenario:
    """Load and validate one scenario file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read scenario file: {exc.strerror}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ScenarioError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}:1: a scenario is a mapping with keys name, description, "
                            f"destinations, intents (got {type(data).__name__})")
    try:
        scenario = Scenario.model_validate({**data, "source": path})
    except ValidationError as exc:
        raise ScenarioError(_format_validation(path, root, exc)) from None
    _check_references(path, root, scenario)
    return scenario


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
        seen.add(intent.intent_id)
        if intent.supersedes is not None and intent.supersedes not in seen:
            problems.append((loc + ("supersedes",), _unknown(
                "earlier intent id", intent.supersedes, sorted(seen - {intent.intent_id}))))
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


def _format_validation(path: Path, root: yaml.Node | None, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(part for part in err["loc"] if not _is_union_tag(part))
        value = err.get("input")
        message = err["msg"]
        ctx = err.get("ctx") or {}
        if err["type"] == "extra_forbidden":
            valid = _valid_keys(loc[:-1])
            hint = _suggest(str(loc[-1]), valid)
            message = (f"unknown key {loc[-1]!r}"
                       + (f"; did you mean {hint[0]!r}?" if hint else "")
                       + (f" (valid keys: {', '.join(valid)})" if valid else ""))
        elif err["type"] == "missing":
            message = "required key is missing"
        elif err["type"] == "string_pattern_mismatch" and ctx.get("pattern") == NAME_PATTERN:
            message = (f"{_short(value)} is not a valid name: use ASCII letters, digits, '_', '.' and '-', "
                       "starting with a letter or digit")
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
        lines.append(f"{path}:{_line_of(root, loc)}: {_dotted(loc) or '(top level)'}: {message}")
    return "\n".join(lines)


def _is_union_tag(part: Any) -> bool:
    # pydantic inserts tags such as 'function-after[...]' or a literal's name in union locations
    return isinstance(part, str) and ("[" in part or part.startswith("function-"))


def _valid_keys(loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model at `loc` in a scenario, for 'did you mean' hints."""
    model: Any = Scenario
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
