"""Audit logs the audit tests share, written with the real recorder."""

from __future__ import annotations

from pathlib import Path

from harness.recorder import Recorder


def late_observation_log(path: Path, operations: int, *, chain: bool = False) -> Path:
    """``operations`` clean ticket operations, then a late observation for the first one: the line a
    streaming window may already have judged its operation without."""
    with Recorder(path, session_id="ses_1", chain=chain) as rec:
        for n in range(operations):
            rec.operation(f"op_{n}", intent_id=f"int_{n}")
            rec.attempt(f"op_{n}", f"att_{n}", "response_received", effect_refs=[f"tkt_{n}"])
            rec.resolution(f"op_{n}", "succeeded", effect_refs=[f"tkt_{n}"], evidence=[f"att_{n}"])
        rec.observation("op_0", "obs_late", source="callback", found=True, effect_refs=["tkt_0"])
    return path
