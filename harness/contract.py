"""The agent contract: every name that the harness, the agents, the proxy and the destinations share.

Outside code (agents in any language, CI scripts) depends on these names, so each is spelled here
once and imported everywhere else:

- the environment an agent is started with (``agent_env``), and the one rule that turns a
  destination name into its variable names (``env_suffix``);
- the layout of a run's evidence folder (``EvidenceLayout``);
- the HTTP header and body field names shared by agents, the fault proxy and the destinations;
- the typed destination contract (``DestinationContract``) that the intents file hands to agents,
  as JSON, under ``destinations``: ``to_dict()`` writes that JSON, ``from_dict()`` reads it back.

Standard library only, and cheap to import: the reference agent and the destination process import
this module, and their start-up is on every scenario's critical path.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# -- names ----------------------------------------------------------------------------------------

# Scenario names, intent ids and destination names. A destination name must stay usable in an
# environment variable name, hence no spaces and nothing outside ASCII.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
# a container image reference, an environment variable's name (a container agent's: harness.scenario)
IMAGE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"

# -- the agent command -----------------------------------------------------------------------------

REFERENCE_AGENT = "python -m harness.agents.reference"  # what runs when no agent is named anywhere
# What an agent writes (a scenario's ``agent_log``): "events", its audit log; "none", no log at all (a
# vendor SDK, a plain HTTP client), so the run is judged in black-box mode from the wire and the ledger;
# "otel", OpenTelemetry spans only (OTLP JSON lines in TRACE_FILE_ENV), read as events by harness.otel
AGENT_LOGS = ("events", "none", "otel")
OTEL_AGENT_LOG = "otel"
# How a run is judged (``mode`` in context.json and in the verdict): "events", from the agent's audit log
# beside the proxy journal and the ledger; "black_box", from the journal and the ledger alone (the
# scenario's ``agent_log: none``, or ``--black-box``)
EVENTS_MODE, BLACK_BOX_MODE = "events", "black_box"
JUDGING_MODES = (EVENTS_MODE, BLACK_BOX_MODE)


def agent_words(command: str) -> list[str]:
    """The words of an agent command, split as a shell would; a ``ValueError`` that completes the
    sentence "the agent command ..." when it cannot be one."""
    if "\0" in command:
        raise ValueError("holds a NUL character, which no program argument can carry")
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise ValueError(f"is not valid shell words ({exc}); quote it as a shell would") from None
    if not words:
        raise ValueError(f"is empty; give a command such as {REFERENCE_AGENT!r}")
    return words


def agent_option_problem(value: str, option: str = "--agent") -> str | None:
    """Why ``value`` given to a front end's ``option`` is not an agent command, or None when it is one.

    An empty or blank value (typically an unset variable: ``--agent "$AGENT"``) is an error, never a
    silent fall-back to the default agent, which would pass the run without testing the agent meant."""
    try:
        agent_words(value)
    except ValueError as exc:
        return (f"{value!r} {exc} (or 'node agent.js', './my_agent', ...); leave {option} out to use the "
                "scenario's agent, else the reference agent")
    return None


# -- the agent's environment ----------------------------------------------------------------------

INTENTS_ENV = "HARNESS_INTENTS"  # path of the intents file (JSON)
AUDIT_LOG_ENV = "HARNESS_AUDIT_LOG"  # path of the NDJSON audit log the agent appends to
STATE_DIR_ENV = "HARNESS_STATE_DIR"  # a folder that survives the agent's restarts within one run
TRACE_FILE_ENV = "HARNESS_TRACE_FILE"  # path of the OTLP JSON lines file the agent may write its spans to
DESTINATION_ENV_PREFIX = "HARNESS_DESTINATION_"  # + env_suffix(name): base URL of a destination
SECRET_ENV_PREFIX = "HARNESS_SECRET_"  # + env_suffix(name): the credential for a destination
# + env_suffix(name): an MCP destination served over stdio (mcp_transport: stdio): the command, as shell words, that
# starts its server, as a host's configuration names one (command + args); the agent starts it as a subprocess
MCP_SERVER_ENV_PREFIX = "HARNESS_MCP_SERVER_"
# The operator's checkpoint key file (harness.chain): read by the harness, never given to the agent
CHECKPOINT_KEY_FILE_ENV = "HARNESS_CHECKPOINT_KEY_FILE"
# where the harness keeps each run's key when the operator gave none (harness.chain.key_store): never the agent's
KEY_STORE_ENV = "HARNESS_KEY_STORE"
# the operator's, never the agent's: the fault proxy's interpreter, or where its private venv lives
PROXY_PYTHON_ENV = "HARNESS_PROXY_PYTHON"
PROXY_VENV_ENV = "HARNESS_PROXY_VENV"
# the operator's: an image with Python 3.11 to build the harness's images on, instead of the debootstrapped base
BASE_IMAGE_ENV = "HARNESS_BASE_IMAGE"
def harness_cache() -> Path:
    """The harness's own folder of the user's cache (the proxy's runtime, the images' lock, the runs' keys, the
    SDK environments): one place, which the agent's sandbox hides."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "retry-harness"


