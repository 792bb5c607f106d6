"""Synthetic evidence folders of many operations, for the report's filters and its size: the stories a
run holds (a clean create, a lost response reconciled by a lookup, a dedup retry with the same key,
a blind retry with a fresh key that makes two tickets, a retry under the same key with another
payload), one after another, each operation with
its own intent, key and payload. `python -m harness report FOLDER --html FILE` then renders them as
it renders a real run's; the tests, the render benchmark and the screenshot script use it.
"""

from __future__ import annotations

from pathlib import Path

from harness.fingerprint import fingerprint
from tests.common.evidence_builder import EvidenceBuilder

STORIES = ("clean", "reconciled", "dedup_retry", "blind_retry", "changed_payload")


def story_of(index: int) -> str:
    return STORIES[index % len(STORIES)]


def build(folder: Path, operations: int) -> Path:
    b = EvidenceBuilder(folder)
    b.context["scenario"] = f"synthetic_{operations}"
    b.context["agent"]["command"] = "python -m synthetic.agent"
    for index in range(operations):
        op, intent, key = f"op_{index:06d}", f"int_{index:06d}", f"idem-{index:06d}"
        payload = {"title": f"ticket {index}", "client_reference": intent}
        b.intent(intent, params=payload)
        b.operation(op, intent, key=key)
        b.events[-1]["intent"]["params"] = payload
        story = story_of(index)
        effect = f"tkt_{index:06d}"
        if story == "clean":
            b.attempt(op, f"att_{index:06d}_1", "response_received", key=key, payload=payload, effect=effect,
                      attempt_number=1, attempt_budget_remaining=2)
            b.resolution(op, "succeeded", effects=[effect], evidence=[f"att_{index:06d}_1"])
        elif story == "reconciled":
            b.attempt(op, f"att_{index:06d}_1", "sent_no_response", key=key, payload=payload, lost=True,
                      effect=effect, attempt_number=1, attempt_budget_remaining=2)
            b.observation(op, f"obs_{index:06d}", found=True, effect=effect)
            b.resolution(op, "succeeded", effects=[effect], evidence=[f"att_{index:06d}_1", f"obs_{index:06d}"])
        elif story == "dedup_retry":
            b.attempt(op, f"att_{index:06d}_1", "sent_no_response", key=key, payload=payload, lost=True,
                      effect=effect, attempt_number=1, attempt_budget_remaining=2)
            b.attempt(op, f"att_{index:06d}_2", "response_received", key=key, payload=payload, effect=effect,
                      replay=True, attempt_number=2, retry_of_attempt_id=f"att_{index:06d}_1",
                      retry_reason="response_lost_after_dispatch", retry_decision="retry",
                      attempt_budget_remaining=1, prior_request_fingerprint=fingerprint(payload))
            b.resolution(op, "succeeded", effects=[effect], evidence=[f"att_{index:06d}_2"])
        elif story == "changed_payload":  # one key, two payloads: a key conflict
            changed = {**payload, "title": f"ticket {index} (edited)"}
            b.attempt(op, f"att_{index:06d}_1", "sent_no_response", key=key, payload=payload, lost=True,
                      effect=effect, attempt_number=1, attempt_budget_remaining=2)
            b.attempt(op, f"att_{index:06d}_2", "response_received", key=key, payload=changed, status=422,
                      attempt_number=2, retry_of_attempt_id=f"att_{index:06d}_1",
                      retry_reason="response_lost_after_dispatch", retry_decision="retry",
                      attempt_budget_remaining=1, prior_request_fingerprint=fingerprint(payload))
            b.resolution(op, "unknown", evidence=[f"att_{index:06d}_2"])
        else:  # a fresh key on the retry: the destination commits twice
            second = f"tkt_{index:06d}b"
            b.attempt(op, f"att_{index:06d}_1", "sent_no_response", key=f"{key}-a", payload=payload, lost=True,
                      effect=effect, attempt_number=1, attempt_budget_remaining=2)
            b.attempt(op, f"att_{index:06d}_2", "response_received", key=f"{key}-b", payload=payload, effect=second,
                      attempt_number=2, retry_of_attempt_id=f"att_{index:06d}_1",
                      retry_reason="response_lost_after_dispatch", retry_decision="retry",
                      attempt_budget_remaining=1, prior_request_fingerprint=fingerprint(payload))
            b.resolution(op, "succeeded", effects=[second], evidence=[f"att_{index:06d}_2"])
    return b.write()
