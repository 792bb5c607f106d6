"""What the harness bounds so that a run of any size is judged, and reported, in bounded time and memory.

Evidence limits (``EvidenceLimits``): how much of an agent's log the harness reads to judge one run. A log
beyond one is not judged at all, neither passed nor failed: the run is INCOMPLETE, with a sentence naming the
file, the value, the limit and how to raise it, and the log stays on disk as the agent wrote it
(docs/checker.md, "Limits"). Judging the part read would be wrong both ways: the rest may hold the
resolution a rule misses (a false finding) or the flaw it hides (a false pass).

Set per scenario (``limits: {agent_log_bytes: N, ...}`` in its YAML), or for a whole command
(``--limit NAME=N`` on ``run`` and ``check``, ``--harness-limit NAME=N`` in pytest); the engine keeps the
limits a run was judged under in its context.json, so ``check FOLDER`` judges it the same way.

Report limits: a text report shows ``FINDINGS_SHOWN`` findings in full and summarises past them, or past
``BLOCKS_SHOWN`` operations (``harness.report.render_text``).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar

FINDINGS_SHOWN = 20  # findings a text report shows in full (--findings-shown N; 0: all)
BLOCKS_SHOWN = 100  # operations (intents) a text report shows one by one when it need not summarise

_paused_lock = threading.Lock()
_paused = {"depth": 0, "was_enabled": False}


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a run's evidence is read, judged and written.

    Reading a log allocates millions of long-lived objects (events, operations, findings), and each full
    collection rescans all of them: the collector's time grows faster than the log, a third of a 100,000-operation
    check (benchmarks/check_scale_bench.py). Reference counting frees what they leave (the peak is the same with the
    collector off). Nested and concurrent uses are counted: the collector comes back when the last one ends."""
    with _paused_lock:
        if _paused["depth"] == 0:
            _paused["was_enabled"] = gc.isenabled()
            gc.disable()
        _paused["depth"] += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused["depth"] -= 1
            if _paused["depth"] == 0 and _paused["was_enabled"]:
                gc.enable()


@dataclass(frozen=True)
class EvidenceLimits:
    """How much of an agent's log is read to judge one run (each a whole number above 0)."""

    agent_log_bytes: int = 256 * 1024 * 1024  # the log file (and a trace-only agent's trace file)
    line_bytes: int = 1024 * 1024  # one line of the log, in UTF-8 bytes
    operations: int = 100_000  # distinct operation ids in the log

    WHAT: ClassVar[dict[str, str]] = {
        "agent_log_bytes": "bytes in the agent's log", "line_bytes": "bytes in one line of the agent's log",
        "operations": "operations (distinct operation ids) in the agent's log"}

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_dict(cls, data: Any) -> EvidenceLimits:
        """The limits a context.json (or a scenario) holds; what it leaves out is the default. Raises
        ``ValueError`` naming the key for anything that is not a limit or not a whole number above 0."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ValueError(f"limits must be an object of {', '.join(cls.names())}, got {type(data).__name__}")
        return cls().with_values(data.items())

    def with_values(self, pairs: Iterable[tuple[str, Any]]) -> EvidenceLimits:
        """These limits with some replaced (``("operations", 500)``, ...), each checked."""
        changes: dict[str, int] = {}
        for name, value in pairs:
            if name not in self.names():
                raise ValueError(f"unknown limit {name!r}; the limits are {', '.join(self.names())}")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"limit {name} must be a whole number of at least 1, got {value!r}")
            changes[name] = value
        return replace(self, **changes)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    def hit(self, name: str, where: str, value: int) -> str:
        """The sentence of a limit hit: the file (and line), the value, the limit, how to raise it."""
        limit = getattr(self, name)
        return (f"{where}: {value:,} {self.WHAT[name]}, over the limit of {limit:,} ({name}); the log was not "
                f"judged and stays on disk as the agent wrote it. To judge it, raise the limit: `limits: {{{name}: "
                f"N}}` in the scenario, `--limit {name}=N` (python -m harness run / check) or "
                f"`--harness-limit {name}=N` (pytest)")


def parse_limit(text: str) -> tuple[str, int]:
    """``NAME=N`` (``--limit``'s value) as ``(name, n)``; ``ValueError`` with the reason otherwise."""
    name, sep, value = text.partition("=")
    name = name.strip().replace("-", "_")
    if not sep:
        raise ValueError(f"expected NAME=N with NAME one of {', '.join(EvidenceLimits.names())}, got {text!r}")
    try:
        number = int(value.strip())
    except ValueError:
        raise ValueError(f"limit {name}: expected a whole number, got {value.strip()!r}") from None
    EvidenceLimits().with_values([(name, number)])  # checks the name and the value
    return name, number