# the operator's: where the certification makes one environment per certified SDK release (default: in the cache)
SDK_ENVS_ENV = "HARNESS_SDK_ENVS"


def sdk_envs_root() -> Path:
    """The certified SDKs' environments (certification.environments makes them; agents run in them, so the
    sandbox shows them read-only)."""
    return Path(os.environ[SDK_ENVS_ENV]) if os.environ.get(SDK_ENVS_ENV) else harness_cache() / "sdk-envs"


# the operator's: the agent's sandbox (auto | bwrap | off, harness.sandbox) and the bubblewrap binary it uses
SANDBOX_ENV = "HARNESS_SANDBOX"
BWRAP_ENV = "HARNESS_BWRAP"
# the harness's own settings, removed from the environment the agent inherits
OPERATOR_ENV = (CHECKPOINT_KEY_FILE_ENV, KEY_STORE_ENV, PROXY_PYTHON_ENV, PROXY_VENV_ENV, BASE_IMAGE_ENV, SANDBOX_ENV,
                BWRAP_ENV)
# every name above starts so: a variable a scenario sets for the agent (a container agent's ``env``, a
# destination's ``agent_env``) may not, or it could hide the contract's value or the operator's
HARNESS_ENV_PREFIX = INTENTS_ENV[:len("HARNESS_")]

_NOT_ENV_CHAR = re.compile(r"[^A-Za-z0-9]")


def env_suffix(destination: str) -> str:
    """The ``<NAME>`` of a destination's variables: ASCII letters upper-cased, ASCII digits kept,
    and every other character (``-``, ``.``, ``_``, a space, any non-ASCII character) one ``_``.

    One character in, one character out, so the suffix never depends on locale or Unicode case
    rules (``"ß".upper()`` is ``"SS"``). Different names may share a suffix (``my-api``, ``my_api``,
    ``My.Api``): scenario loading rejects a scenario that declares two such names.
    """
    return _NOT_ENV_CHAR.sub("_", destination).upper()


def destination_env_name(destination: str) -> str:
    """The variable holding the destination's base URL: the prefix, then ``env_suffix(destination)``."""
    return DESTINATION_ENV_PREFIX + env_suffix(destination)


def mcp_server_env_name(destination: str) -> str:
    """The variable holding the command that starts an MCP destination's server over stdio."""
    return MCP_SERVER_ENV_PREFIX + env_suffix(destination)


def secret_env_name(destination: str) -> str:
    """The variable holding the credential the agent must use there: the prefix, then the suffix."""
    return SECRET_ENV_PREFIX + env_suffix(destination)


# -- the evidence folder --------------------------------------------------------------------------

