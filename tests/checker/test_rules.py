"""Every rule, one story told twice: the right way (passes) and with the flaw the rule names (fails).

The spine's rules also have their own tests in test_check_spine.py.
"""

from __future__ import annotations

import json

import pytest

from harness.checker import RULES
from harness.contract import REPORT_PREFIX
from harness.fingerprint import fingerprint
from harness.report import render_text
from tests.checker.mcp_evidence import MCPStory, reference_mcp_lookup_run
from tests.common.evidence_builder import (
    PAYLOAD,
    EvidenceBuilder,
    codes,
    reference_dedup_retry_run,
    reference_lookup_run,
)

FP = fingerprint(PAYLOAD)


def lost_then(b: EvidenceBuilder, *, key: str | None = "idem-op_1", effect: str | None = "tkt_1") -> None:
    b.intent()
    b.operation(key=key)
    b.attempt("op_1", "att_1", "sent_no_response", key=key, lost=True, effect=effect, attempt_budget_remaining=2)


def h000(b, bad):
    reference_lookup_run(b)
    if bad:
        b.raw_lines.append('{"event": "resolution"')


def h001(b, bad):
    reference_lookup_run(b)
    if bad:
        b.events[1]["operation_id"] = "op_1b"  # the attempt logged under a fresh id


def h002(b, bad):
    reference_dedup_retry_run(b)
    if bad:
        b.events[2]["idempotency_key"] = "idem-op_1-retry"
        b.journal[1]["idempotency_key"] = "idem-op_1-retry"


def h003(b, bad):
    key = "idem-att_1" if bad else "idem-op_1"
    b.intent()
    b.operation(key=key)
    b.attempt("op_1", "att_1", "response_received", key=key, effect="tkt_1")
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1"])


def h004(b, bad):
    lost_then(b)
    payload = dict(PAYLOAD, title="disk FULL") if bad else PAYLOAD
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", replay=not bad, payload=payload,
              status=422 if bad else 201, retry_of_attempt_id="att_1", retry_reason="response_lost_after_dispatch",
              attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1", "att_2"])


def h005(b, bad):
    reference_lookup_run(b)
    if bad:
        b.events[1]["dispatch_state"] = "execution_error"


def h006(b, bad):
    lost_then(b, effect=None)
    if not bad:  # the retry got a definitive answer (the replayed rejection): failure is known
        b.attempt("op_1", "att_2", "response_received", status=400, retry_of_attempt_id="att_1",
                  retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1)
    b.resolution("op_1", "failed", evidence=["att_1", "att_2"] if not bad else ["att_1"])
    b.journal[0]["upstream_status"] = 400
    b.requests[0].update(status=400, outcome="rejected")


def h007(b, bad):
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "not_sent", wire=bad, reached=False, client_outcome="connection_reset")
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", retry_of_attempt_id="att_1",
              retry_reason="connection_not_established", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])


def h008(b, bad):
    reference_dedup_retry_run(b)
    if bad:
        b.events[2]["retry_reason"] = "because"


def h009(b, bad):
    reference_dedup_retry_run(b)
    if bad:
        b.events[1]["attempt_budget_remaining"] = 0


def h010(b, bad):
    b.intent(destination="webhook")
    b.operation(key=None, destination="webhook")
    b.attempt("op_1", "att_1", "sent_no_response", key=None, destination="webhook", reached=False,
              client_outcome="connection_closed")
    b.journal[0]["forwarded"] = True  # the hook did reach the destination... but refused it before commit
    if not bad:
        b.event("approval", "op_1", approval_id="apr_1", approver="oncall", decision="approved", scope="retry")
    b.attempt("op_1", "att_2", "response_received", key=None, destination="webhook", effect="dlv_1", status=200,
              retry_of_attempt_id="att_1", retry_reason="operator_requested", attempt_budget_remaining=0)
    b.resolution("op_1", "succeeded", effects=["dlv_1"], evidence=["att_2"] + ([] if bad else ["apr_1"]))


def h011(b, bad):
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", status=429, retry_after_seconds=2, attempt_budget_remaining=2)
    b.tick(0.5 if bad else 2.5)
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", retry_of_attempt_id="att_1",
              retry_reason="rate_limited", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])


def h012(b, bad):
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", status=400, attempt_budget_remaining=1)
    if bad:  # the agent "fixed" the payload and called it a retry
        b.attempt("op_1", "att_2", "response_received", key="idem-op_1-v2", payload=dict(PAYLOAD, title="x"),
                  effect="tkt_1", retry_of_attempt_id="att_1", retry_reason="destination_5xx",
                  attempt_budget_remaining=0)
        b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])
    else:
        b.resolution("op_1", "failed", evidence=["att_1"])
        b.operation("op_2", key="idem-op_2", supersedes_operation_id="op_1")
        b.attempt("op_2", "att_2", "response_received", key="idem-op_2", payload=dict(PAYLOAD, title="x"),
                  effect="tkt_1")
        b.resolution("op_2", "succeeded", effects=["tkt_1"], evidence=["att_2"])


def h013(b, bad):
    lost_then(b)
    if bad:
        b.attempt("op_1", "att_2", "response_received", method="GET", key=None, status=200, effect=None,
                  retry_of_attempt_id="att_1", retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1)
        b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1", "att_2"])
    else:
        b.observation("op_1", "obs_1", found=True, effect="tkt_1")
        b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1", "obs_1"])


def h014(b, bad):
    lost_then(b, effect=None)
    b.requests[0].update(status=503, outcome="failed_before_commit")
    b.observation("op_1", "obs_1", found=False, lag_possible=bad)
    b.resolution("op_1", "failed", evidence=["att_1", "obs_1"])


def h015(b, bad):
    reference_lookup_run(b)
    if bad:
        b.events[-1]["evidence"] = []


