"""How the audit writes what it found: one operation's JSON verdict, and the summary at the end."""

from __future__ import annotations

import json
from typing import Any, TextIO

import orjson
from pydantic_core import to_json

from harness.checker import Finding, OperationVerdict
from harness.report import _finding_lines


def _finish_output(name: str, format: str, stats: dict[str, Any], run_findings: list[Finding], out: TextIO,
                   err: TextIO) -> int:
    classes = stats["classes"]
    usable = stats["events"] > 0
    status = 2 if not usable else (1 if stats["unhealthy"] or run_findings else 0)
    summary = {"events": stats["events"], "malformed_lines": stats["malformed"],
               "operations": sum(classes.values()), "classifications": dict(sorted(classes.items())),
               "findings": stats["findings"], "exit_status": status}
    if format == "json":
        out.write("\n  ],\n  \"findings\": " + json.dumps([f.to_dict() for f in run_findings]) +
                  ",\n  \"summary\": " + json.dumps(summary) + "\n}\n")
    else:
        for finding in run_findings:
            out.write("\n".join(_finding_lines(finding, "")) + "\n")
        counts = ", ".join(f"{n} {c}" for c, n in sorted(classes.items())) or "no operations"
        out.write(f"{name}: {stats['events']} events, {summary['operations']} operations ({counts}); "
                  f"{stats['findings']} finding(s), {stats['malformed']} malformed line(s)\n")
    if not usable:
        print(f"audit: {name} holds no usable audit event "
              f"({stats['malformed']} malformed line(s)); expected NDJSON with 'event' or 'type' per line", file=err)
    return status



def _json_text(data: dict[str, Any], *, careful: bool = False) -> str:
    """Compact JSON of one operation's verdict: orjson, 3x faster than pydantic_core's encoder and the
    same bytes (a property test holds it) for what the fast path vouched for: strings, 64-bit integers,
    booleans, no float anywhere. An operation with a ``careful`` line (coerced by pydantic, or in the
    article's unvalidated format) may hold infinity (orjson writes null) or a huge integer (orjson
    refuses it): pydantic_core writes those, as before."""
    if not careful:
        try:
            return orjson.dumps(data).decode()
        except orjson.JSONEncodeError:
            pass
    return to_json(data).decode()


def _op_json(verdict: OperationVerdict) -> dict[str, Any]:
    data = verdict.to_dict()
    data.pop("held", None)
    return data