AGENT_LOG_FILE = "agent.ndjson"
JOURNAL_FILE = "journal.ndjson"
LEDGER_DUMP_FILE = "ledger.json"
LEDGER_DB_FILE = "ledger.sqlite"
CONTEXT_FILE = "context.json"
# context.json key {"complete": bool}: false from the run's first write, true only once every source
# (agent log, proxy journal, ledger, context) is closed and written; a folder without it is not trusted whole
COMPLETENESS_KEY = "evidence"
# keys of that mark: the signed checkpoints the run made ({file: its checkpoint file}: one missing later is a
# gap, never a folder older than checkpoints), what the ledger's signatures said (``verify_ledger``: a list of
# sentences, empty when every row is as its writer wrote it) and why a run stopped before its end (a signal)
CHECKPOINTS_KEY = "checkpoints"
LEDGER_SEAL_KEY = "ledger_tampering"
INTERRUPTED_KEY = "interrupted"
# and what the teardown could not do (a proxy that did not answer, a journal it could not read, a write refused):
# a list of sentences, each a reason the run is INCOMPLETE
TEARDOWN_PROBLEMS_KEY = "teardown_problems"
# and the mark's {destination: why} of the container services whose ledger probe failed at the end: their ground
# truth is unknown, so the run is INCOMPLETE
PROBE_FAILURES_KEY = "ledger_probe_failures"
# context.json keys beside the mark: how much of the agent's log is read to judge it (``harness.limits``; the
# scenario's YAML key too), and what each container service's ledger probe did (``harness.containers.service``)
LIMITS_KEY = "limits"
PROBE_KEY = "ledger_probes"
INTENTS_FILE = "intents.json"
VERDICT_JSON_FILE = "verdict.json"
VERDICT_TEXT_FILE = "verdict.txt"
AGENT_STDOUT_FILE = "agent.stdout"
AGENT_STDERR_FILE = "agent.stderr"
STATE_DIR_NAME = "agent-state"
CHECKPOINT_FILE = "agent.checkpoint.json"  # the agent log's signed checkpoint (harness.chain)
TRACE_FILE = "agent.trace.jsonl"  # the agent's spans, OTLP JSON lines (TRACE_FILE_ENV; agent_log: otel)
TRACE_CHECKPOINT_FILE = "agent.trace.checkpoint.json"  # the trace's signed checkpoint, as the log's
TRACE_EVENTS_FILE = "agent.trace.events.ndjson"  # the events the harness read from the trace, as it judged them
LEDGER_CHECKPOINT_FILE = "ledger.checkpoint.json"  # the saved ledger's signed checkpoint, as the agent log's
JOURNAL_CHECKPOINT_FILE = "journal.checkpoint.json"  # the proxy journal as the proxy wrote it, signed by the proxy
CONTEXT_CHECKPOINT_FILE = "context.checkpoint.json"  # context.json as the teardown wrote it last
VERDICT_CHECKPOINT_FILE = "verdict.checkpoint.json"  # verdict.json as the run's judgement wrote it
# the run's traffic as the client saw it, written by the fault proxy as flows end (docs/proxy.md, "Traffic files")
TRAFFIC_HAR_FILE = "traffic.har"  # HAR 1.2, one entry per journal line, `_harness` facts per entry
# mitmproxy's own flow format, appended per flow (`python -m harness proxy mitmweb -r traffic.mitm` opens it)
TRAFFIC_FLOWS_FILE = "traffic.mitm"
# mitmproxy's programs `python -m harness proxy TOOL` runs from the fault proxy's runtime (none is on the PATH)
MITMPROXY_TOOLS = ("mitmdump", "mitmweb", "mitmproxy")


class ContextKey:
    """context.json's other keys, spelled once: the engine writes them (``harness.engine``), ``harness.evidence``, the
    checker and the incident readers read them (the completeness mark's own keys are the ``*_KEY`` above)."""

    SCENARIO = "scenario"
    SCENARIO_FILE = "scenario_file"
    DESTINATIONS = "destinations"  # {name: {"spec": ..., "contract": ...}}
    INTENTS = "intents"
    SECRETS = "secrets"  # {destination suffix: this run's canary}
    AGENT = "agent"  # the agent's record: the keys below
    EXPECT = "expect"  # the scenario's expectations (``harness.checker.expectations``)
    AGENT_LOG = "agent_log"
    MODE = "mode"  # how the run is judged: EVENTS_MODE | BLACK_BOX_MODE
    FAULTS = "faults"
    RESTART_AGENT = "restart_agent"
    RESTART_DESTINATIONS = "restart_destinations"
    PROXY = "proxy"
    AGENT_TIMEOUT = "agent_timeout_seconds"
    DESTINATION_RESTARTS = "destination_restarts"
    CONTAINERS_LEFT = "containers_left"
    # a catalogue scenario placed on a project's destinations (harness.catalogue): the catalogue's scenarios that
    # project cannot take, each with why ({name: reason}), for the verdict's coverage
    NOT_APPLICABLE = "not_applicable"
    # in the completeness mark (COMPLETENESS_KEY)
    COMPLETE = "complete"
    SAVED = "saved"  # every source saved, though the run was stopped
    WRITES_IN_PROGRESS = "destination_writes_in_progress"
    # in the agent's record (AGENT)
    COMMAND = "command"
    CWD = "cwd"
    EXIT_STATUS = "exit_status"
    TIMED_OUT = "timed_out"
    RUNS = "runs"  # each run of the agent (``AgentRun`` as a dict)
    START_ERROR = "start_error"
    IMAGE = "image"
    CONTAINER_COMMAND = "container_command"
    CONTAINER_ENV = "container_env"