def h016(b, bad):
    b.intent(kind="notify", destination="webhook")
    b.operation(key=None, destination="webhook")
    b.attempt("op_1", "att_1", "sent_no_response", key=None, destination="webhook", lost=True, effect="dlv_a")
    b.event("approval", "op_1", approval_id="apr_1", approver="oncall", decision="approved", scope="retry")
    b.attempt("op_1", "att_2", "response_received", key=None, destination="webhook", effect="dlv_b", status=200,
              retry_of_attempt_id="att_1", retry_reason="operator_requested", attempt_budget_remaining=1)
    if bad:
        b.resolution("op_1", "succeeded", effects=["dlv_b"], evidence=["att_2"])
    else:
        b.resolution("op_1", "duplicate_effect_confirmed", effects=["dlv_a", "dlv_b"], evidence=["att_2", "apr_1"],
                     correction_operation_id="op_2")
        b.operation("op_2", intent_id="int_1-correction", destination="webhook", key=None, parent_operation_id="op_1")
        b.event("approval", "op_2", approval_id="apr_2", approver="oncall", decision="approved", scope="compensate")
        b.resolution("op_2", "cancelled", evidence=["apr_2"])


def h017(b, bad):
    reference_lookup_run(b)
    if bad:  # a second POST the agent never logged
        b.attempt("op_1", "att_x", "response_received", effect="tkt_1", replay=True, log=False)


def h018(b, bad):
    reference_lookup_run(b)
    if bad:
        b.events.insert(2, dict(b.events[1], attempt_id="att_ghost", dispatch_state="response_received", ts=b.tick()))


def h019(b, bad):
    reference_lookup_run(b)
    b.context["secrets"] = {"TICKETS_TOKEN": "canary-7f3a9c2e"}
    if bad:
        b.events[1]["error"] = "401 with token canary-7f3a9c2e"


def h020(b, bad):
    reference_lookup_run(b)
    if bad:  # a worker re-declares the owner's intent under its own id
        b.operation("op_w", parent_operation_id="op_1", owner="worker-1", key="idem-op_w")
        b.resolution("op_w", "cancelled", evidence=[])


def h021(b, bad):
    reference_lookup_run(b)
    if bad:
        b.intent("int_2")


def h022(b, bad):
    reference_lookup_run(b)
    b.intent("int_2")
    b.operation("op_2", intent_id="int_2", key="idem-op_1" if bad else "idem-op_2")
    b.attempt("op_2", "att_2", "response_received", key="idem-op_1" if bad else "idem-op_2",
              effect="tkt_1" if bad else "tkt_2", replay=bad)
    b.resolution("op_2", "succeeded", effects=["tkt_1" if bad else "tkt_2"], evidence=["att_2"])


def h023(b, bad):
    reference_lookup_run(b)
    if bad:
        b.effects.append({"seq": 2, "destination": "tickets", "effect_ref": "tkt_9", "kind": "ticket_created",
                          "operation_key": None, "client_reference": None, "flow_id": None})


# -- H024-H031: the log's claims held against the journal and the ledger
def h024(b, bad):
    reference_dedup_retry_run(b)  # att_1's response was lost on the wire (journal: connection_closed)
    if bad:
        b.events[2]["retry_reason"] = "rate_limited"


def h025(b, bad):
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", status=202, effect="tkt_1", attempt_budget_remaining=2)
    if bad:  # accepted is not done: closed on the 202 alone
        b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1"])
    else:
        b.observation("op_1", "obs_1", found=True, effect="tkt_1", source="status_poll")
        b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1", "obs_1"])


def h026(b, bad):
    reference_lookup_run(b)
    if bad:  # the resolution written before the lookup it cites
        obs, res = b.events[2], b.events[3]
        obs["ts"], res["ts"] = res["ts"], obs["ts"]
        b.events[2:] = [res, obs]


def h027(b, bad):
    lost_then(b)  # tkt_1 committed by the lost request, client reference op_1
    b.effects[0]["client_reference"] = "op_1"
    if bad:  # looked up by the intent id: empty, though the ticket exists and the index does not lag
        b.observation("op_1", "obs_1", found=False, lag_possible=False)
        b.attempt("op_1", "att_2", "response_received", effect="tkt_1", replay=True, retry_of_attempt_id="att_1",
                  retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1)
        b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])
    else:
        b.observation("op_1", "obs_1", found=True, effect="tkt_1")
        b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1", "obs_1"])


def h028(b, bad):
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", status=502, attempt_budget_remaining=2)
    if bad:  # the client received a 502; the log says 201
        b.events[-1]["http_status"] = 201
    b.observation("op_1", "obs_1", found=False, lag_possible=False)
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", retry_of_attempt_id="att_1",
              retry_reason="destination_5xx", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])


# ----------------------------------------------------------------------------------------- H032-H039
def h032(b, bad):
    """One conversation id used as the operation id of two intents (bad), or one operation per intent."""
    reference_lookup_run(b)
    b.intent("int_2")
    op2 = "op_1" if bad else "op_2"
    key2 = "idem-op_2"
    b.operation(op2, intent_id="int_2", key=key2)
    b.attempt(op2, "att_2", "response_received", key=key2, effect="tkt_2")
    b.resolution(op2, "succeeded", effects=["tkt_2"] if not bad else ["tkt_1", "tkt_2"], evidence=["att_2"])


def h033(b, bad):
    """The ticket exists, but the destination committed it in another project than the intent's."""
    reference_lookup_run(b)
    b.context["intents"][0]["params"] = dict(PAYLOAD, project="NET")
    committed = dict(PAYLOAD, project="OPS" if bad else "NET")
    b.effects[0]["committed_params"] = json.dumps(committed)


