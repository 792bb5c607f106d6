"""A run stopped by a signal: its evidence is kept and marked interrupted, never judged; a second signal
stops at once.

``handling()`` wraps one run (``engine.run_scenario``): SIGINT (Ctrl-C) and SIGTERM raise ``Interrupted``
(SIGTERM would otherwise end Python without any cleanup), the engine writes why into context.json and
saves what it can inside ``deferred()``, where a first signal waits for the block's end. A second signal
while the first is handled ends the process at once with one line on stderr and no traceback
(``os._exit``, status 128 + the signal): what the harness started notices its parent is gone as after a
``kill -9`` (the destination processes save the ledger into the run's folder, the agent's supervisor kills
the agent's group, the proxy stops), and the folder already says the run was interrupted.

Signal handlers can only be set in the main thread; elsewhere (a matrix worker thread) these are no-ops and
Python's own KeyboardInterrupt reaches the main thread as before.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from harness import notices

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal (a KeyboardInterrupt, so that pytest and the CLI stop as on Ctrl-C);
    ``evidence_dir``: the folder of the run it stopped, when the engine knows it."""

    def __init__(self, signal_name: str, evidence_dir: Any = None) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name
        self.evidence_dir = evidence_dir

    @property
    def signal_number(self) -> int:
        return int(getattr(signal.Signals, self.signal_name, signal.SIGINT))

    def __str__(self) -> str:
        where = f"; its evidence is kept in {self.evidence_dir}, marked interrupted" if self.evidence_dir else ""
        return f"the run was stopped by {describe_signal(self.signal_name)}{where}"


class _State:
    def __init__(self) -> None:
        # the first signal this process received: never forgotten, as a front end stops once a run is
        # interrupted, so that any later one (while the pool of destinations closes, say) stops at once
        self.received: str | None = None
        self.deferring = 0  # depth of ``deferred`` blocks
        self.pending: str | None = None  # a first signal that arrived inside one
        self.installed = 0  # depth of ``handling`` blocks
        # called with the signal's name as soon as the first one comes, before anything else can stop the
        # process (``when_signalled``): the run under way marks its folder interrupted there
        self.callbacks: list[Callable[[str], None]] = []


_STATE = _State()


def describe_signal(name: str) -> str:
    return {"SIGINT": "SIGINT (Ctrl-C)", "SIGTERM": "SIGTERM"}.get(name, name)


def reason(exc: BaseException) -> str:
    """Why a run ended before its teardown, as context.json keeps it."""
    if isinstance(exc, Interrupted):
        return describe_signal(exc.signal_name)
    if isinstance(exc, KeyboardInterrupt):
        return describe_signal("SIGINT")
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r})"
    return f"{type(exc).__name__}: {exc}"


def _handler(signum: int, frame: FrameType | None) -> None:
    name = signal.Signals(signum).name
    if _STATE.received is not None:
        notices.say(f"\nretry-harness: {describe_signal(name)} again: stopping now. The run's evidence folder keeps "
                    "what was saved and says it was interrupted; what the harness started stops as it sees the "
                    "harness gone.\n")
        os._exit(128 + signum)
    _STATE.received = name
    for callback in list(_STATE.callbacks):
        with contextlib.suppress(Exception):  # the mark is a courtesy to the folder; stopping comes first
            callback(name)
    if _STATE.deferring:
        _STATE.pending = name
        notices.say(f"\nretry-harness: {describe_signal(name)}: saving the evidence of the run under way first "
                    "(press Ctrl-C again to stop at once)\n")
        return
    raise Interrupted(name)


def pending() -> str | None:
    """The first signal that came inside the ``deferred`` block under way (held until its end), or None: the
    teardown asks before it marks a folder complete, so a run stopped while it saved is never marked whole."""
    return _STATE.pending


@contextlib.contextmanager
def when_signalled(callback: Callable[[str], None]) -> Iterator[None]:
    """Within the block, ``callback(signal_name)`` runs as soon as a first signal comes (in the handler)."""
    _STATE.callbacks.append(callback)
    try:
        yield
    finally:
        _STATE.callbacks.remove(callback)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """For the block (one run): SIGINT and SIGTERM raise ``Interrupted``, a second one stops at once. The
    handlers before it are restored after it, unless a signal came: the front end is stopping then, and any
    later signal (while it closes the destination pool, say) stops it at once, without a traceback."""
    if not _in_main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    _STATE.installed += 1
    for sig in SIGNALS:
        signal.signal(sig, _handler)
    try:
        yield
    finally:
        _STATE.installed -= 1
        if _STATE.received is None:  # once a run was interrupted the process is stopping: a later signal stops it
            for sig, handler in previous.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def deferred(*, raise_after: bool = True) -> Iterator[None]:
    """Within the block (the evidence being saved), a first signal waits for its end, then raises
    ``Interrupted`` (``raise_after``; else it is dropped: the caller is stopping anyway). A second one, as
    everywhere, stops at once. The block runs under ``handling`` if no caller set it up."""
    if not _in_main_thread():
        yield
        return
    with handling():
        _STATE.deferring += 1
        try:
            yield
        finally:
            _STATE.deferring -= 1
            pending, _STATE.pending = (_STATE.pending, None) if not _STATE.deferring else (None, _STATE.pending)
            if pending is not None and raise_after:
                raise Interrupted(pending)
