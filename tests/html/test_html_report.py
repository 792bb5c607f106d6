"""The HTML investigation report (harness/html_report.py): generated from real runs through the engine and
from built evidence, read back with the standard library's html.parser. What the page promises is in the
module's docstring: the ids and classes below are the ones the browser tests rely on."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.checker import Finding, OperationVerdict, Verdict
from harness.engine import run_scenario
from harness.evidence import load_evidence
from harness.html_report import ONE_FILE_LIMIT, PAGE_SIZE, REPORT_HTML, RunInfo, dom_id, write_html_report
from harness.resources import catalogue_dir
from harness.results import ScenarioResult
from harness.scenario import load
from tests.common.evidence_builder import EvidenceBuilder, reference_lookup_run

WRONG = "python -m harness.agents.wrong.new_key_per_attempt"


class Page(HTMLParser):
    """Every element with its attributes, the ids, the links, and the text of the page."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.ids: dict[str, dict[str, str]] = {}
        self.hrefs: list[str] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        attributes["_tag"] = tag
        self.elements.append((tag, attributes))
        if "id" in attributes:
            assert attributes["id"] not in self.ids, f"duplicate id {attributes['id']}"
            self.ids[attributes["id"]] = attributes
        if tag == "a" and "href" in attributes:
            self.hrefs.append(attributes["href"])
        self._in_script = tag == "script"
        if tag == "script":
            assert "src" not in attributes, "no external script"
        if tag == "link":
            raise AssertionError(f"no external resource: {attributes}")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.scripts if self._in_script else self.text).append(data)

    def having(self, cls: str, **attrs: str) -> list[dict[str, str]]:
        return [a for _, a in self.elements if cls in a.get("class", "").split()
                and all(a.get(k if k.startswith("_") else k.replace("_", "-")) == v for k, v in attrs.items())]

    @property
    def all_text(self) -> str:
        return "".join(self.text)


def read(path: Path) -> Page:
    return Page(path.read_text(encoding="utf-8"))


def local_links_resolve(page: Page, folder: Path, pages: dict[str, Page] | None = None) -> None:
    """Every link to an anchor names an element that exists (on this page or the page it names)."""
    for href in page.hrefs:
        name, _, anchor = href.partition("#")
        target = page if not name else (pages or {}).get(name) or read(folder / name)
        if anchor:
            assert anchor in target.ids, f"{href}: no element with id {anchor}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ScenarioResult]:
    root = tmp_path_factory.mktemp("evidence")
    scenario = load(catalogue_dir() / "response_lost.yaml")
    return {"good": run_scenario(scenario, evidence_root=root), "bad": run_scenario(scenario, agent=WRONG,
                                                                                    evidence_root=root)}


def test_a_failing_run_writes_report_html_and_names_it(runs: dict[str, ScenarioResult]) -> None:
    bad, good = runs["bad"], runs["good"]
    page_path = bad.evidence_dir / REPORT_HTML
    assert page_path.is_file()
    assert not (good.evidence_dir / REPORT_HTML).exists(), "a passing run writes no report"
    text = (bad.evidence_dir / "verdict.txt").read_text()
    assert f"report: {page_path}" in text
    assert text.rstrip().splitlines()[-1] == f"evidence: {bad.evidence_dir}"  # still the last line
    from harness.report import render_failure_pointer

    assert render_failure_pointer(bad).endswith(f"report: {page_path}")