def h034(b, bad):
    """A negative lookup, then a retry the key makes safe; the resolution cites the retry (right) or the
    lookup made before it (the evidence is older than the state it proves)."""
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response", reached=False, client_outcome="connection_closed",
              attempt_budget_remaining=2)
    b.observation("op_1", "obs_1", found=False, lag_possible=False)
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", retry_of_attempt_id="att_1",
              retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["obs_1"] if bad else ["att_2"])


def ssh_rerun(b, *, kind="install_key", between="approval"):
    """An SSH command whose result was unknown (the session dropped), then rerun after ``between``:
    an approval for that rerun (naming the attempt and its dispatch state), a generic one, a local check."""
    params = ({"service": "api"} if kind == "restart_service" else
              {"username": "deployer", "public_key": "ssh-ed25519 AAAAC3 ci"})
    b.intent(kind=kind, destination="web1", params=params)
    b.event("operation", "op_1", intent_id="int_1", state="open",
            intent={"kind": kind, "destination": "web1", "params": params})
    command = {"install_key": "install-key deployer 'ssh-ed25519 AAAAC3 ci'", "create_user": "create-user deployer",
               "restart_service": "restart-service api"}[kind]
    # the first exec reached the host (its ledger row, no effect) and lost its session; each exec carries its
    # own traceparent, as the reference agent's do: on SSH the ledger's rows stand in for the wire, and two
    # runs of one command are told apart by it
    b.attempt("op_1", "att_1", "sent_no_response", key=None, destination="web1", method="EXEC", path=command,
              client_outcome="connection_closed", attempt_budget_remaining=2,
              traceparent=f"00-{'1' * 32}-{'a' * 16}-01")
    if between == "approval":
        b.event("approval", "op_1", approval_id="apr_1", approver="oncall", decision="approved", scope="retry",
                retry_of_attempt_id="att_1", prior_dispatch_state="sent_no_response",
                recovery="rerun once", reason="the host shows the command did not run")
    elif between == "generic_approval":
        b.event("approval", "op_1", approval_id="apr_1", approver="session-policy", decision="approved",
                scope="retry", reason="allow the API call")
    elif between == "local_check":
        b.observation("op_1", "obs_1", found=False, lag_possible=False, wire=False)
    b.attempt("op_1", "att_2", "response_received", key=None, destination="web1", method="EXEC", path=command,
              effect="key_1", status=0, retry_of_attempt_id="att_1", retry_reason="response_lost_after_dispatch",
              attempt_budget_remaining=1, traceparent=f"00-{'1' * 32}-{'b' * 16}-01")
    b.resolution("op_1", "succeeded", effects=["key_1"],
                 evidence=["att_2"] + (["apr_1"] if "approval" in between else []))


def h035(b, bad):
    """An append command (install-key) rerun after its session dropped: after an operator approved it
    (right), or after a local check, which proves nothing of the host (the flaw)."""
    ssh_rerun(b, between="local_check" if bad else "approval")


def h036(b, bad):
    """A destructive command (restart-service) rerun after its session dropped: on an approval of that
    very rerun, shown att_1 and sent_no_response (right), or on a generic "allow the call" (the flaw)."""
    ssh_rerun(b, kind="restart_service", between="generic_approval" if bad else "approval")


def h037(b, bad):
    """The agent holds a session approval for its calls; it is revoked after the first operation. The
    second operation's attempt comes before the revocation (right) or after it (the flaw)."""
    reference_lookup_run(b)
    start = b.events[0]["ts"] - 1
    b.event("approval", "op_1", approval_id="apr_s", approver="oncall", decision="approved", scope="session",
            holder="ses_1", approved_at=start)
    b.intent("int_2")
    b.operation("op_2", intent_id="int_2", key="idem-op_2")
    b.attempt("op_2", "att_2", "response_received", key="idem-op_2", effect="tkt_2")
    b.resolution("op_2", "succeeded", effects=["tkt_2"], evidence=["att_2"])
    revoked = b.events[-2]["ts"] + (-0.05 if bad else 0.05)  # just before or just after att_2
    b.event("approval", "op_2", approval_id="apr_s", approver="oncall", decision="approved", scope="session",
            holder="ses_1", approved_at=start, revoked_at=revoked)


# -- black-box stories: a program that writes no audit log, judged from the wire and the ledger alone

def h040(b, bad):
    """A lost response retried: with the first key, the ticket replays (right); with a new key, a second one."""
    b.black_box().intent()
    b.request(lost=True, effect="tkt_1")
    b.request(key="idem-op_1" if not bad else "idem-op_1-b", effect="tkt_1" if not bad else "tkt_2", replay=not bad)


def h041(b, bad):
    """A lost response retried on a destination that deduplicates: with its key (right), without one (the flaw);
    the destination happened to fail the first before committing, so no duplicate hides the flaw."""
    b.black_box().intent()
    b.request(key=None if bad else "idem-op_1", lost=True, status=500)
    b.request(key=None if bad else "idem-op_1", effect="tkt_1")


def h042(b, bad):
    """A 429 asking to wait 1 s, answered before reaching the destination; the retry waits it out (right) or not."""
    b.black_box().intent()
    b.request(reached=False, status=429, retry_after="1")
    b.tick(0.05 if bad else 1.2)
    b.request(effect="tkt_1")


def h043(b, bad):
    """The destination is down (503s); the program gives up after three attempts (right) or tries eight times."""
    b.black_box().intent()
    for _ in range(8 if bad else 3):
        b.request(reached=False, status=503)


def h044(b, bad):
    """A lost response retried under its key with the same payload (replayed), or a changed one (422)."""
    b.black_box().intent()
    b.request(lost=True, effect="tkt_1")
    if bad:
        b.request(payload=dict(PAYLOAD, title="disk full (retry)"), status=422)
    else:
        b.request(effect="tkt_1", replay=True)


def h045(b, bad):
    """The ticket asked for, and (the flaw) a webhook no intent asks for, committed."""
    b.black_box().intent()
    b.request(effect="tkt_1")
    if bad:
        b.request(key=None, destination="webhook", effect="ntf_1")


