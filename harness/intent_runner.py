"""A team's command, run once per intent: ``python -m harness.intent_runner [--exit-zero] -- WORD WORD ...``.

A team's tool does one thing per call (``python billing_agent.py refund --order ord_1042 --amount 1999``) and
never reads the contract's intents file. This runner is the agent process instead: it reads HARNESS_INTENTS
and, for each intent in order, fills the command's words from it (``fill_words``) and runs that command once,
with no shell, in the current folder and the environment it was given.

The words are split first (by the caller, as a shell would) and each word filled then, so a param holding
spaces stays one argument. A word's placeholders (braces as in ``harness.contract.fill_template``):
``{params.NAME}`` (dotted for a nested one: ``{params.customer.id}``), ``{params}`` (all of them),
``{intent_id}``, ``{kind}``, ``{destination}``; ``{{`` and ``}}`` are literal braces. A string param is
its text; a number or a boolean its JSON text (``1999``, ``19.99``, ``true``); a list or a mapping compact
JSON (``["a","b"]``); null is refused, as are a word holding NUL and a param the intent lacks.

Restarts: a planned crash SIGKILLs the agent's process group, this runner and its child alike, and starts it
again with the same HARNESS_STATE_DIR. The runner writes there (atomically) which intents finished, so a
restart runs the interrupted intent again and then the rest, as a team's cron wrapper would.

Exit status: ``--exit-zero`` (black-box mode, where a tool that gives up or is refused exits non-zero and
the verdict rests on the evidence) exits 0 once every intent ran; without it, the first non-zero status of
an intent, after all ran. A command that cannot start is 127 at once, either way: nothing was tested.
SIGTERM and SIGINT are passed to the running command, and the runner exits once it has.

Standard library only: it runs in the agent's environment, under ``harness/agent_supervisor.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.contract import INTENTS_ENV, STATE_DIR_ENV, fill_template, template_fields

PROGRAM = "python -m harness.intent_runner"
STATE_FILE = "intent-runner.json"  # in HARNESS_STATE_DIR: {"finished": {intent_id: exit status}}
INTENT_FIELDS = ("intent_id", "kind", "destination")
PLACEHOLDERS = "{params.NAME} (dotted for a nested param: {params.customer.id}), {params}, " + ", ".join(
    "{" + name + "}" for name in INTENT_FIELDS) + " ({{ and }} for literal braces)"
CANNOT_START = 127  # as a shell says of a command it cannot run


def runner_command(words: list[str], *, exit_zero: bool, cwd: Path | None = None,
                   per_intent: bool = True) -> list[str]:
    """The agent command that runs ``words`` (a template, split as a shell would) once per intent, or, not
    ``per_intent``, once as they are (a command that reads the intents file itself); in ``cwd`` when given (a
    project's folder, wherever the harness was started)."""
    return [sys.executable, "-m", "harness.intent_runner", *(["--exit-zero"] if exit_zero else []),
            *(["--cwd", str(cwd)] if cwd is not None else []), *([] if per_intent else ["--once"]), "--", *words]


# -- the template ------------------------------------------------------------------------------------

def fill_words(words: Sequence[str], intent: Mapping[str, Any]) -> list[str]:
    """The argv of ``words`` for ``intent``: each word filled on its own; a ``ValueError`` naming the word, the
    placeholder and the intent, and what is valid."""
    intent_id = intent.get("intent_id", "?")
    argv = []
    for number, word in enumerate(words, 1):
        try:
            filled = fill_template(word, lambda name: _value(name, intent))
        except ValueError as exc:
            raise ValueError(f"word {number} {word!r}, intent {intent_id!r}: {exc}") from None
        if "\0" in filled:
            raise ValueError(f"word {number} {word!r}, intent {intent_id!r}: fills to a string holding a NUL "
                             "character, which no program argument can carry")
        argv.append(filled)
    return argv


def check_template(words: Sequence[str], intents: Sequence[Mapping[str, Any]]) -> None:
    """Every intent fills ``words``, else a ``ValueError`` naming the first bad placeholder, its intent and what
    is valid (with no intents, the placeholders alone are checked)."""
    if not words:
        raise ValueError("the command is empty: give the words of a command, e.g. "
                         "'python billing_agent.py refund --order {params.order_id}'")
    for number, word in enumerate(words, 1):
        try:
            names = template_fields(word)
        except ValueError as exc:
            raise ValueError(f"word {number} {word!r}: {exc}") from None
        for name in names:
            try:
                _known(name)
            except ValueError as exc:
                raise ValueError(f"word {number} {word!r}: {exc}") from None
    for intent in intents:
        fill_words(words, intent)


def _known(name: str) -> None:
    if name != "params" and not name.startswith("params.") and name not in INTENT_FIELDS:
        raise ValueError(f"unknown placeholder {{{name}}}; valid: {PLACEHOLDERS}")


def _value(name: str, intent: Mapping[str, Any]) -> str:
    _known(name)
    if name in INTENT_FIELDS:
        return _text(intent.get(name), "{" + name + "}")
    value: Any = intent.get("params")
    if not isinstance(value, Mapping):
        raise ValueError(f"its params are {type(value).__name__}, not a mapping of names to values")
    path = name.split(".")[1:]
    for depth, key in enumerate(path):
        if not isinstance(value, Mapping):
            raise ValueError(f"{{{name}}}: params.{'.'.join(path[:depth])} is {type(value).__name__}, not a mapping")
        if key not in value:
            known = ", ".join(sorted(str(k) for k in value)) or "none"
            where = "params" if depth == 0 else "params." + ".".join(path[:depth])
            raise ValueError(f"{{{name}}}: the intent has no {where}.{key} (its {where}: {known})")
        value = value[key]
    return _text(value, "{" + name + "}")


def _text(value: Any, placeholder: str) -> str:
    """A param as one argument: text as it is, anything else as JSON (numbers, booleans, lists, mappings)."""
    if isinstance(value, str):
        return value
    if value is None:
        raise ValueError(f"{placeholder} is null, which a command line cannot carry: give it a value, or leave "
                         "the placeholder out")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{placeholder} is {value}, which JSON cannot write")
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:  # a non-finite number deep inside, a key JSON cannot hold
        raise ValueError(f"{placeholder} cannot be written as JSON: {exc}") from None


# -- running ---------------------------------------------------------------------------------------

class _Finished:
    """Which intents finished, and their exit status, in HARNESS_STATE_DIR: what a restart reads."""

    def __init__(self, state_dir: str | None) -> None:
        self.path = Path(state_dir) / STATE_FILE if state_dir else None
        self.status: dict[str, int] = {}
        if self.path is not None and self.path.exists():
            try:
                self.status = {str(k): int(v) for k, v in
                               json.loads(self.path.read_text(encoding="utf-8"))["finished"].items()}
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ValueError(f"cannot read what finished before a restart from {self.path}: {exc!r}") from None

    def record(self, intent_id: str, status: int) -> None:
        self.status[intent_id] = status
        if self.path is None:
            return
        # a SIGKILL may land anywhere: the file is the old one or the new one, never half of it
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as out:
            json.dump({"finished": self.status}, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)


class _Child:
    """The running command, and the signal that asked the runner to stop (forwarded to it)."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.stopped_by = 0

    def stopped(self) -> bool:
        return self.stopped_by != 0

    def forward(self, signum: int, frame: object) -> None:
        self.stopped_by = signum
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signum)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description="Run a command once per intent of HARNESS_INTENTS.")
    parser.add_argument("--exit-zero", action="store_true",
                        help="exit 0 once every intent ran, whatever each command's status (black-box mode)")
    parser.add_argument("--cwd", type=Path, help="run the command in this folder (default: the current one)")
    parser.add_argument("--once", action="store_true",
                        help="run the command once, as it is: it reads the intents file itself (the contract's way)")
    parser.add_argument("words", nargs="+", help="the command's words, after --, each filled per intent")
    args = parser.parse_args(argv)
    if args.cwd is not None:
        try:
            os.chdir(args.cwd)
        except OSError as exc:
            print(f"{PROGRAM}: cannot run in {args.cwd}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    if args.once:
        return _run_once(args.words, args.exit_zero)
    try:
        intents = _intents()
        check_template(args.words, intents)
        finished = _Finished(os.environ.get(STATE_DIR_ENV))
    except ValueError as exc:
        print(f"{PROGRAM}: {exc}", file=sys.stderr)
        return 2
    if finished.status:
        print(f"{PROGRAM}: restarted: {len(finished.status)} of {len(intents)} intents had finished",
              file=sys.stderr)
    child = _Child()
    signal.signal(signal.SIGTERM, child.forward)
    signal.signal(signal.SIGINT, child.forward)
    for intent in intents:
        intent_id = str(intent["intent_id"])
        if child.stopped():  # between two intents: start no other
            break
        if intent_id in finished.status:
            continue
        status = _run_one(fill_words(args.words, intent), intent_id, child)
        if status is None:
            return CANNOT_START
        if child.stopped():  # stopped mid-intent: not finished, a restart runs it again
            break
        finished.record(intent_id, status)
    if child.stopped():
        return 128 + child.stopped_by
    failed = [status for status in finished.status.values() if status != 0]
    return 0 if args.exit_zero or not failed else failed[0]


def _run_once(words: list[str], exit_zero: bool) -> int:
    """``--once``: the command as it is, its status (0 with ``exit_zero``), SIGTERM and SIGINT passed on."""
    child = _Child()
    signal.signal(signal.SIGTERM, child.forward)
    signal.signal(signal.SIGINT, child.forward)
    status = _run_one(list(words), "(all, from the intents file)", child)
    if status is None:
        return CANNOT_START
    if child.stopped():
        return 128 + child.stopped_by
    return 0 if exit_zero else status


def _intents() -> list[Mapping[str, Any]]:
    path = os.environ.get(INTENTS_ENV)
    if not path:
        raise ValueError(f"{INTENTS_ENV} is not set: the harness sets it to the intents file of the run")
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
        intents = document["intents"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"cannot read the intents of {path}: {exc}") from None
    if not isinstance(intents, list) or not all(isinstance(i, dict) and "intent_id" in i for i in intents):
        raise ValueError(f"{path}: intents is not a list of intents, each with an intent_id")
    return intents


def _run_one(argv: list[str], intent_id: str, child: _Child) -> int | None:
    """Run one intent's command to its end; its exit status (128 + N when signal N killed it), or None when it
    could not start."""
    if argv[0] in ("python", "python3"):  # the runner's interpreter, as the harness does for an agent command
        argv[0] = sys.executable
    start = time.monotonic()
    try:
        # in the runner's process group: a planned crash or a stop of the group reaches the command too
        child.process = subprocess.Popen(argv)
    except OSError as exc:
        print(f"{PROGRAM}: intent {intent_id}: cannot start {argv[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return None
    if child.stopped_by:  # the signal came between the start and the line above: forward it now
        child.process.send_signal(child.stopped_by)
    while True:
        try:
            code = child.process.wait()
            break
        except InterruptedError:
            continue
    child.process = None
    status = code if code >= 0 else 128 - code
    how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
    print(f"intent {intent_id}: {how} after {time.monotonic() - start:.2f} s", file=sys.stderr, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
