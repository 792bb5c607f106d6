"""H019 finds a planted secret in every common reversible form a log line can carry (harness.checker.secrets),
names the form without echoing the value, and flags nothing innocent; end to end, an agent that logs its
credential base64-encoded fails with H019 where the reference agent passes."""

from __future__ import annotations

import base64
import codecs
import gzip
import json
import secrets
import zlib
from pathlib import Path
from urllib.parse import quote

import pytest

from harness.checker.secrets import MAX_COMPRESSED_TOKENS, CanaryFinder, encoded_forms, name_hits, secret_hits

CANARY = "hsk_canary_" + "0123456789abcdef01234567"  # the engine's shape: hsk_canary_ + 24 hex digits
RAW = CANARY.encode()
FINDER = CanaryFinder({"TICKETS": CANARY})


def line(value: str) -> str:
    """A log line as the agents write them: the value in a JSON string."""
    return json.dumps({"event": "attempt", "operation_id": "op_1", "error": f"401; {value}"})


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def every_byte_escaped(template: str) -> str:
    return "".join(template.format(c) for c in RAW)


FOUND = {
    "as written": (CANARY, "as written"),
    "upper-cased": (CANARY.upper(), "case-changed"),
    "base64": (b64(RAW), "base64-encoded"),
    "base64 unpadded": (b64(RAW).rstrip("="), "base64-encoded"),
    # inside a longer encoded string, at each of the three byte offsets mod 3
    "base64 offset 1": (b64(b":" + RAW + b"\n"), "base64-encoded"),
    "base64 offset 2": (b64(b"u:" + RAW), "base64-encoded"),
    "base64 of an Authorization value": (b64(b"Bearer " + RAW), "base64-encoded"),
    "base64 URL-safe": (base64.urlsafe_b64encode(b"\xfb\xff" + RAW).decode(), "base64-encoded"),
    "base32": (base64.b32encode(b"ab" + RAW).decode(), "base32-encoded"),
    "base32 lower-cased, unpadded": (base64.b32encode(b"abc" + RAW).decode().lower().rstrip("="), "base32-encoded"),
    "hex": (RAW.hex(), "hex-encoded"),
    "hex upper-cased": (RAW.hex().upper(), "hex-encoded"),
    "percent-encoded, every byte": (every_byte_escaped("%{:02X}"), "percent-encoded"),
    "percent-encoded, lower case, half the bytes": (
        "".join(f"%{c:02x}" if i % 2 else chr(c) for i, c in enumerate(RAW)), "percent-encoded"),
    "JSON \\u escapes (the raw text)": (every_byte_escaped("\\u{:04x}"), "JSON-escaped"),
    "Python \\x escapes": (every_byte_escaped("\\x{:02x}"), "JSON-escaped"),
    "HTML decimal entities": (every_byte_escaped("&#{};"), "HTML-escaped"),
    "HTML hex entities": (every_byte_escaped("&#x{:x};"), "HTML-escaped"),
    "reversed": (CANARY[::-1], "reversed"),
    "rot13": (codecs.encode(CANARY, "rot13"), "rot13-encoded"),
    "gzip in base64": (b64(gzip.compress(b'{"authorization": "Bearer ' + RAW + b'"}')),
                       "gzip-compressed, base64-encoded"),
    "zlib in base64": (b64(zlib.compress(b"headers " + RAW)), "zlib-compressed, base64-encoded"),
    "zlib (best) in URL-safe base64": (base64.urlsafe_b64encode(zlib.compress(RAW * 3, 9)).decode(),
                                       "zlib-compressed, base64-encoded"),
    "zlib in hex": (zlib.compress(RAW).hex(), "zlib-compressed, hex-encoded"),
    "gzip, truncated": (b64(gzip.compress(RAW + secrets.token_hex(400).encode()))[:120],
                        "gzip-compressed, base64-encoded"),
}


@pytest.mark.parametrize("name", list(FOUND))
def test_each_reversible_form_is_found_and_named_without_the_value(name: str) -> None:
    value, form = FOUND[name]
    assert FINDER.find(line(value)) == [("TICKETS", form)], value
    hits = secret_hits(line(value), FINDER)
    expected = "the planted secret TICKETS" if form == "as written" else f"the planted secret TICKETS, {form}"
    assert hits == [expected]
    assert CANARY not in name_hits(hits) and value not in name_hits(hits)


def test_a_base64_form_inside_an_escape_is_found_through_it() -> None:
    value = "hsk_???>>>_secret"  # its base64 holds '/' and '+', which escapes change
    finder = CanaryFinder({"TICKETS": value})
    encoded = b64(value.encode())
    assert "/" in encoded and "+" in encoded
    assert finder.find(line(encoded.replace("/", "\\/"))) == [("TICKETS", "base64-encoded, JSON-escaped")]
    assert finder.find(line(quote(encoded, safe=""))) == [("TICKETS", "base64-encoded, percent-encoded")]
    assert finder.find(line(encoded.replace("+", "&#43;"))) == [("TICKETS", "base64-encoded, HTML-escaped")]
    twice = json.dumps(json.dumps({"t": encoded.replace("/", "\\/")}))  # escaped, then JSON-encoded twice
    assert finder.find(twice) == [("TICKETS", "base64-encoded, JSON-escaped")]