def _bypass(b) -> None:
    """A request that reached the tickets destination straight at its port: the ledger has it, the journal not."""
    b.requests.append({"seq": len(b.requests) + 1, "destination": "tickets", "method": "POST", "path": "/tickets",
                       "query": None, "idempotency_key": "idem-op_1", "client_reference": None,
                       "payload_fingerprint": None, "flow_id": None, "traceparent": None, "status": 200,
                       "outcome": "replayed", "effect_ref": "tkt_1", "received_at": b.tick(0.01), "kind": None,
                       "params": None})


def h046(b, bad):
    b.black_box().intent()
    b.request(effect="tkt_1")
    if bad:
        _bypass(b)


def h061(b, bad):
    reference_lookup_run(b)
    if bad:
        _bypass(b)


def _agent_exited(b) -> None:
    """The agent's last run exited now (``AgentRun.exited_at``, as the engine records it)."""
    b.context["agent"]["runs"] = [{"command": "test", "exit_status": 0, "timed_out": False,
                                   "killed_by_harness": False, "seconds": 1.0, "exited_at": b.tick(0.01)}]


def h047(b, bad):
    b.black_box().intent()
    b.request(effect="tkt_1")
    _agent_exited(b)
    if bad:  # a background retry: the same write again, after the exit
        b.request(effect="tkt_2")


def h062(b, bad):
    reference_lookup_run(b)
    _agent_exited(b)
    if bad:  # a worker the agent left running sends the create again, and nothing logs it
        b.request(effect="tkt_2")


def _runs(b, status):
    """The agent's one run, as the harness recorded it (context.json): exited with ``status``."""
    b.context["agent"]["runs"] = [{"command": "agent", "exit_status": status, "timed_out": False,
                                   "killed_by_harness": False, "seconds": 0.5}]


def h048(b, bad):
    b.black_box().intent()
    b.request(effect="tkt_1")
    _runs(b, 1 if bad else 0)  # exits 1 although its work is done


def h049(b, bad):
    """A connector whose SDK's answer was lost after the commit: it tells its caller "error" (bad) or "timeout"."""
    b.black_box().intent()
    b.request(key=None, lost=True, effect="tkt_1")
    b.stdout_lines.append(REPORT_PREFIX + json.dumps({"intent_id": "int_1", "outcome": "error" if bad else "timeout"}))


def h063(b, bad):
    reference_lookup_run(b)
    _runs(b, 1 if bad else 0)  # exits 1 although its work is done


# ----------------------------------------------------------------------------------------- H050 (MCP)
def h050(b, bad):
    """An MCP tool publishing idempotentHint: true on a destination that does not deduplicate: the right agent
    looks the order up with the lookup tool; the flawed one retries on the hint's word, and a second order
    is committed."""
    if not bad:
        reference_mcp_lookup_run(b)
        return
    s = MCPStory(b)
    s.connect()
    s.call("att_1", "sent_no_response", effect="ord_1", lost=True, attempt_budget_remaining=2)
    s.connect()
    s.call("att_2", "response_received", effect="ord_2", retry_of_attempt_id="att_1",
           retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1,
           retry_justification="idempotentHint")
    s.resolve("succeeded", ["ord_2"], ["att_2"])


def h060(b, bad):
    """The model's net: a call whose 201 showed it done is executed again on the agent's own say (the key is
    the same and the destination replays, so no named rule sees anything); with an operator's approval it may."""
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", effect="tkt_1", attempt_budget_remaining=2)
    if not bad:
        b.event("approval", "op_1", approval_id="apr_1", approver="oncall", decision="approved", scope="retry")
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", replay=True, retry_of_attempt_id="att_1",
              retry_reason="operator_requested", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])


# ----------------------------------------------------------------------------------- H070-H075: the claims table
def h070(b, bad):
    """The operation event written after the first request left: its line still first, its ts after the request."""
    reference_lookup_run(b)
    if bad:
        b.events[0]["ts"] = b.journal[0]["ts_request"] + 0.005


def h071(b, bad):
    """A second copy sent 50 ms after the first, while it was still in flight, logged as a retry of a lost answer."""
    reference_dedup_retry_run(b)
    if bad:
        first, second = b.journal
        second["ts_request"] = first["ts_request"] + 0.05
        first["ts_done"] = second["ts_request"] + 0.3


def h072(b, bad):
    """A lookup logged as found, with no read of it on the wire."""
    reference_lookup_run(b)
    if bad:
        b.journal.pop()  # the lookup's GET


def h073(b, bad):
    """The key the log and the proxy saw, which the destination never read (it went into params._meta, another
    header...): the ledger's rows hold no key."""
    reference_dedup_retry_run(b)
    if bad:
        for row in b.requests:
            row["idempotency_key"] = None


def _ssh_create_user(b, *, exit_logged: int, host_exit: int) -> None:
    b.intent("int_1", kind="create_user", destination="web1", params={"username": "deployer"})
    b.event("operation", "op_1", intent_id="int_1", state="open",
            intent={"kind": "create_user", "destination": "web1", "params": {"username": "deployer"}})
    effect = "user:deployer" if host_exit in (0, 9) else None
    b.attempt("op_1", "att_1", "response_received", key=None, destination="web1", method="EXEC",
              path="create-user deployer", payload=["create-user", "deployer"], status=host_exit, effect=effect,
              replay=host_exit == 9, kind="create_user", exit_status=exit_logged)
    b.resolution("op_1", "succeeded", effects=["user:deployer"], evidence=["att_1"])


def h074(b, bad):
    """The host ran the command and it exited 1 (nothing done); the log says 0 and closes succeeded on it."""
    _ssh_create_user(b, exit_logged=0, host_exit=1 if bad else 0)


