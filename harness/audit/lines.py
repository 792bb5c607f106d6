"""One line of a log as the audit reads it (our event, else the article's line), and a whole log read so.

``StreamingAudit.feed`` inlines ``read_line`` for speed; ``load_log`` gives the ``Evidence`` of a bare
log, which ``check(evidence, offline=True)`` judges as the audit does (tests/audit/test_parity.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.audit.article import article_line
from harness.events import parse_line
from harness.evidence import Evidence, load_events


def read_line(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """``(record, None)`` or ``(None, why)``: our event, else a line in the article's format, else why
    it is neither (the reason parsing it as our event gave)."""
    record, error = parse_line(text)
    if record is None:
        article = article_line(text, 0)
        if article is not None:
            return article
    return record, error


def load_log(path: str | Path) -> Evidence:
    """A bare log read whole: its events (ours and the article's), malformed lines and raw text, named
    as the audit names it; no journal, ledger or context."""
    evidence = Evidence(log_name=str(path))
    load_events(Path(path), evidence, read=read_line)
    return evidence