def test_the_failing_operation_shows_its_findings_beside_the_evidence_linked_both_ways(
        runs: dict[str, ScenarioResult]) -> None:
    result = runs["bad"]
    page = read(result.evidence_dir / REPORT_HTML)
    op = result.verdict.operations[0]
    sid = f"op-{dom_id(op.operation_id)}"
    assert page.ids["verdict"]["data-verdict"] == "FAILED"
    assert {"summary", "index", "operations", sid, "run-findings"} <= set(page.ids)
    section = page.ids[sid]
    assert "operation" in section["class"].split() and section["data-classification"] == "duplicate"
    assert section["data-codes"] == "H002 H003 H010 H016"
    findings = [a for a in page.having("finding") if a["id"].startswith(sid)]
    assert sorted({f["data-code"] for f in findings}) == ["H002", "H003", "H010", "H016"]
    # the evidence rows: log lines 1-4, journal lines 1-2 (the flows), ledger effects 1-2
    for n in (1, 2, 3, 4):
        assert f"{sid}-log-{n}" in page.ids
    for kind in ("flow", "effect"):
        assert {f"{sid}-{kind}-1", f"{sid}-{kind}-2"} <= set(page.ids)
    # H016 cites the two effects; each effect row links back to it
    h016 = next(f for f in findings if f["data-code"] == "H016")
    text = (result.evidence_dir / REPORT_HTML).read_text()
    for n in (1, 2):
        assert f'href="#{sid}-effect-{n}"' in text
    back = [a for a in page.having("cited-by", data_code="H016")]
    assert {a["href"] for a in back} == {f"#{h016['id']}"}
    # H010 cites the two flows, with the fault the proxy applied
    assert f'href="#{sid}-flow-1"' in text and "drop_response_after_commit" in page.all_text
    local_links_resolve(page, result.evidence_dir)


def test_the_timeline_aligns_each_attempt_with_its_flow_and_effect_and_shows_the_gap(
        runs: dict[str, ScenarioResult]) -> None:
    result = runs["bad"]
    text = (result.evidence_dir / REPORT_HTML).read_text()
    sid = f"op-{dom_id(result.verdict.operations[0].operation_id)}"
    steps = text.split('<tr class="step')
    attempt_2 = next(s for s in steps if s.startswith(' step-attempt') and "attempt 2</td>" in s)
    # one row: the attempt's log line (3), its flow (journal line 2) and the effect it committed (seq 2)
    for anchor in (f'id="{sid}-log-3"', f'id="{sid}-flow-2"', f'id="{sid}-effect-2"'):
        assert anchor in attempt_2
    page = read(result.evidence_dir / REPORT_HTML)
    gaps = page.having("gap")
    assert len(gaps) == 1 and float(gaps[0]["data-seconds"]) >= 0
    attempts = page.having("attempt")
    assert [a["id"] for a in attempts] == [f"{sid}-attempt-1", f"{sid}-attempt-2"]
    assert page.having("retry-parent")[0]["href"] == f"#{sid}-attempt-1"
    assert "2 effects for one intent" in page.all_text  # the duplicate is never hidden