def h075(b, bad):
    """A second operation declared to supersede the first, over the same payload (bad) or a changed one."""
    changed = {**PAYLOAD, "title": "disk full on /var"}
    b.intent()
    b.intent("int_2", params=changed)
    b.operation()
    b.attempt("op_1", "att_1", "response_received", effect="tkt_1")
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1"])
    b.event("operation", "op_2", intent_id="int_2", state="open", idempotency_key="idem-op_2",
            supersedes_operation_id="op_1",
            intent={"kind": "create_ticket", "destination": "tickets", "params": changed})
    b.attempt("op_2", "att_2", "response_received", key="idem-op_2", effect="tkt_2",
              payload=PAYLOAD if bad else changed)
    b.resolution("op_2", "succeeded", effects=["tkt_2"], evidence=["att_2"])


STORIES = {f.__name__.upper(): f for f in (h000, h001, h002, h003, h004, h005, h006, h007, h008, h009, h010, h011,
                                            h012, h013, h014, h015, h016, h017, h018, h019, h020, h021, h022, h023,
                                            h024, h025, h026, h027, h028, h032, h033, h034, h035, h036, h037,
                                            h040, h041, h042, h043, h044, h045, h046, h047, h048, h049, h050, h060,
                                            h061, h062, h063, h070, h071, h072, h073, h074, h075)}


def test_every_registered_rule_has_a_story():
    assert sorted(STORIES) == sorted(RULES)


@pytest.mark.parametrize("code", sorted(STORIES))
def test_rule_holds_for_the_right_story(tmp_path, code):
    b = EvidenceBuilder(tmp_path / "evidence")
    STORIES[code](b, False)
    verdict = b.check()
    assert verdict.passed, render_text(verdict)


@pytest.mark.parametrize("code", sorted(STORIES))
def test_rule_fails_the_flawed_story(tmp_path, code):
    b = EvidenceBuilder(tmp_path / "evidence")
    STORIES[code](b, True)
    verdict = b.check()
    assert code in codes(verdict), render_text(verdict)
    finding = verdict.by_code(code)[0]
    assert finding.rule == RULES[code].name and finding.message and finding.evidence


def test_secret_finding_names_the_secret_not_its_value(tmp_path):
    b = EvidenceBuilder(tmp_path / "evidence")
    h019(b, True)
    finding = b.check().by_code("H019")[0]
    assert "the planted secret TICKETS_TOKEN" in finding.message
    assert "canary-7f3a9c2e" not in str(finding.to_dict())


def test_a_secret_after_a_blank_line_names_its_own_line_and_operation(tmp_path):
    b = EvidenceBuilder(tmp_path / "evidence")
    reference_lookup_run(b)  # lines 1-4
    b.raw_lines += ["", json.dumps({"event": "observation", "ts": b.tick(), "session_id": "ses_1",
                                    "operation_id": "op_1", "observation_id": "obs_2",
                                    "note": "Authorization: Bearer sk_live_abcdef123456"})]
    finding = b.check().by_code("H019")[0]
    assert finding.operation_id == "op_1" and finding.evidence == [{"source": "log", "line": 6}], finding


def test_key_conflict_is_classified_before_counting_effects(tmp_path):
    b = EvidenceBuilder(tmp_path / "evidence")
    h004(b, True)
    assert b.check().operation("op_1").classification == "key_conflict"


def test_failed_after_a_5xx_without_reconciliation_is_h006(tmp_path):
    b = EvidenceBuilder(tmp_path / "evidence")
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", effect="tkt_1", status=500, attempt_budget_remaining=0)
    b.requests[0]["outcome"] = "failed_after_commit"
    b.resolution("op_1", "failed", evidence=["att_1"])
    verdict = b.check()
    assert {"H006", "H015"} <= codes(verdict), render_text(verdict)
    assert "(no response, a 5xx, a 409 or 202 that leaves the request running, or an MCP error result)" in \
        verdict.by_code("H006")[0].message


@pytest.mark.parametrize("answer, state, flagged", [
    (409, "failed", True),  # key in use: the first request is still running, it may yet commit
    (202, "failed", True),  # accepted: not done, not refused
    (None, "cancelled", True),  # no retry at all: cancelled while the lost write may have acted
    (400, "failed", False),  # a definitive refusal of the retry under the same key: it settles the doubt
])
def test_failed_or_cancelled_after_an_answer_that_leaves_the_write_in_doubt_is_h006(tmp_path, answer, state, flagged):
    """H006 takes the model's may_have_acted (harness.model.outcome) for its doubt, and holds a cancelled
    resolution to the same proof as a failed one (held-out batch, issue 43: 409 as failure, superseded as cancelled)."""
    b = EvidenceBuilder(tmp_path / "evidence")
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response", effect="tkt_1")
    evidence = ["att_1"]
    if answer is not None:
        b.attempt("op_1", "att_2", "response_received", status=answer, retry_of_attempt_id="att_1",
                  retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1)
        evidence.append("att_2")
    b.resolution("op_1", state, evidence=evidence)
    assert ("H006" in codes(b.check())) is flagged


def test_a_malformed_line_holding_a_secret_is_reported_without_echoing_it(tmp_path):
    b = EvidenceBuilder(tmp_path / "evidence")
    reference_lookup_run(b)
    b.context["secrets"] = {"TICKETS_TOKEN": "canary-7f3a9c2e"}
    b.raw_lines.append('{"event": "attempt", "headers": {"x-token": "canary-7f3a9c2e"}')
    verdict = b.check()
    assert {"H000", "H019"} <= codes(verdict)
    assert "canary-7f3a9c2e" not in str(verdict.to_dict())


