"""The claims table: every fact an agent logs that the wire, the journal's clock or the ledger can observe, with
the counterpart it is held against, the tolerance, and the rule that checks it, written once.

    CLAIMS                 the rows, in the order docs/contract.md shows them ("What the log claims ...")
    claims_markdown()      that table, with each mode's word made from the rules' ``requires``
    unjudged_labels(...)   the rules of the claims a mode cannot check: listed "not exercised", never "held"

The tolerances are constants the rules import from here, so the number the table prints is the number the rule
uses. Every clock is the machine's wall clock: the agent's ``ts`` and the proxy's ``ts_request``/``ts_done`` are
read from one clock (a container shares the host's), so the bounds are small.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from harness.checker.registry import RULES, applicable

# --- the tolerances (the rules read them here)
# Any logged ts lies within the agent's runs (started_at .. ended_at, the late window included) give or take this:
# an agent writing milliseconds, a monotonic clock, or a clock of its own is off by orders of magnitude.
CLOCK_SKEW_SECONDS = 2.0
# An attempt is stamped when it was sent, or earlier by what the client did before its request reached the proxy:
# a lazy import of its SDK, a connect, an MCP session's handshake, all slowed by a loaded machine (a correct agent
# importing the mcp SDK after stamping was measured 3.2 s ahead at load 18 on 2 cores). Past this, the stamp is not
# the attempt's.
ATTEMPT_LEAD_SECONDS = 10.0
# An operation is declared before its first request leaves: its ts is no later than the proxy's ts_request of that
# request (its first byte reached the proxy after the agent sent it) plus this much (an RFC 3339 ts rounded up).
DECLARATION_SLACK_SECONDS = 0.002
# Two attempts of one process overlap on the wire when the later reached the proxy this long before the earlier
# flow ended.
OVERLAP_SLACK_SECONDS = 0.002
# No client gives up on an answer sooner than this: an answer delivered faster reached a client still waiting.
GAVE_UP_AFTER_SECONDS = 0.25
# Fault actions that keep a flow open at the proxy after its client may have given up on it (the answer held past
# the client's timeout, the request delayed): what the journal then says the client received, it may not have read.
HOLDING_FAULTS = frozenset({"hold_response", "latency"})
# The attempt field by which a log declares a second attempt concurrent with an earlier one (a hedged request).
CONCURRENT_FIELD = "concurrent_with_attempt_id"

# --- the modes a claim is judged in
SCENARIO_RUN = "scenario run"
BLACK_BOX_RUN = "black-box run"
OFFLINE_AUDIT = "offline audit"
MODES = (SCENARIO_RUN, BLACK_BOX_RUN, OFFLINE_AUDIT)
_MODE_FLAGS = {SCENARIO_RUN: (False, False), BLACK_BOX_RUN: (False, True), OFFLINE_AUDIT: (True, False)}
_WHY_NOT = {BLACK_BOX_RUN: "no log", OFFLINE_AUDIT: "no wire"}


@dataclass(frozen=True)
class Claim:
    """One row: what the log says (``logged``), what observes it (``counterpart``), how far the two may differ
    (``tolerance``), the rules that hold them to each other (``rules``, the first names the flaw) and the flaw a
    wrong agent shows there (``flaw``)."""

    name: str
    logged: str
    counterpart: str
    tolerance: str
    rules: tuple[str, ...]
    flaw: str
    counterpart_in_log: bool = False  # the counterpart is the log's own (its processes), not the wire's

    def modes(self) -> dict[str, str]:
        """Each mode's word: the rules that judge the claim there, or why none can ("not exercised (no wire)"); a
        rule that still runs there reads the log alone, and says so."""
        words = {}
        for mode in MODES:
            offline, black_box = _MODE_FLAGS[mode]
            judging = [code for code in self.rules if applicable(RULES[code], offline=offline, black_box=black_box)]
            if judging and (mode == SCENARIO_RUN or self.counterpart_in_log):
                words[mode] = ", ".join(judging)
            elif judging:
                words[mode] = f"not exercised ({_WHY_NOT[mode]}); the log against itself: {', '.join(judging)}"
            else:
                words[mode] = f"not exercised ({_WHY_NOT[mode]})"
        return words


CLAIMS: tuple[Claim, ...] = (
    Claim("dispatch state", "attempt `dispatch_state`",
          "the matched flow: did it leave (`forwarded`), what the client got (`client_outcome`)",
          f"`sent_no_response` is wrong once the client received an answer, unless that answer went out "
          f"{GAVE_UP_AFTER_SECONDS} s or more after the request and the attempt's `ts` is no later than it (the "
          f"client may have timed out first); `response_received` is wrong for a flow "
          f"that never left and got nothing; `not_sent` for a flow the proxy saw; a lost answer is `sent_no_response`",
          ("H028", "H005", "H007"), "a 201 or an MCP result the client received, logged as lost"),
    Claim("status and effect refs", "attempt `http_status`, `effect_refs`, `tool_error`; resolution `effect_refs`",
          "the status the client received (`client_status`, `rpc.is_error`); the ledger rows of the flow "
          "(`effect_ref`) and of the operation",
          "exact", ("H028", "H015"), "a status, or an effect ref, the answer never carried"),
    Claim("clock", "every event's `ts`",
          "the agent's runs (`started_at`..`ended_at`, context.json) and the journal's `ts_request` of each "
          "matched flow",
          f"within the runs, {CLOCK_SKEW_SECONDS} s either side (every run: a restarted agent keeps the same "
          f"clock); an attempt no more than {ATTEMPT_LEAD_SECONDS} s before its request reached the proxy (what its "
          f"client did before sending: an import, a connect, a handshake, on a loaded machine)",
          ("H070",), "milliseconds, a monotonic clock or a clock of its own: off by orders of magnitude"),
    Claim("declared before dispatch", "operation `ts` (its first declaration)",
          "the journal's `ts_request` of the operation's first request",
          f"no later than it, plus {DECLARATION_SLACK_SECONDS} s; a declaration whose line is written after the "
          f"request left but whose `ts` says before it is not observable (the file keeps no write times)",
          ("H070", "H060"), "the operation event written after the first request left, its line still first"),
    Claim("one attempt at a time", "attempts of one operation, their `retry_of_attempt_id`",
          "the flows' intervals on the journal's clock (`ts_request`..`ts_done`)",
          f"two attempts of one process do not overlap by more than {OVERLAP_SLACK_SECONDS} s unless the later "
          f"names the earlier in `{CONCURRENT_FIELD}`; excused when the later left {GAVE_UP_AFTER_SECONDS} s or more "
          f"after the earlier and the earlier got no answer or was held by the proxy "
          f"({', '.join(sorted(HOLDING_FAULTS))}): its client had timed out; two processes at once: H020",
          ("H071", "H020"), "a second copy sent while the first was in flight, logged as a retry of a lost answer"),
    Claim("retry reason", "attempt `retry_reason`, `retry_after_seconds`",
          "the retried attempt's flow (429, 5xx, lost, refused) and its `client_retry_after`",
          "the vocabulary's table (contract section 7); the wait on the wire's clock",
          ("H024", "H011"), "`destination_5xx` after a lost answer; a retry sooner than Retry-After"),
    Claim("observations", "observation `found`, `effect_refs`",
          "its read on the wire (a journal entry of the lookup's route) and the ledger's effects",
          "a `found: true|false` needs a read the proxy saw, answered 2xx; the refs found are the ledger's; a "
          "negative with the effect committed before the read and no declared lag is contradicted",
          ("H072", "H028", "H027"), "a lookup logged as found, with no read of it on the wire"),
    Claim("idempotency key", "attempt `idempotency_key`",
          "what the proxy read from the request (header, body field, MCP argument or `params._meta`), and what "
          "the destination read (its ledger request row's `idempotency_key`)",
          "exact, where the destination takes keys; for an SSH marker, the `--operation-id` the host parsed",
          ("H073", "H002"), "a key sent where the tool never reads it (MCP `_meta`), trusted as the key"),
    Claim("SSH exit status", "attempt `exit_status` (SSH)",
          "the exit status the SSH host's ledger row records for the command it ran",
          "exact; a `succeeded` closure is proved by the host's exit, not the log's",
          ("H074", "H025"), "an exit status taken at the log's word"),
    Claim("one decider", "resolution, by its `session_id`; attempts' `worker`",
          "the processes whose events the log holds (a worker: a session whose attempts carry `worker`)",
          "one process closes an operation: owner or worker, never both (a restarted owner is the owner)",
          ("H020",), "owner and worker both writing a resolution", counterpart_in_log=True),
    Claim("superseded payload", "operation `supersedes_operation_id`",
          "the parameters the destination parsed for each operation's writes (ledger `params`), else the logged "
          "intents' `params`",
          "they differ, the client reference and the key's body field left out", ("H075", "H012"),
          "a new operation declared to supersede one whose payload did not change"),
    Claim("payload", "attempt `request_fingerprint`", "the journal's `body_fingerprint` of the flow",
          "exact: one key, one payload", ("H012", "H004"), "a body changed under an unchanged fingerprint"),
    Claim("attempts on the wire", "attempts logged sent; lookups",
          "the journal's flows (the SSH host's request rows), each matched to one attempt or observation",
          "every write on the wire is a logged attempt, every sent attempt is on the wire, a lookup is no attempt",
          ("H017", "H018", "H013"), "a retry the log hides, an attempt never sent"),
)


def claims_markdown() -> str:
    """The table of docs/contract.md: each claim, its counterpart, its tolerance, its rules, and each mode's word."""
    lines = ["| claim | logged | counterpart | tolerance | rules | " + " | ".join(MODES) + " |",
             "|---" * (5 + len(MODES)) + "|"]
    for claim in CLAIMS:
        words = claim.modes()
        cells = [claim.name, claim.logged, claim.counterpart, claim.tolerance, ", ".join(claim.rules),
                 *(words[mode] for mode in MODES)]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


@cache  # asked once a run; the registry is complete once the checker is imported
def unjudged_labels(*, offline: bool, black_box: bool) -> tuple[str, ...]:
    """The labels of the claims' rules this mode cannot apply: a check's word for them is "not exercised"."""
    labels: dict[str, None] = {}
    for claim in CLAIMS:
        for code in claim.rules:
            r = RULES[code]
            if not applicable(r, offline=offline, black_box=black_box):
                labels[r.label] = None
    return tuple(labels)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