def test_the_passing_run_reports_passed_with_the_observation_it_closed_on(
        runs: dict[str, ScenarioResult], tmp_path: Path) -> None:
    result = runs["good"]
    target = tmp_path / "good.html"
    out = subprocess.run([sys.executable, "-m", "harness", "report", str(result.evidence_dir), "--html", str(target)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"html report: {target}" in out.stdout
    page = read(target)
    assert page.ids["verdict"]["data-verdict"] == "PASSED"
    sid = f"op-{dom_id(result.verdict.operations[0].operation_id)}"
    assert page.ids[sid]["data-classification"] == "healthy" and not page.having("finding")
    assert "the resolution cites it" in page.all_text
    flows = [i for i in page.ids if i.startswith(f"{sid}-flow-")]
    assert len(flows) == 2, "the create and the lookup's read (correlated as the checker does)"
    local_links_resolve(page, tmp_path)


def test_report_cli_exit_statuses(runs: dict[str, ScenarioResult], tmp_path: Path) -> None:
    def harness(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=60)

    bad = harness("report", str(runs["bad"].evidence_dir), "--html", str(tmp_path / "bad.html"))
    assert bad.returncode == 1 and (tmp_path / "bad.html").is_file()
    empty = tmp_path / "empty"
    empty.mkdir()
    for folder in (empty, tmp_path / "missing"):
        out = harness("report", str(folder), "--html", str(tmp_path / "x.html"))
        assert out.returncode == 2 and f"{folder} is not an evidence folder" in out.stderr
        assert "Traceback" not in out.stderr
    out = harness("report", str(runs["bad"].evidence_dir), "--html", str(tmp_path / "no" / "such" / "x.html"))
    assert out.returncode == 2 and "does not exist" in out.stderr
    # the offline audit: its own exit status, its output untouched, and the page
    log = runs["bad"].evidence_dir / "agent.ndjson"
    audit = harness("audit", str(log), "--format", "json", "--html", str(tmp_path / "audit.html"))
    assert audit.returncode == 1 and json.loads(audit.stdout)["summary"]["findings"] > 0
    page = read(tmp_path / "audit.html")
    assert page.ids["verdict"]["data-verdict"] == "FAILED" and page.having("finding", data_code="H003")
    local_links_resolve(page, tmp_path)
    assert harness("audit", str(tmp_path / "nope.ndjson"), "--html", str(tmp_path / "a.html")).returncode == 2


def test_a_report_judged_again_from_a_folder_without_verdict_file(tmp_path: Path) -> None:
    folder = reference_lookup_run(EvidenceBuilder(tmp_path / "ev")).write()
    out = subprocess.run([sys.executable, "-m", "harness", "report", str(folder), "--html",
                          str(tmp_path / "r.html")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    page = read(tmp_path / "r.html")
    assert "op-op_1" in page.ids and "op-op_1-flow-2" in page.ids  # the lookup's read
    local_links_resolve(page, tmp_path)


PLANTED = "<script>alert(1)</script>\"'&"


def test_everything_from_the_evidence_is_escaped_by_the_template_engine(tmp_path: Path) -> None:
    b = EvidenceBuilder(tmp_path / "ev")
    b.intent()
    b.event("operation", "op_1", intent_id="int_1", state="open", idempotency_key="idem-op_1",
            intent={"kind": "create_ticket", "destination": "tickets", "params": {"title": PLANTED}})
    b.attempt("op_1", "att_1", "sent_no_response", lost=True, effect="tkt_1", error=PLANTED)
    b.resolution("op_1", "failed", evidence=["att_1"], reason=PLANTED)
    evidence = load_evidence(b.write())
    from harness.checker import check

    verdict = check(evidence)
    verdict.add_findings([Finding("X001", "scenario-expectation", "op_1", f"planted {PLANTED}",
                                  [{"source": "log", "line": 2}])])
    target = tmp_path / "r.html"
    write_html_report(target, verdict, evidence=evidence, run=RunInfo(scenario=PLANTED, agent=PLANTED))
    raw = target.read_text()
    page = read(target)
    assert len(page.scripts) == 1 and "alert" not in page.scripts[0], "only the page's own script"
    assert "<script>alert" not in raw
    assert raw.count("&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;&amp;") >= 4  # params, log field, finding, run
    assert PLANTED in page.all_text  # shown as text, whole
    assert page.having("finding", data_code="X001")


HOSTILE = '<x-planted data-planted="1">&\'"'


_CHOICES = {"event", "state", "dispatch_state", "retry_reason", "retry_decision", "source", "scope", "decision",
            "kind"}  # fields of the log's contract that take one of a few values (the rest is free text)


def _planted(value: object, top: bool = True) -> object:
    """Every string of a record with HOSTILE after it, the keys of its inner objects too, and a field of that
    name: the same change everywhere, so what names what across the log, the journal and the ledger still does."""
    if isinstance(value, str):
        return value + HOSTILE
    if isinstance(value, list):
        return [_planted(v, top) for v in value]
    if isinstance(value, dict) and top:
        return {**{k: v if k in _CHOICES else _planted(v, False) for k, v in value.items()}, HOSTILE: HOSTILE}
    if isinstance(value, dict):
        return {_planted(k, False): _planted(v, False) for k, v in value.items()}
    return value


@pytest.mark.parametrize("black_box", [False, True], ids=["events", "black-box"])
def test_every_string_of_every_record_is_escaped_wherever_the_page_shows_it(tmp_path: Path, black_box: bool) -> None:
    """The five stories of the synthetic folders (tests/browser/synthetic.py), every string of the agent's log,
    the journal and the ledger planted with markup (the values the checker reads too: the operation, attempt
    and observation ids, the keys, the effect references, the destinations): no planted element or attribute
    reaches the page, and the planted text is shown."""
    from harness.checker import check
    from tests.browser.synthetic import build

    folder = build(tmp_path / "ev", 10)
    for name in ("agent.ndjson", "journal.ndjson"):
        lines = (folder / name).read_text().splitlines()
        records = [_planted(json.loads(line)) for line in lines if line.strip()]
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    ledger = json.loads((folder / "ledger.json").read_text())
    (folder / "ledger.json").write_text(json.dumps({k: _planted(v) for k, v in ledger.items()}))
    if black_box:  # some planted writes match no route: unattributed, each shown
        context = json.loads((folder / "context.json").read_text())
        (folder / "context.json").write_text(json.dumps({**context, "mode": "black_box"}))
    evidence = load_evidence(folder)
    verdict = check(evidence)
    target = tmp_path / "r.html"
    write_html_report(target, verdict, evidence=evidence, run=RunInfo(scenario=HOSTILE, agent=HOSTILE))
    page = read(target)
    assert not [a for tag, a in page.elements if tag == "x-planted" or "data-planted" in a], "markup reached the page"
    assert len(page.scripts) == 1, "only the page's own script"
    shown = page.all_text.count(HOSTILE)
    sections = page.having("operation", _tag="section")
    assert len(sections) == (len(verdict.intents) if black_box else len(verdict.operations)) > 0
    assert shown >= 10 * len(sections), f"the planted text is shown, whole ({shown} times)"
    if verdict.unattributed:  # a write no intent accounts for has no effect_ref: named by its flow
        assert "unattributed" in page.ids
        named = [f"{u['kind']} {u.get('effect_ref') or u['flow_id']}: " for u in verdict.unattributed]
        assert all(name in page.all_text for name in named)


def synthetic_verdict(count: int) -> Verdict:
    ops = []
    for k in range(count):
        findings = [Finding("H016", "single-effect", f"op_{k}", "two effects", [{"source": "log", "line": k + 1}])] \
            if k % 10 == 0 else []
        ops.append(OperationVerdict(f"op_{k}", f"int_{k}", "duplicate" if findings else "healthy", "succeeded",
                                    intent={"kind": "create_ticket", "destination": "tickets"}, findings=findings))
    return Verdict(operations=ops, findings=[f for op in ops for f in op.findings])


def test_ten_thousand_operations_are_paged_and_the_main_file_stays_light(tmp_path: Path) -> None:
    count = 10_000
    assert count > ONE_FILE_LIMIT
    target = tmp_path / "report.html"
    written = write_html_report(target, synthetic_verdict(count), run=RunInfo(title="synthetic"))
    assert written[0] == target
    assert target.stat().st_size < 1_000_000
    ops_pages = sorted(tmp_path.glob("report-ops-*.html"))
    assert len(ops_pages) == (count + PAGE_SIZE - 1) // PAGE_SIZE
    main = read(target)
    assert not main.having("operation", _tag="section"), "no operation section in the main file"
    rows = main.having("operation", _tag="tr")
    assert 0 < len(rows) < count
    assert rows[0]["data-operation-id"] == "op_0"
    pages = {p.name: read(p) for p in tmp_path.glob("*.html")}
    # every index row, filtered or not, reaches its operation's section on the right page
    assert main.having("filter", data_filter="rule", data_value="H016")
    rule_pages = [p for n, p in pages.items() if n.startswith("report-rule-H016-")]
    assert sum(len(p.having("operation", _tag="tr")) for p in rule_pages) == count // 10
    for page in [main, *rule_pages, pages["report-classification-healthy-0001.html"]]:
        local_links_resolve(page, tmp_path, pages)
    last = pages[ops_pages[-1].name]
    assert f"op-op_{count - 1}" in last.ids
    local_links_resolve(last, tmp_path, pages)


def test_one_file_filters_work_without_javascript(runs: dict[str, ScenarioResult]) -> None:
    page = read(runs["bad"].evidence_dir / REPORT_HTML)
    links = page.having("filter", _tag="a")
    assert {(a["data-filter"], a["data-value"]) for a in links} >= {("classification", "duplicate"), ("rule", "H016")}
    for a in links:
        section = page.ids[a["href"].lstrip("#")]
        assert "filtered-index" in section["class"].split()
    assert "filter-classification" in page.ids and "filter-rule" in page.ids


@pytest.mark.parametrize("value", ["op_1", "op 1/<x>", "op~1"])
def test_dom_ids_are_plain_and_distinct(value: str) -> None:
    ident = dom_id(value)
    assert " " not in ident and "<" not in ident and "/" not in ident
    assert dom_id("op~1") != dom_id("op~007e1") or value != "op~1"


def test_ids_with_unsafe_characters_link_and_supersedes_is_a_link(tmp_path: Path) -> None:
    b = EvidenceBuilder(tmp_path / "ev")
    b.intent()
    b.operation("op 1")
    b.attempt("op 1", "att_1", "response_received", effect="tkt_1")
    b.resolution("op 1", "succeeded", effects=["tkt_1"], evidence=["att_1"])
    b.operation("op_2", supersedes_operation_id="op 1")
    b.resolution("op_2", "cancelled")
    evidence = load_evidence(b.write())
    from harness.checker import check

    target = tmp_path / "r.html"
    write_html_report(target, check(evidence), evidence=evidence)
    page = read(target)
    refs = {(a["data-relation"], a["href"]) for a in page.having("op-ref", _tag="a")}
    assert ("supersedes", f"#op-{dom_id('op 1')}") in refs and ("superseded-by", "#op-op_2") in refs
    local_links_resolve(page, tmp_path)


def test_black_box_runs_get_a_section_per_intent(tmp_path: Path) -> None:
    b = EvidenceBuilder(tmp_path / "ev").black_box()
    b.intent()
    b.request(key=None, effect="tkt_1", lost=True)
    b.request(key=None, effect="tkt_2")
    evidence = load_evidence(b.write())
    from harness.checker import check

    target = tmp_path / "r.html"
    write_html_report(target, check(evidence), evidence=evidence)
    page = read(target)
    section = page.ids["intent-int_1"]
    assert "intent" in section["class"].split() and section["data-classification"] == "duplicate"
    assert {"intent-int_1-flow-1", "intent-int_1-effect-2"} <= set(page.ids)
    local_links_resolve(page, tmp_path)


def test_a_page_that_cannot_be_made_loses_the_run_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in the page is kept beside the evidence; the verdict and its text are still written."""
    import harness.html_report
    from harness.engine import run_scenario
    from harness.resources import catalogue_dir
    from harness.scenario import load
    from harness.writers import REPORT_ERROR_FILE

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the page broke")

    monkeypatch.setattr(harness.html_report, "write_html_report", broken)
    result = run_scenario(load(catalogue_dir() / "response_lost.yaml"),
                          agent="python -m harness.agents.wrong.new_key_per_attempt", evidence_root=tmp_path)
    assert not result.passed
    assert (result.evidence_dir / "verdict.json").is_file() and (result.evidence_dir / "verdict.txt").is_file()
    assert "the page broke" in (result.evidence_dir / REPORT_ERROR_FILE).read_text()
    assert not (result.evidence_dir / "report.html").exists()