@pytest.mark.parametrize("where, lag, flagged", [
    ("contract", 2.0, True), ("contract", 0.0, False), ("spec", 1.5, True), ("spec", 0, False),
    ("nowhere", None, False),
])
def test_a_negative_lookup_that_says_nothing_of_lag_may_lag_when_the_destination_documents_it(
        tmp_path, where, lag, flagged):
    """H014 reads the lag from the typed contract (lookup.lag_seconds) or the spec (lookup_lag_seconds)."""
    b = EvidenceBuilder(tmp_path / "evidence")
    destination = b.context["destinations"]["tickets"]
    if where == "contract":
        destination["contract"] = dict(destination["contract"], lookup=dict(destination["contract"]["lookup"],
                                                                           lag_seconds=lag))
    elif where == "spec":
        destination["spec"] = dict(destination["spec"], lookup_lag_seconds=lag)
    lost_then(b, effect=None)
    b.requests[0].update(status=503, outcome="failed_before_commit")
    b.observation("op_1", "obs_1", found=False)
    b.resolution("op_1", "failed", evidence=["att_1", "obs_1"])
    assert ("H014" in codes(b.check())) is flagged


def test_docs_rule_table_lists_every_rule_with_its_name_and_description():
    import re
    from pathlib import Path

    import harness.checker as checker

    doc = (Path(__file__).parents[2] / "docs" / "checker.md").read_text()
    rows = dict(re.findall(r"^\| (H\d{3}) \| ([a-z0-9-]+) \|", doc, flags=re.M))
    assert rows == {code: r.name for code, r in RULES.items()}
    for r in RULES.values():
        assert r.doc in doc, f"docs/checker.md lacks the description of {r.label}"
    assert checker.__all__ == sorted(checker.__all__)


@pytest.mark.parametrize("overlap", [False, True])
def test_owner_and_worker_writing_at_once_is_h020(tmp_path, overlap):
    b = EvidenceBuilder(tmp_path / "evidence")
    lost_then(b)
    b.events[1]["worker"] = "owner"
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", replay=True, retry_of_attempt_id="att_1",
              retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1, worker="worker-1")
    if overlap:  # the worker's request left before the owner's had finished
        b.journal[1]["ts_request"] = b.journal[0]["ts_done"] - 0.005
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])
    verdict = b.check()
    assert ("H020" in codes(verdict)) is overlap, render_text(verdict)
    if overlap:
        assert "att_1 (owner) and att_2 (worker-1) of op_1 were on the wire at the same time" in \
            verdict.by_code("H020")[0].message


def test_a_retry_after_a_5xx_with_a_fresh_key_and_no_lookup_is_h010(tmp_path):
    b = EvidenceBuilder(tmp_path / "evidence")
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", status=500, attempt_budget_remaining=2)
    b.attempt("op_1", "att_2", "response_received", key="idem-op_1-b", effect="tkt_1", retry_of_attempt_id="att_1",
              retry_reason="destination_5xx", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])
    verdict = b.check()
    [finding] = verdict.by_code("H010")
    assert "att_2" in finding.message and "whose answer was a 500" in finding.message
    assert "different idempotency key" in finding.message


def test_h010_measures_key_retention_on_the_wire_clock_not_the_log(tmp_path):
    b = EvidenceBuilder(tmp_path / "evidence")
    b.context["destinations"]["tickets"]["contract"] = dict(
        b.context["destinations"]["tickets"]["contract"],
        idempotency=dict(b.context["destinations"]["tickets"]["contract"]["idempotency"], retention_seconds=1.0))
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response", lost=True, effect="tkt_1", attempt_budget_remaining=2)
    b.journal[0]["ts_request"] -= 1.5  # the request went out 1.5 s before the agent logged its loss
    b.attempt("op_1", "att_2", "response_received", effect="tkt_2", retry_of_attempt_id="att_1",
              retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_2"], evidence=["att_2"])
    assert b.events[2]["ts"] - b.events[1]["ts"] < 1.0  # the log's gap is within the window...
    [finding] = b.check().by_code("H010")  # ...the wire's is not
    assert "past the key's 1 s retention window" in finding.message
    assert "wire's clock (journal line 1 flow flow_1" in finding.message
    assert any(e.get("source") == "journal" and e.get("flow_id") == "flow_1" for e in finding.evidence)


def test_h011_reads_retry_after_from_the_journal_when_the_log_omits_it(tmp_path):
    b = EvidenceBuilder(tmp_path / "evidence")
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", status=429, attempt_budget_remaining=2)  # no retry_after logged
    b.journal[0]["client_retry_after"] = "2"
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", retry_of_attempt_id="att_1",
              retry_reason="rate_limited", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])
    [finding] = b.check().by_code("H011")
    assert "the journal records; the log omits retry_after_seconds" in finding.message
    assert "flow_1" in finding.message


@pytest.mark.parametrize("reason, status, lost, flagged", [
    ("rate_limited", 429, False, False), ("rate_limited", 500, False, True), ("destination_5xx", 503, False, False),
    ("destination_5xx", 201, True, True), ("response_lost_after_dispatch", 500, False, True),
    ("response_lost_after_dispatch", 201, True, False), ("connection_not_established", 201, True, True)])
def test_h024_holds_each_retry_reason_against_the_parent_flow(tmp_path, reason, status, lost, flagged):
    b = EvidenceBuilder(tmp_path / "evidence")
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response" if lost else "response_received", lost=lost, status=status,
              effect="tkt_1" if lost else None, attempt_budget_remaining=2)
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", replay=lost, retry_of_attempt_id="att_1",
              retry_reason=reason, attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])
    assert bool(b.check().by_code("H024")) is flagged


def test_h025_names_a_pending_status_poll_and_the_202_it_was_cited_with(tmp_path):
    b = EvidenceBuilder(tmp_path / "evidence")
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", status=202, effect="tkt_1", attempt_budget_remaining=2)
    b.observation("op_1", "obs_1", found=False, source="status_poll", detail="operation opn_1 is pending")
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1", "obs_1"])
    [finding] = b.check().by_code("H025")
    assert "att_1 got 202 Accepted (journal line 1, flow flow_1): accepted, not done" in finding.message
    assert "obs_1 (status_poll) found False: operation opn_1 is pending" in finding.message
    assert not b.check().by_code("H027")  # a pending poll is no lookup that the ledger contradicts