@dataclass(frozen=True)
class EvidenceLayout:
    """Where each file of one run's evidence folder lives. Every file is optional to the checker: a
    missing one is an empty source."""

    folder: Path

    @property
    def agent_log(self) -> Path:
        """The agent's audit log (events, ``harness.events``)."""
        return self.folder / AGENT_LOG_FILE

    @property
    def journal(self) -> Path:
        """The proxy journal (one line per flow, ``harness.journal``)."""
        return self.folder / JOURNAL_FILE

    @property
    def ledger_dump(self) -> Path:
        """``{"effects": [...], "requests": [...]}``: the effect ledger as JSON, for the checker."""
        return self.folder / LEDGER_DUMP_FILE

    @property
    def ledger_db(self) -> Path:
        """A copy of the destinations' SQLite effect ledger."""
        return self.folder / LEDGER_DB_FILE

    @property
    def context(self) -> Path:
        """``{"scenario", "destinations", "intents", "secrets", "agent", ...}``: what the harness knows."""
        return self.folder / CONTEXT_FILE

    @property
    def intents(self) -> Path:
        """The intents file handed to the agent: ``{"intents": [...], "destinations": {name: contract}}``."""
        return self.folder / INTENTS_FILE

    @property
    def traffic_har(self) -> Path:
        """The run's traffic as a HAR 1.2 file (the client's view; secrets redacted as in the journal)."""
        return self.folder / TRAFFIC_HAR_FILE

    @property
    def traffic_flows(self) -> Path:
        """The run's traffic as a mitmproxy flow dump (``metadata["harness"]`` per flow; secrets redacted)."""
        return self.folder / TRAFFIC_FLOWS_FILE

    @property
    def verdict_json(self) -> Path:
        return self.folder / VERDICT_JSON_FILE

    @property
    def verdict_text(self) -> Path:
        return self.folder / VERDICT_TEXT_FILE

    @property
    def agent_stdout(self) -> Path:
        return self.folder / AGENT_STDOUT_FILE

    @property
    def agent_stderr(self) -> Path:
        return self.folder / AGENT_STDERR_FILE

    @property
    def checkpoint(self) -> Path:
        """The agent log's signed checkpoint, recorded once the agent exited (``harness.chain``)."""
        return self.folder / CHECKPOINT_FILE

    @property
    def trace(self) -> Path:
        """The agent's OpenTelemetry spans (``TRACE_FILE_ENV``), OTLP JSON lines."""
        return self.folder / TRACE_FILE

    @property
    def trace_checkpoint(self) -> Path:
        return self.folder / TRACE_CHECKPOINT_FILE

    @property
    def ledger_checkpoint(self) -> Path:
        """The saved ledger's signed checkpoint (``ledger.json`` as the harness wrote it)."""
        return self.folder / LEDGER_CHECKPOINT_FILE

    @property
    def journal_checkpoint(self) -> Path:
        """The journal's signed checkpoint, made by the fault proxy from what it wrote (``harness.journal``)."""
        return self.folder / JOURNAL_CHECKPOINT_FILE

    @property
    def context_checkpoint(self) -> Path:
        """context.json's signed checkpoint, made after the teardown's last write of it."""
        return self.folder / CONTEXT_CHECKPOINT_FILE

    @property
    def verdict_checkpoint(self) -> Path:
        """verdict.json's signed checkpoint, made once the run's writers wrote it."""
        return self.folder / VERDICT_CHECKPOINT_FILE

    @property
    def trace_events(self) -> Path:
        """The events read from the trace (``harness.otel.reader``), one a line, as the checker judged them."""
        return self.folder / TRACE_EVENTS_FILE

    @property
    def state_dir(self) -> Path:
        """The agent's state dir (``STATE_DIR_ENV``)."""
        return self.folder / STATE_DIR_NAME


_PLACEHOLDER = re.compile(r"\{([^{}/]+)\}")


@functools.cache
def path_template_pattern(template: str, *, trailing_slash: bool = False) -> re.Pattern[str]:
    """A path template of a contract or a route (``/v1/items/{id}/capture``) as the pattern of one path, whole:
    each ``{name}`` placeholder is one path segment, captured as group ``name`` (when an identifier, the first
    time); ``trailing_slash``: the path may end in one more ``/``. The destinations route by it, the checker
    attributes flows and ``harness.instrument`` reads its status paths by it."""
    parts, named, at = [], set(), 0
    for found in _PLACEHOLDER.finditer(template):
        parts.append(re.escape(template[at:found.start()]))
        name = found.group(1)
        parts.append(f"(?P<{name}>[^/]+)" if name.isidentifier() and name not in named else "[^/]+")
        named.add(name)
        at = found.end()
    parts.append(re.escape(template[at:]))
    return re.compile("^" + "".join(parts) + ("/?" if trailing_slash else "") + "$")