def test_every_alignment_of_every_prefix_length_is_found() -> None:
    for size in range(12):
        prefix = secrets.token_bytes(size)
        for suffix in (b"", b"!", b"!?", secrets.token_bytes(7)):
            for encode, form in ((b64, "base64-encoded"), (lambda d: base64.b32encode(d).decode(), "base32-encoded")):
                assert FINDER.find(line(encode(prefix + RAW + suffix))) == [("TICKETS", form)], (size, suffix)


def test_two_forms_of_one_secret_and_a_pattern_in_one_line() -> None:
    text = line(f"{CANARY} {RAW.hex()} Authorization: Bearer abcdefghijkl")
    hits = secret_hits(text, FINDER)
    assert hits == ["the planted secret TICKETS, as written and hex-encoded", "an Authorization header",
                    "a bearer token"]
    assert name_hits(hits) == ("the planted secret TICKETS, as written and hex-encoded and an Authorization header "
                               "and a bearer token")
    assert name_hits(["an Authorization header", "a bearer token"]) == "an Authorization header, a bearer token"


INNOCENT = {
    "a random base64 blob": b64(secrets.token_bytes(90)),
    "a random hex string": secrets.token_hex(64),
    "the canary's prefix alone": "hsk_canary_",
    "another canary of the same shape": "hsk_canary_" + secrets.token_hex(12),
    "the canary's prefix, base64": b64(b"hsk_canary_"),
    "a sha256 fingerprint": "sha256:" + secrets.token_hex(32),
    "the canary with a digit changed": CANARY[:-1] + "8",
    "a gzip blob of other text": b64(gzip.compress(b"hello world " * 20)),
    "a base64 that starts like zlib but is not": "eJw" + b64(secrets.token_bytes(60)),
    "escapes of other text": "\\u0068\\u0069 %41%42 &#65;&amp; \\\\n",
}


@pytest.mark.parametrize("name", list(INNOCENT))
def test_innocent_lines_are_not_flagged(name: str) -> None:
    assert FINDER.find(line(INNOCENT[name])) == []
    assert secret_hits(line(INNOCENT[name]), FINDER) == []


def test_no_canary_searches_nothing_but_the_patterns() -> None:
    empty = CanaryFinder({"SHORT": "abc", "NOT_TEXT": 7})
    assert not empty and empty.find(line(CANARY)) == []
    assert secret_hits(line("Authorization: Bearer abcdefghijkl"), empty) == ["an Authorization header",
                                                                               "a bearer token"]


def test_the_forms_are_precomputed_once_and_short_needles_left_out() -> None:
    forms = encoded_forms("s3cr3t")
    assert all(len(needle) >= 6 for _, needle in forms)
    assert len({needle for _, needle in forms}) == len(forms)
    assert {form for form, _ in encoded_forms(CANARY)} == {
        "as written", "base64-encoded", "base32-encoded", "hex-encoded", "reversed", "rot13-encoded"} | (
        {"URL-safe base64-encoded"} if any(c in b64(RAW) for c in "+/") else set())


def test_compressed_tokens_are_bounded_per_line() -> None:
    decoys = " ".join(b64(gzip.compress(secrets.token_bytes(30))) for _ in range(MAX_COMPRESSED_TOKENS))
    late = b64(gzip.compress(RAW))
    assert FINDER.find(line(f"{decoys} {late}")) == []  # past the bound: not inflated (the cost stays bounded)
    assert FINDER.find(line(f"{late} {decoys}")) == [("TICKETS", "gzip-compressed, base64-encoded")]
    bomb = b64(zlib.compress(bytes(50 << 20), 9))  # 50 MB of zeros, about 70 kB of base64: inflated to 1 MB only
    assert FINDER.find(line(bomb)) == []


# -- through the checker and the real engine -------------------------------------------------------------
def test_h019_names_the_form_not_the_value(tmp_path: Path) -> None:
    from tests.common.evidence_builder import EvidenceBuilder, reference_lookup_run

    b = EvidenceBuilder(tmp_path / "evidence")
    reference_lookup_run(b)
    b.context["secrets"] = {"TICKETS": CANARY}
    b.events[1]["error"] = "401 with " + b64(b"Bearer " + RAW)
    finding = b.check().by_code("H019")[0]
    assert "holds the planted secret TICKETS, base64-encoded; log a reference" in finding.message
    assert CANARY not in str(finding.to_dict()) and b64(RAW)[:20] not in str(finding.to_dict())


def test_an_agent_logging_its_credential_base64_encoded_fails_h019_and_the_reference_passes(tmp_path: Path) -> None:
    from harness.engine import run_scenario
    from harness.matrix import load_expectations
    from harness.resources import catalogue_dir
    from harness.scenario import load

    expected = load_expectations()
    scenario = load(catalogue_dir() / "response_lost.yaml")
    wrong = run_scenario(scenario, agent=expected.command("secret_encoded_in_log"), evidence_root=tmp_path / "w")
    assert not wrong.passed
    h019 = [f for f in wrong.verdict.findings if f.code == "H019"]
    assert h019 and all("base64-encoded" in f.message for f in h019), wrong.verdict.findings
    canaries = json.loads((wrong.evidence_dir / "context.json").read_text())["secrets"].values()
    assert not any(c in f.message for f in h019 for c in canaries)
    right = run_scenario(scenario, agent=expected.command("reference"), evidence_root=tmp_path / "r")
    assert right.passed, right.verdict.findings