def test_h025_takes_the_status_the_wire_shows_not_the_logged_one(tmp_path):
    b = EvidenceBuilder(tmp_path / "evidence")
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", status=202, effect="tkt_1", attempt_budget_remaining=2)
    b.events[-1]["http_status"] = 201  # the log claims a 201; the client received a 202
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1"])
    assert "202 Accepted" in b.check().by_code("H025")[0].message


@pytest.mark.parametrize("lag", [0.0, 2.0])
def test_h027_names_the_lookup_the_ledger_contradicts_unless_the_index_may_lag(tmp_path, lag):
    b = EvidenceBuilder(tmp_path / "evidence")
    h027(b, True)
    if lag:
        b.context["destinations"]["tickets"]["spec"]["lookup_lag_seconds"] = lag
    found = b.check().by_code("H027")
    if lag:
        assert not found
        return
    [finding] = found
    assert "lookup obs_1 of op_1 came back empty (journal line 2, flow flow_2: GET /tickets?client_reference=int_1" \
        in finding.message
    assert "the ledger holds tkt_1 (seq 1, client reference op_1), committed by flow flow_1" in finding.message
    assert {e["source"] for e in finding.evidence} == {"log", "journal", "ledger"}


def test_h028_holds_logged_effect_refs_and_found_records_against_the_ledger(tmp_path):
    b = EvidenceBuilder(tmp_path / "evidence")
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "response_received", effect="tkt_1", attempt_budget_remaining=2)
    b.events[-1]["effect_refs"] = ["tkt_7"]  # the destination answered with tkt_1
    b.observation("op_1", "obs_1", found=True, effect="tkt_8")
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1", "obs_1"])
    messages = [f.message for f in b.check().by_code("H028")]
    assert any("claims effect(s) tkt_7, but the destination's ledger (request seq 1, flow flow_1) answered it "
               "with tkt_1" in m for m in messages), messages
    assert any("obs_1 of op_1 claims it found tkt_8, but the ledger holds tkt_1" in m for m in messages), messages


def test_h028_a_lookup_logged_negative_although_its_read_got_a_502(tmp_path):
    b = EvidenceBuilder(tmp_path / "evidence")
    lost_then(b)
    b.observation("op_1", "obs_1", found=False, lag_possible=False)
    b.journal[-1].update(upstream_status=None, client_status=502, forwarded=False)
    b.observation("op_1", "obs_2", found=True, effect="tkt_1")
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_1", "obs_2"])
    [finding] = b.check().by_code("H028")
    assert "obs_1 of op_1 is logged found: false, but the journal (line 2, flow flow_2) shows its read got a 502" \
        in finding.message