# -- braced templates --------------------------------------------------------------------------------
# One grammar for the templates the harness fills for an agent: a destination's ``agent_env`` values (below)
# and the words of a per-intent command (``harness.intent_runner``). ``{name}`` is a placeholder, ``{{`` and
# ``}}`` are literal braces, any other brace is an error (never left as it is: a typo would reach the agent).

_BRACED = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


def template_fields(template: str) -> list[str]:
    """The placeholder names of a braced template, in order; a ``ValueError`` for a lone brace."""
    return [name for _, name in _template_pieces(template) if name is not None]


def fill_template(template: str, value_of: Callable[[str], str]) -> str:
    """``template`` with each ``{name}`` replaced by ``value_of(name)`` (which raises ``ValueError`` for a name
    it does not know) and ``{{``/``}}`` by one brace."""
    return "".join(text if name is None else value_of(name) for text, name in _template_pieces(template))


def _template_pieces(template: str) -> list[tuple[str, str | None]]:
    pieces: list[tuple[str, str | None]] = []
    at = 0
    for found in _BRACED.finditer(template):
        pieces.append((template[at:found.start()], None))
        token = found.group(0)
        if token in ("{", "}"):
            raise ValueError(f"a lone {token!r} at character {found.start() + 1}: write {token * 2!r} "
                             "for a literal brace, {name} for a placeholder")
        pieces.append((token[0], None) if token in ("{{", "}}") else ("", found.group(1)))
        at = found.end()
    pieces.append((template[at:], None))
    return pieces


# A destination's ``agent_env`` (``fake_destinations.spec.DestinationSpec``): variables named by the scenario, their
# values filled from what the harness knows of that destination for this run: how a team's agent that reads
# ``BILLING_URL`` rather than HARNESS_DESTINATION_BILLING is pointed through the fault proxy.
DESTINATION_ENV_PLACEHOLDERS = {
    "url": "the destination's URL through the fault proxy, then an api declaration's base_path",
    "origin": f"{DESTINATION_ENV_PREFIX}<NAME>: the URL through the fault proxy, without the base path",
    "host": "the host of that URL",
    "port": "its port",
    "name": "the destination's name",
    "secret": f"{SECRET_ENV_PREFIX}<NAME>: the credential the harness plants for it",
}
_DEFAULT_PORTS = {"http": 80, "https": 443, "ssh": 22}


def check_destination_env(template: str) -> str:
    """``template`` when every placeholder of it is one of ``DESTINATION_ENV_PLACEHOLDERS``, else a ``ValueError``
    naming the bad one and the valid ones (a scenario's load calls it, so no run starts on a typo)."""
    if "\0" in template:
        raise ValueError("holds a NUL character, which no environment variable can carry")
    for placeholder in template_fields(template):
        if placeholder not in DESTINATION_ENV_PLACEHOLDERS:
            valid = ", ".join("{" + name + "}" for name in DESTINATION_ENV_PLACEHOLDERS)
            raise ValueError(f"unknown placeholder {{{placeholder}}}; valid: {valid} ({{{{ and }}}} for literal "
                             "braces)")
    return template


def destination_env(name: str, templates: Mapping[str, str], *, url: str, secret: str,
                    base_path: str = "") -> dict[str, str]:
    """The variables a destination's ``agent_env`` sets for one agent run, filled: ``url`` is the destination's
    base URL as the agent must reach it (its HARNESS_DESTINATION_<NAME>), ``secret`` its HARNESS_SECRET_<NAME>,
    ``base_path`` what an api declaration puts before its routes (``{url}`` = origin + base path, no trailing
    ``/``)."""
    from urllib.parse import urlsplit  # here: agents import this module, and never call this

    origin = url.rstrip("/")
    parts = urlsplit(origin)
    path = base_path.strip("/")
    values = {"url": f"{origin}/{path}" if path else origin, "origin": origin, "host": parts.hostname or "",
              "port": str(parts.port or _DEFAULT_PORTS.get(parts.scheme) or ""), "name": name, "secret": secret}
    return {variable: fill_template(template, values.__getitem__) for variable, template in templates.items()}


def agent_env(layout: EvidenceLayout, urls: Mapping[str, str], secrets: Mapping[str, str]) -> dict[str, str]:
    """The contract environment of one agent run: its files in ``layout``, and the base URL and the
    credential of each destination, both keyed by destination name."""
    return {
        INTENTS_ENV: str(layout.intents),
        AUDIT_LOG_ENV: str(layout.agent_log),
        TRACE_FILE_ENV: str(layout.trace),
        STATE_DIR_ENV: str(layout.state_dir),
        **{destination_env_name(name): url for name, url in urls.items()},
        **{secret_env_name(name): value for name, value in secrets.items()},
    }


