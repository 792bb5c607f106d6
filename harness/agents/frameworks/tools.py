"""What the framework agents share, and no framework: one tool per intent kind, its two bodies (the
correct one and the blind one a tutorial shows), and the loop that opens one operation scope per intent
around a framework run. Logging is harness.instrument's (every request a tool makes is an attempt or a
lookup as it went on the wire; leaving the scope writes the resolution the evidence supports), mcp_tools.py's
for an MCP tool server (its tools/call attempts and lookup-tool observations), or traced.py's spans only
(``--trace``). Each scope offers the tools the same interface: harness.instrument's Operation's.

Why the operation scope wraps the whole framework run, not the tool: a framework retries a tool by
executing it again (LangGraph re-runs the node, the Agents SDK and pydantic-ai ask the model, which calls the
tool again under a new call id). Every execution of one intent's tool is then an attempt of ONE operation:
the same operation id, the same idempotency key, retries linked to what came before.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import requests

from harness.agents.frameworks import scope as framework_scope
from harness.agents.frameworks.scope import MAX_EXECUTIONS
from harness.agents.instrumented.plain_requests import auth, worth_retrying
from harness.contract import MCP_ENDPOINT, MCP_TRANSPORT, destination_env_name
from harness.instrument import current_operation, instrument
from harness.model.agent import may_have_acted

TIMEOUT = (1.0, 1.5)  # connect, read: the catalogue's client timeout
MAX_RETRY_AFTER = 5.0
SESSION = requests.Session()


class SafeToRetry(Exception):
    """This execution did not settle the intent, and executing the tool again is safe: nothing was sent, a
    429's Retry-After was waited out, or the outcome is unknown and the next execution looks it up before it
    sends anything (the correct tool's first step). The only exception a correct agent lets its framework
    retry."""


class Rejected(Exception):
    """The destination refused the request (an answer that proves it did not act, other than a 429):
    executing it again cannot help."""


@dataclass(frozen=True)
class ToolSpec:
    """The tool a model calls for one intent kind on one destination: its name, description and arguments
    (the intent's params, as a model would pass them)."""

    name: str
    kind: str
    destination: str
    contract: dict[str, Any]
    params: tuple[str, ...]

    @property
    def description(self) -> str:
        return f"{self.kind} on {self.destination}: commits the effect, once."

    @property
    def json_schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": {p: {} for p in self.params}, "required": list(self.params),
                "additionalProperties": False}


def parse_mode(argv: list[str] | None, doc: str | None, *, trace: bool = False,
               extra: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    """``--wrong``: the framework's common wrong retry setting and the blind tool; ``--trace`` (where the
    agent offers it): OpenTelemetry spans only, no audit log; ``extra`` adds an agent's own options."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wrong", action="store_true",
                        help="retry the tool on every exception, without a key or a lookup (the common mistake)")
    if extra is not None:
        extra(parser)
    if trace:
        parser.add_argument("--trace", action="store_true",
                            help="log nothing but OpenTelemetry spans to HARNESS_TRACE_FILE (agent_log: otel)")
    args = parser.parse_args(argv)
    args.trace = bool(getattr(args, "trace", False))
    return args


def load_intents() -> dict[str, Any]:
    with open(os.environ["HARNESS_INTENTS"], encoding="utf-8") as f:
        return dict(json.load(f))


def tool_specs(doc: dict[str, Any]) -> dict[tuple[str, str], ToolSpec]:
    """One tool per (destination, kind) among the intents; named after the kind, or kind_on_destination when
    two destinations share a kind."""
    pairs = {(i["destination"], i["kind"]): i for i in doc["intents"]}
    kinds = [kind for _, kind in pairs]
    specs = {}
    for (destination, kind), intent in pairs.items():
        name = kind if kinds.count(kind) == 1 else f"{kind}_on_{destination}"
        specs[destination, kind] = ToolSpec(name, kind, destination, doc["destinations"][destination],
                                            tuple(intent["params"]))
    return specs


def run_intents(run_one: Callable[[dict[str, Any], ToolSpec], str], *, trace: bool = False) -> None:
    """``run_one(intent, tool)`` (one framework run: the model calls the tool for the intent) inside one
    operation scope per intent; what the run ended with is printed (stdout is kept as evidence). The scope is
    harness.instrument's (an audit log), or with ``trace`` traced.py's (OpenTelemetry spans only, the global
    tracer provider exporting to HARNESS_TRACE_FILE, so a framework's own spans land there too)."""
    doc = load_intents()
    specs = tool_specs(doc)

    def one(intent: dict[str, Any]) -> None:
        try:
            said = run_one(intent, specs[intent["destination"], intent["kind"]])
        except Exception as exc:  # noqa: BLE001 - the framework gave up: the outcome is for the log
            said = f"{type(exc).__name__}: {exc}"
        print(f"{intent['intent_id']}: {said}", flush=True)

    if trace:
        from opentelemetry.trace import set_tracer_provider

        from harness.agents.frameworks.traced import TracedOperation
        from harness.otel.exporter import tracer_provider

        provider = tracer_provider(service_name="framework-agent")
        set_tracer_provider(provider)
        tracer = provider.get_tracer("harness.agents.frameworks")
        session = str(provider.resource.attributes["service.instance.id"])
        try:
            for intent in doc["intents"]:
                if doc["destinations"][intent["destination"]].get("transport") == MCP_TRANSPORT:
                    raise SystemExit(f"--trace records HTTP requests as spans; {intent['destination']} is an MCP "
                                     "tool server: run without --trace (its calls are logged as audit events)")
                with TracedOperation(tracer, intent, doc["destinations"][intent["destination"]], session).scope():
                    one(intent)
        finally:
            provider.shutdown()
        return
    with instrument() as audit:
        for intent in audit.todo(doc["intents"]):
            contract = doc["destinations"][intent["destination"]]
            if contract.get("transport") == MCP_TRANSPORT:  # logged by mcp_tools.py, not harness.instrument
                from harness.agents.frameworks.mcp_tools import McpOperation

                base = os.environ[destination_env_name(intent["destination"])]
                with McpOperation(audit.recorder, intent, contract, base, MAX_EXECUTIONS).scope():
                    one(intent)
                continue
            with audit.operation(intent, max_attempts=MAX_EXECUTIONS):
                one(intent)


def the_operation(tool: ToolSpec) -> Any:
    """The scope the tool runs in (opened by run_intents around the framework run): harness.instrument's
    Operation, traced.py's TracedOperation or mcp_tools.py's McpOperation (the same interface; scope.py)."""
    op = framework_scope.current() or current_operation()
    if op is None or (op.destination, op.kind) != (tool.destination, tool.kind):
        raise Rejected(f"{tool.name} called outside its intent's operation")
    return op


def http_of(op: Any) -> Any:
    """The session a tool sends with: the traced scope's (each request a span), else the shared one
    (harness.instrument logs what crosses urllib3)."""
    return getattr(op, "http", SESSION)


@contextmanager
def execution(op: Any) -> Iterator[None]:
    """One execution of the tool (the traced scope marks one that only looked up)."""
    if hasattr(op, "execution"):
        with op.execution():
            yield
    else:
        yield


# -- the correct tool ---------------------------------------------------------------------------------

def carry_out(tool: ToolSpec, params: dict[str, Any]) -> str:
    """One execution of the correct tool: nothing when an earlier execution's evidence names the effect (the
    operation is done); reconcile first when an earlier execution left the outcome unknown (a lookup, or the
    key's dedup), then send once with the operation's key and reference.
    Raises SafeToRetry when a new execution is safe, Rejected when none would help."""
    op = the_operation(tool)
    if tool.contract.get("transport") == MCP_TRANSPORT:
        return _carry_out_mcp(tool, params, op)
    with execution(op):
        return _carry_out(tool, params, op)


def _carry_out_mcp(tool: ToolSpec, params: dict[str, Any], op: Any) -> str:
    """The correct tool on an MCP tool server, through our own MCP client."""
    return asyncio.run(carry_out_mcp(op.our_client, tool, params, op))


async def carry_out_mcp(via: Any, tool: ToolSpec, params: dict[str, Any], op: Any) -> str:
    """The correct tool on an MCP tool server, its calls made by ``via`` (mcp_tools.CallTool: our client, or
    a framework's MCP adapter): the same steps, through the lookup tool and one tools/call with the
    operation's key argument (or its natural key, the client reference). Raises SafeToRetry as carry_out."""
    idem = tool.contract["idempotency"]
    if op.effect_refs:
        return already_done(op)
    if op.last_attempt is not None and op.last_attempt.uncertain:
        found = await op.look_up_via(via)
        if found:
            return f"not sent again: the lookup tool found {', '.join(found)}"
        if found is None and idem["style"] == "none":
            return "not sent again: the outcome stays unknown (no answered lookup, no dedup to make a retry safe)"
    route = tool.contract["operations"][tool.kind]
    arguments = {**params, route.get("client_reference_field") or "client_reference": op.operation_id}
    key = None
    if idem["style"] == "natural_key":
        key = op.operation_id  # one effect per client reference: the reference is the key
    elif idem["style"] != "none" and idem.get("body_field"):
        key = arguments[idem["body_field"]] = op.idempotency_key
    record, result = await op.call_via(via, route["path"], arguments, key)
    if result is None:
        raise SafeToRetry(f"no result ({record.dispatch_state}): the next execution looks it up first")
    if result.is_error:
        raise SafeToRetry("an error result: the tool may have committed first; the next execution looks it up")
    return f"done: {op.effect_ref}"


def already_done(op: Any) -> str:
    """What an execution of a done operation says: a framework ran the tool again after its success (agno's
    Agent(retries=N) reruns a failed run whole), and the operation's evidence already names its effect."""
    return f"already done: {', '.join(op.effect_refs)} (not sent again)"


def _carry_out(tool: ToolSpec, params: dict[str, Any], op: Any) -> str:
    if op.effect_refs:
        return already_done(op)
    if op.last_attempt is not None and op.last_attempt.uncertain:
        if not worth_retrying(http_of(op), base_url(tool), tool.contract, op):
            return (f"not sent again: the lookup found {', '.join(op.effect_refs)}" if op.effect_refs
                    else "not sent again: the outcome stays unknown (no lookup, no dedup to make a retry safe)")
    response = send(tool, params, op, key=op.idempotency_key, reference=op.operation_id)
    if response.status_code == 429:
        time.sleep(min(float(response.headers.get("Retry-After", "1")), MAX_RETRY_AFTER))
        raise SafeToRetry("rate limited: the Retry-After was waited out, nothing was done")
    if response.status_code == 202:  # accepted, not done: this tool polls no status, the scope leaves it unknown
        return "accepted (202), not done: the outcome stays open"
    if may_have_acted("response_received", response.status_code):
        if response.status_code == 409:  # still processing under this key: give the first request a moment
            time.sleep(0.3)
        raise SafeToRetry(f"HTTP {response.status_code}: the destination may have acted, or may still act; "
                          "the next execution looks it up first")
    if not response.ok:
        raise Rejected(f"HTTP {response.status_code}: {response.text[:200]}")
    return f"done: {op.effect_ref or response.status_code}"


def send(tool: ToolSpec, params: dict[str, Any], op: Any, *, key: str | None,
         reference: str | None) -> requests.Response:
    """One request as the contract says: a lost answer or a timeout is SafeToRetry (the correct tool's next
    execution reconciles first), a connection never made too (nothing was sent)."""
    route = tool.contract["operations"][tool.kind]
    idem = tool.contract["idempotency"]
    body = {**(route.get("body_defaults") or {}), **params}
    headers = auth(tool.destination)
    if reference is not None and route.get("client_reference_field"):
        body[route["client_reference_field"]] = reference
    if key is not None and idem["style"] != "none":
        if idem.get("body_field"):
            body[idem["body_field"]] = key
        else:
            headers[idem.get("header") or "Idempotency-Key"] = key
    url = base_url(tool) + route["path"].format(**params)
    try:
        return http_of(op).request(route["method"], url, json=body, headers=headers, timeout=TIMEOUT)
    except requests.ConnectTimeout as exc:
        raise SafeToRetry(f"never connected, nothing was sent: {exc}") from exc
    except (requests.ConnectionError, requests.Timeout) as exc:
        raise SafeToRetry(f"no answer ({type(exc).__name__}): the outcome is unknown; "
                          "the next execution looks it up") from exc


# -- the blind tool -----------------------------------------------------------------------------------

def raise_only_when_safe(tool: ToolSpec, params: dict[str, Any]) -> str:
    """The correct tool for a framework that retries whatever a tool raises (smolagents, crewAI, agno through
    RetryAgentRun): it raises only SafeToRetry; a refusal, or what no retry can mend, is said, never raised."""
    try:
        return carry_out(tool, params)
    except SafeToRetry:
        raise
    except Exception as exc:  # noqa: BLE001 - said to the model, which must not call again
        return f"failed, do not call this tool again for this request: {type(exc).__name__}: {exc}"


def post_blindly(tool: ToolSpec, params: dict[str, Any]) -> str:
    """The tool as a tutorial writes it: POST the arguments, raise on a bad status. No key, no reference, no
    lookup: whatever retries it (the framework) sends the same write again, blind."""
    route = tool.contract["operations"][tool.kind]
    op = the_operation(tool)
    if tool.contract.get("transport") == MCP_TRANSPORT:  # a tools/call of the arguments, an error raised
        _, result = op.call(route["path"], dict(params), None)
        if result is None or result.is_error:
            raise RuntimeError(f"{tool.name} failed: {'no result' if result is None else 'error result'}")
        return f"done: {op.effect_ref}"
    with execution(op):
        response = http_of(op).request(route["method"], base_url(tool) + route["path"].format(**params),
                                       json={**(route.get("body_defaults") or {}), **params},
                                       headers=auth(tool.destination), timeout=TIMEOUT)
    response.raise_for_status()
    return f"done: HTTP {response.status_code} {response.text[:120]}"


def base_url(tool: ToolSpec) -> str:
    return os.environ[destination_env_name(tool.destination)].rstrip("/")


def destination_url(tool: ToolSpec) -> str:
    """The MCP endpoint of the tool's destination (through the fault proxy), for a framework's own MCP client."""
    return base_url(tool) + (tool.contract.get("endpoint") or MCP_ENDPOINT)


def call_id(intent: dict[str, Any], n: int) -> str:
    """The scripted model's tool call id: the n-th call it makes for this intent."""
    return f"call_{intent['intent_id']}_{n}"


def typed_function(tool: ToolSpec, sample: dict[str, Any], body: Callable[[ToolSpec, dict[str, Any]], str]
                   ) -> Callable[..., str]:
    """The tool as a typed Python function (keyword arguments named and typed after an intent's params), the
    form the Agents SDK's ``function_tool`` and pydantic-ai's ``Tool`` read their JSON schema from."""

    def function(**params: Any) -> str:
        return body(tool, params)

    scalar = (str, int, float, bool)
    annotations = {p: type(sample[p]) if isinstance(sample[p], scalar) else Any for p in tool.params}
    function.__name__ = function.__qualname__ = tool.name
    function.__doc__ = tool.description
    function.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY, annotation=a) for p, a in annotations.items()],
        return_annotation=str)
    function.__annotations__ = {**annotations, "return": str}
    return function