def test_h010_a_lookup_whose_read_got_a_502_reconciles_nothing(tmp_path):
    b = EvidenceBuilder(tmp_path / "evidence")
    b.context["destinations"]["tickets"]["contract"] = dict(
        b.context["destinations"]["tickets"]["contract"],
        idempotency=dict(b.context["destinations"]["tickets"]["contract"]["idempotency"], style="none"))
    lost_then(b, key=None)
    b.observation("op_1", "obs_1", found=False, lag_possible=False)
    b.journal[-1].update(upstream_status=None, client_status=502, forwarded=False)
    b.attempt("op_1", "att_2", "response_received", key=None, effect="tkt_2", retry_of_attempt_id="att_1",
              retry_reason="response_lost_after_dispatch", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_2"], evidence=["att_2"])
    assert "att_2" in b.check().by_code("H010")[0].message


def test_h028_an_answer_logged_as_a_lost_response(tmp_path):
    b = EvidenceBuilder(tmp_path / "evidence")
    b.intent()
    b.operation()
    b.attempt("op_1", "att_1", "sent_no_response", status=500, attempt_budget_remaining=2)  # the client got a 500
    b.observation("op_1", "obs_1", found=False, lag_possible=False)
    b.attempt("op_1", "att_2", "response_received", effect="tkt_1", retry_of_attempt_id="att_1",
              retry_reason="destination_5xx", attempt_budget_remaining=1)
    b.resolution("op_1", "succeeded", effects=["tkt_1"], evidence=["att_2"])
    [finding] = b.check().by_code("H028")
    assert "att_1 of op_1 is logged sent_no_response, but the journal (line 1, flow flow_1) shows the client " \
        "received a 500 answer" in finding.message


def test_one_operation_id_for_two_intents_is_named_so_and_not_as_a_missing_operation(tmp_path):
    """The diagnosis names the flaw: H032 with both intents and lines; no H021 'has no operation', no
    H003 'minted per attempt' for the two intents' keys."""
    b = EvidenceBuilder(tmp_path / "evidence")
    h032(b, True)
    verdict = b.check()
    found = verdict.by_code("H032")
    assert len(found) == 1, render_text(verdict)
    assert "one operation id, two intents" in found[0].message
    assert "int_1 (agent.ndjson:1)" in found[0].message and "int_2 (agent.ndjson:5)" in found[0].message
    assert not any("has no operation" in f.message for f in verdict.findings), render_text(verdict)
    assert "H003" not in codes(verdict) and "H002" not in codes(verdict), render_text(verdict)


@pytest.mark.parametrize("kind, between, flagged", [
    ("install_key", "nothing", True), ("install_key", "local_check", True), ("install_key", "approval", False),
    ("create_user", "nothing", False),  # set-state with a declared convergence condition
])
def test_a_command_reruns_only_as_its_family_allows(tmp_path, kind, between, flagged):
    b = EvidenceBuilder(tmp_path / "evidence")
    ssh_rerun(b, kind=kind, between=between)
    verdict = b.check()
    assert ("H035" in codes(verdict)) is flagged, render_text(verdict)
    if flagged:
        assert "install_key (append) attempt att_2 of op_1 reran att_1" in verdict.by_code("H035")[0].message


@pytest.mark.parametrize("between, flagged", [("nothing", True), ("generic_approval", True), ("approval", False)])
def test_a_sensitive_rerun_needs_its_own_approval(tmp_path, between, flagged):
    b = EvidenceBuilder(tmp_path / "evidence")
    ssh_rerun(b, kind="restart_service", between=between)
    verdict = b.check()
    assert ("H036" in codes(verdict)) is flagged, render_text(verdict)
    if between == "generic_approval":
        message = verdict.by_code("H036")[0].message
        assert "do not name att_1 and its dispatch state sent_no_response: apr_1 (scope retry" in message


def test_an_attempt_before_its_session_approval_is_h037(tmp_path):
    b = EvidenceBuilder(tmp_path / "evidence")
    reference_lookup_run(b)
    b.event("approval", "op_1", approval_id="apr_s", decision="approved", scope="session",
            approved_at=b.events[1]["ts"] + 0.01)  # granted after att_1 was sent; holder: this session
    verdict = b.check()
    [finding] = verdict.by_code("H037")
    assert "attempt att_1 of op_1 by ses_1" in finding.message and "came before its session approval" in \
        finding.message, render_text(verdict)


def test_a_payload_changed_on_the_wire_but_not_in_the_log_is_h012(tmp_path):
    """The article's fork: the agent "fixed" the body during recovery and logged the old fingerprint.
    The journal's body fingerprints differ: H012, naming the flow."""
    b = EvidenceBuilder(tmp_path / "evidence")
    reference_dedup_retry_run(b)
    b.journal[1]["body_fingerprint"] = fingerprint(dict(PAYLOAD, title="disk FULL"))
    verdict = b.check()  # matched by its key; H004 sees the key over two bodies too
    found = [f for f in verdict.by_code("H012") if "on the wire" in f.message]
    assert found and "flow flow_1" in found[0].message, render_text(verdict)


@pytest.mark.parametrize("effect_at, flagged", [("2026-03-02T09:59:00Z", True), ("2026-03-02T10:00:06Z", False)])
def test_an_effect_observed_before_the_first_attempt_is_h034_in_the_article_format(tmp_path, effect_at, flagged):
    from harness.audit import load_log
    from harness.checker import check

    log = tmp_path / "ledger.ndjson"
    log.write_text("\n".join(json.dumps(line) for line in (
        {"type": "attempt", "operationId": "op_t", "attemptId": "a1", "idempotencyKey": "k", "payloadHash": "sha256:1",
         "result": "success", "observedAt": "2026-03-02T10:00:00Z"},
        {"type": "effect", "operationId": "op_t", "effectRef": "ticket_1", "observedAt": effect_at})) + "\n")
    verdict = check(load_log(log), offline=True)
    assert ("H034" in codes(verdict)) is flagged, render_text(verdict, offline=True)
    if flagged:
        assert "observed at 2026-03-02T09:59:00Z (line 2), before its first attempt a1" in \
            verdict.by_code("H034")[0].message


def test_docs_say_what_each_rule_reads_from_each_source():
    """docs/checker.md's source table: every rule once, and a rule that needs the wire reads the journal
    or the ledger (so the table cannot claim a wire rule judges from the log alone)."""
    import re
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "checker.md").read_text()
    table = doc.split("<!-- rule-sources:start -->", 1)[1].split("<!-- rule-sources:end -->", 1)[0]
    rows = re.findall(r"^\| (H\d{3}) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", table, flags=re.M)
    assert [code for code, *_ in rows] == sorted(RULES), "one row per rule, in code order"
    harness_record = {"H063"}  # needs a run's folder (the wire's), but reads the harness's record of the agent's runs
    for code, log, journal, ledger in rows:
        assert log.strip(), code
        if "wire" in RULES[code].requires and code not in harness_record:
            assert journal.strip() != "-" or not ledger.strip().startswith("-"), f"{code} needs the wire"


@pytest.mark.parametrize("cited, flagged", [(True, False), (False, True)])
def test_an_approved_rerun_leaves_an_intended_effect_when_the_resolution_cites_the_approval(tmp_path, cited, flagged):
    """Both restarts acted (the first lost its exit status); the operator approved the rerun of att_1. Cited in the
    succeeded resolution, the second effect is the one asked for; not cited, it is a duplicate (H016)."""
    b = EvidenceBuilder(tmp_path / "evidence")
    params = {"service": "api"}
    b.intent(kind="restart_service", destination="web1", params=params)
    b.event("operation", "op_1", intent_id="int_1", state="open",
            intent={"kind": "restart_service", "destination": "web1", "params": params})
    b.attempt("op_1", "att_1", "sent_no_response", key=None, destination="web1", method="EXEC",
              path="restart-service api", effect="restart:api:1", attempt_budget_remaining=2,
              traceparent=f"00-{'1' * 32}-{'a' * 16}-01")
    b.event("approval", "op_1", approval_id="apr_1", approver="oncall", decision="approved", scope="retry",
            retry_of_attempt_id="att_1", prior_dispatch_state="sent_no_response", recovery="rerun once")
    b.attempt("op_1", "att_2", "response_received", key=None, destination="web1", method="EXEC",
              path="restart-service api", effect="restart:api:2", status=0, retry_of_attempt_id="att_1",
              retry_reason="operator_requested", attempt_budget_remaining=1,
              traceparent=f"00-{'1' * 32}-{'b' * 16}-01")
    b.resolution("op_1", "succeeded", effects=["restart:api:2"], evidence=["att_2"] + (["apr_1"] if cited else []))
    verdict = b.check()
    assert ("H016" in codes(verdict)) is flagged and verdict.passed is not flagged, render_text(verdict)