# -- names on the wire ----------------------------------------------------------------------------

FLOW_HEADER = "X-Harness-Flow"  # stamped by the proxy on what it forwards; never seen by the agent
IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"  # "true" on an answer replayed from a stored key
# the run's secret the fault proxy adds to every request it forwards to a fake destination (the engine hands it
# to both over their pipes, never to the agent): a request without it went past the proxy, and is refused (403)
GATE_HEADER = "X-Harness-Gate"
ACCOUNT_HEADER = "X-Account"  # the account a key is scoped to (key scope "account")
TRACEPARENT_HEADER = "traceparent"  # W3C trace context: correlates attempts with the wire
TRACEPARENT_ENV = "TRACEPARENT"  # the same, passed as an SSH session variable
CLIENT_TOKEN_FIELD = "client_token"  # body field of an EC2-like client token
CLIENT_REFERENCE_FIELD = "client_reference"  # body field and lookup query parameter
LOOKUP_RESULT_FIELD = "items"  # field of a lookup answer that lists the matching resources
# the ledger outcome of a status poll answered "still pending": a read that proves neither success nor absence
READ_PENDING = "read_pending"
RECEIPT_PREFIX = "effect_ref:"  # an SSH command's output line that names its effect
# An MCP tool server (destination service "mcp"): the agent's MCP client connects to the destination's
# URL + its endpoint (default below); a tool call is the JSON-RPC method below, and the reference
# agent sends its trace context in the call's ``params._meta`` under TRACEPARENT_HEADER
MCP_TRANSPORT = "mcp"
MCP_ENDPOINT = "/mcp"
# how an MCP destination is reached (its ``mcp_transport``): Streamable HTTP at its URL, or a server the agent
# starts over stdio (the command in MCP_SERVER_ENV_PREFIX + its name; the same tools, ledger and faults)
MCP_TRANSPORTS = ("http", "stdio")
MCP_STDIO = "stdio"
MCP_TOOL_CALL = "tools/call"


def mcp_sdk_major() -> int:
    """The installed mcp SDK's major version: 1.x registers a server's handlers with decorators and names its
    client transport streamablehttp_client, 2.x takes handlers in the constructor and streamable_http_client.
    The fake MCP servers and the bundled agents' client follow it; the wire is the same."""
    from importlib.metadata import version

    return int(version("mcp").split(".", 1)[0])

# The caller's view (docs/contract.md, "What the program told its caller"): a program judged without an audit
# log (a connector, an SDK wrapper) may say what its SDK returned to it for each intent, one line on its stdout:
# REPORT_PREFIX then a JSON object {"intent_id": ..., "outcome": one of REPORT_OUTCOMES, "effect_ref": ... (on a
# success: the resource its answer named)}. Its last line for an intent is what its caller was told; rule H049
# holds it against the ledger. A timeout, or an outcome the program says it does not know, is honest; an error says
# the call failed.
REPORT_PREFIX = "harness-report: "
REPORT_OUTCOMES = ("success", "error", "timeout", "unknown")

# The audit events an agent writes (field ``event``).
EVENT_NAMES = ("operation", "attempt", "observation", "resolution", "approval")


# -- the destination contract ---------------------------------------------------------------------

class ContractError(ValueError):
    """Raised by ``DestinationContract.from_dict`` when the JSON does not have the contract's shape;
    the message starts with the key path."""


@dataclass(frozen=True)
class IdempotencyContract:
    """How the destination deduplicates writes: ``style`` ``none`` means it does not."""

    style: str = "none"  # none | stripe | ietf | client_token | natural_key (one effect per body_field value)
    header: str | None = None  # the request header carrying the key
    body_field: str | None = None  # or the body field carrying it
    retention_seconds: float | None = None  # how long a key is remembered; None: forever (or no keys)
    scope: str | None = "global"  # global | account | path
    required: bool = False  # a write without a key is refused
    account_header: str | None = None  # the header naming the account, when keys are per account

    @property
    def deduplicates(self) -> bool:
        return self.style != "none"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"style": self.style, "header": self.header, "body_field": self.body_field,
                               "retention_seconds": self.retention_seconds, "scope": self.scope,
                               "required": self.required}
        if self.account_header is not None:
            out["account_header"] = self.account_header
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "idempotency") -> IdempotencyContract:
        return cls(style=_get(data, "style", str, where) or "none",
                   header=_get(data, "header", str, where),
                   body_field=_get(data, "body_field", str, where),
                   retention_seconds=_seconds(data, "retention_seconds", where),
                   scope=_get(data, "scope", str, where, default="global"),
                   required=bool(_get(data, "required", bool, where)),
                   account_header=_get(data, "account_header", str, where))


