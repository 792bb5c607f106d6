"""Hash chain: the recorder writes it, verify proves it intact or names the first bad line."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.chain import verify_lines
from harness.cli import main
from harness.recorder import Recorder


def chained_log(path: Path, operations: int = 3) -> str:
    with Recorder(path, session_id="ses_1", chain=True) as rec:
        for n in range(operations):
            rec.operation(f"op_{n}", intent_id=f"int_{n}")
            rec.attempt(f"op_{n}", f"att_{n}", "response_received", effect_refs=[f"tkt_{n}"])
            rec.resolution(f"op_{n}", "succeeded", effect_refs=[f"tkt_{n}"], evidence=[f"att_{n}"])
        return rec.head


def verify(path: Path, head: str | None = None) -> tuple[int, str, str]:
    """``python -m harness verify`` as a user runs it: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["verify", str(path)] + (["--head", head] if head else []))
    return status, out.getvalue(), err.getvalue()


def test_intact_chain_verifies_and_prints_its_head(tmp_path):
    log = tmp_path / "agent.ndjson"
    head = chained_log(log)
    status, out, _ = verify(log, head)
    assert status == 0
    assert out.strip() == f"{log}: chain intact: 9 events, head {head}"


def test_recorder_restart_continues_the_chain(tmp_path):
    log = tmp_path / "agent.ndjson"
    chained_log(log, 1)
    with Recorder(log, session_id="ses_2", chain=True) as rec:  # the agent restarted
        rec.resolution("op_0", "succeeded", effect_refs=["tkt_0"], evidence=["att_0"])
        head = rec.head
    assert head.startswith("4:")
    assert verify(log, head)[0] == 0


def test_edit_names_the_line(tmp_path):
    log = tmp_path / "agent.ndjson"
    chained_log(log)
    lines = log.read_text().splitlines()
    record = json.loads(lines[4])
    record["effect_refs"] = ["tkt_forged"]
    lines[4] = json.dumps(record)
    log.write_text("\n".join(lines) + "\n")
    status, out, _ = verify(log)
    assert status == 1
    assert "line 5: hash does not match the event's content: the line was edited" in out


def test_truncation_is_detected_only_against_a_known_head(tmp_path):
    log = tmp_path / "agent.ndjson"
    head = chained_log(log)
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:-2]))
    assert verify(log)[0] == 0  # without a head a cut tail looks like a shorter log
    status, out, _ = verify(log, head)
    assert status == 1 and "the log ends at seq 7 without reaching seq 9" in out


def test_bad_head_and_missing_file_exit_2(tmp_path):
    status, _, err = verify(tmp_path / "nope.ndjson")
    assert status == 2 and "nope.ndjson" in err
    log = tmp_path / "agent.ndjson"
    chained_log(log, 1)
    status, _, err = verify(log, "deadbeef")
    assert status == 2 and "head 'deadbeef' is neither 'SEQ:sha256:HEX' nor 'sha256:HEX'" in err


def _lines(tmp_path_factory) -> tuple[list[str], str]:
    path = tmp_path_factory.mktemp("chain") / "agent.ndjson"
    head = chained_log(path, 3)
    return path.read_text().splitlines(), head


TAMPERS = st.one_of(
    st.tuples(st.just("edit"), st.integers(0, 8), st.sampled_from(["operation_id", "ts", "state", "seq", "prev_hash",
                                                                   "hash", "session_id", "extra"]),
              st.one_of(st.text(max_size=4), st.integers(), st.none())),
    st.tuples(st.just("delete"), st.integers(0, 8)),
    st.tuples(st.just("swap"), st.integers(0, 8), st.integers(0, 8)),
    st.tuples(st.just("truncate"), st.integers(0, 8)),
    st.tuples(st.just("garble"), st.integers(0, 8), st.integers(0, 200)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(tamper=TAMPERS)
def test_any_single_edit_deletion_reordering_or_truncation_is_detected(tmp_path_factory, tamper):
    lines, head = _lines(tmp_path_factory)
    original = list(lines)
    kind = tamper[0]
    if kind == "edit":
        _, index, field, value = tamper
        record = json.loads(lines[index])
        if record.get(field, object()) == value:
            return  # not an edit
        record[field] = value
        lines[index] = json.dumps(record)
    elif kind == "delete":
        del lines[tamper[1]]
    elif kind == "swap":
        _, i, j = tamper
        if lines[i] == lines[j]:
            return
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == "truncate":
        lines = lines[: tamper[1]]
    else:
        _, index, cut = tamper
        lines[index] = lines[index][:cut] + "#" + lines[index][cut + 1:]
    assert lines != original
    intact, message, _, _ = verify_lines(lines, head=head)
    assert not intact, (tamper, message)