@dataclass(frozen=True)
class LookupContract:
    """A search by client reference: ``method path?query_param=<reference>`` answers
    ``{result_field: [resources]}``; a resource shows up at most ``lag_seconds`` after the destination received
    the write that made it (its processing time and its index lag)."""

    path: str
    query_param: str
    method: str = "GET"
    result_field: str = LOOKUP_RESULT_FIELD
    lag_seconds: float | None = None  # None: the destination does not say
    # where a listed resource names its effect, when not where the write's answer does (an answer that wraps the
    # resource, {"ticket": {"id": ...}}, lists bare resources: the write's ticket.id is the item's id)
    effect_ref_field: str | None = None

    @property
    def may_lag(self) -> bool:
        """True when a negative answer may only mean the index has not caught up yet."""
        return self.lag_seconds is not None and self.lag_seconds > 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": self.method, "path": self.path, "query_param": self.query_param,
                               "result_field": self.result_field}
        if self.lag_seconds is not None:
            out["lag_seconds"] = self.lag_seconds
        if self.effect_ref_field is not None:
            out["effect_ref_field"] = self.effect_ref_field
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "lookup") -> LookupContract:
        return cls(path=_required(data, "path", str, where),
                   query_param=_required(data, "query_param", str, where),
                   method=_get(data, "method", str, where, default="GET"),
                   result_field=_get(data, "result_field", str, where, default=LOOKUP_RESULT_FIELD),
                   lag_seconds=_seconds(data, "lag_seconds", where),
                   effect_ref_field=_get(data, "effect_ref_field", str, where, default=None))


@dataclass(frozen=True)
class StatusContract:
    """Where an asynchronous operation's status is polled: ``path`` holds ``{id}``."""

    path: str
    method: str = "GET"

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "path": self.path}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "status") -> StatusContract:
        return cls(path=_required(data, "path", str, where), method=_get(data, "method", str, where, default="GET"))


# Command families (the first article): what a rerun after an unknown result may do. read_only may be
# rerun freely; set_state needs a convergence condition (or a dedup record); the others need a remote
# dedup record or a human decision (rule H035).
COMMAND_FAMILIES = ("read_only", "set_state", "append", "financial", "destructive", "notification")


@dataclass(frozen=True)
class OperationContract:
    """One kind of operation: an HTTP ``method path`` (``{param}`` placeholders filled from the
    intent's params), or an SSH ``command`` (method ``EXEC``)."""

    method: str
    path: str | None = None
    command: str | None = None
    dedup: str | None = None  # the operation deduplicates on its own, e.g. "operation_marker"
    client_reference_field: str | None = None  # body field where the agent puts its reference
    effect_ref_field: str | None = None  # answer field naming the effect
    body_defaults: Mapping[str, Any] | None = None
    required_params: tuple[str, ...] = ()
    family: str | None = None  # COMMAND_FAMILIES: what a rerun after an unknown result needs
    convergence: str | None = None  # set_state: the condition under which a rerun does not act again
    # set_state: the exit status by which a rerun says the state already holds (create-user's 9): an answer
    # that proves the state as an exit 0 does, naming the existing resource on its receipt line
    convergence_exit_status: int | None = None
    # an MCP tool: the annotations its server publishes in tools/list, verbatim (hints: they may lie)
    annotations: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": self.method}
        for name in ("path", "command", "dedup", "client_reference_field", "effect_ref_field", "family",
                     "convergence", "convergence_exit_status"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.body_defaults is not None:
            out["body_defaults"] = dict(self.body_defaults)
        if self.annotations is not None:
            out["annotations"] = dict(self.annotations)
        out["required_params"] = list(self.required_params)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "operation") -> OperationContract:
        defaults = _get(data, "body_defaults", dict, where)
        annotations = _get(data, "annotations", dict, where)
        params = _get(data, "required_params", list, where) or []
        if not all(isinstance(p, str) for p in params):
            raise ContractError(f"{where}.required_params: expected a list of strings")
        family = _get(data, "family", str, where)
        if family is not None and family not in COMMAND_FAMILIES:
            raise ContractError(f"{where}.family: {family!r}; valid: {', '.join(COMMAND_FAMILIES)}")
        return cls(method=_required(data, "method", str, where),
                   path=_get(data, "path", str, where),
                   command=_get(data, "command", str, where),
                   dedup=_get(data, "dedup", str, where),
                   client_reference_field=_get(data, "client_reference_field", str, where),
                   effect_ref_field=_get(data, "effect_ref_field", str, where),
                   body_defaults=dict(defaults) if defaults is not None else None,
                   required_params=tuple(params), family=family,
                   convergence=_get(data, "convergence", str, where),
                   convergence_exit_status=_get(data, "convergence_exit_status", int, where),
                   annotations=dict(annotations) if annotations is not None else None)


@dataclass(frozen=True)
class DestinationContract:
    """What an agent is told about one destination: its idempotency semantics, its lookup (None:
    there is none), its operation kinds, and (asynchronous services) where to poll an operation.
    An MCP tool server has ``transport`` MCP_TRANSPORT and its ``endpoint``; each operation is a tool
    (``method`` MCP_TOOL_CALL, ``path`` the tool's name), and so is its lookup."""

    service: str
    idempotency: IdempotencyContract = field(default_factory=IdempotencyContract)
    lookup: LookupContract | None = None
    operations: Mapping[str, OperationContract] = field(default_factory=dict)
    status: StatusContract | None = None
    transport: str | None = None  # MCP_TRANSPORT; None: plain HTTP (or SSH: its operations' method EXEC)
    endpoint: str | None = None  # the path of the MCP endpoint, under the destination's URL

    @property
    def reached_over(self) -> str:
        """The transport an agent reaches it over: mcp, ssh (its operations are commands) or http."""
        if self.transport:
            return self.transport
        return "ssh" if any(op.method == "EXEC" for op in self.operations.values()) else "http"

    def deduplicates(self, kind: str | None) -> bool:
        """Does a retry of this kind of operation reuse the first one's effect? Either the whole
        destination deduplicates on a key, or the operation does on its own (an SSH deploy's marker)."""
        if self.idempotency.deduplicates:
            return True
        operation = self.operations.get(kind or "")
        return bool(operation is not None and operation.dedup)

    def to_dict(self) -> dict[str, Any]:
        """The JSON an agent reads under ``destinations.<name>`` of the intents file."""
        out: dict[str, Any] = {"service": self.service, "idempotency": self.idempotency.to_dict(),
                               "lookup": self.lookup.to_dict() if self.lookup is not None else None,
                               "operations": {kind: op.to_dict() for kind, op in self.operations.items()}}
        if self.status is not None:
            out["status"] = self.status.to_dict()
        if self.transport is not None:
            out["transport"] = self.transport
        if self.endpoint is not None:
            out["endpoint"] = self.endpoint
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DestinationContract:
        """Read ``to_dict()``'s JSON back; keys left out take their defaults, unknown keys are ignored.
        Raises ``ContractError`` naming the key path when a value has the wrong type."""
        if not isinstance(data, Mapping):
            raise ContractError(f"expected an object, got {type(data).__name__}")
        idempotency = _get(data, "idempotency", dict, "")
        lookup = _get(data, "lookup", dict, "")
        status = _get(data, "status", dict, "")
        operations = _get(data, "operations", dict, "") or {}
        for kind, op in operations.items():
            if not isinstance(op, Mapping):
                raise ContractError(f"operations.{kind}: expected an object, got {type(op).__name__}")
        return cls(service=_required(data, "service", str, ""),
                   idempotency=IdempotencyContract.from_dict(idempotency or {}),
                   lookup=LookupContract.from_dict(lookup) if lookup is not None else None,
                   operations={kind: OperationContract.from_dict(op, f"operations.{kind}")
                               for kind, op in operations.items()},
                   status=StatusContract.from_dict(status) if status is not None else None,
                   transport=_get(data, "transport", str, ""), endpoint=_get(data, "endpoint", str, ""))


def _get(data: Mapping[str, Any], key: str, kind: type, where: str, default: Any = None) -> Any:
    value = data.get(key)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ContractError(f"{where + '.' if where else ''}{key}: expected {kind.__name__}, "
                         f"got {type(value).__name__} {value!r}")
    return value


def _required(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = _get(data, key, kind, where)
    if value is None:
        raise ContractError(f"{where + '.' if where else ''}{key}: required key is missing")
    return value


def _seconds(data: Mapping[str, Any], key: str, where: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ContractError(f"{where}.{key}: expected seconds (a number), got {type(value).__name__} {value!r}")
    return float(value)
