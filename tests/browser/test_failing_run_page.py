"""The report of a real failing run (the wrong agent that mints a key per attempt, on response_lost),
opened in headless Chromium: it loads clean, the failing operation shows its findings with their rule
codes, and each finding links to the evidence rows it cites and back."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import FailingRun, OpenPage

# the evidence row a finding's reference names: log line N, journal line N (a flow), ledger effect seq N
ROW_KIND = {"log": "log", "journal": "flow"}


def cited_rows(operation_id: str, finding: dict[str, Any]) -> set[str]:
    rows = set()
    for ref in finding["evidence"]:
        if ref.get("source") == "ledger" and ref.get("table") == "effects":
            rows.add(f"op-{operation_id}-effect-{ref['seq']}")
        elif ref.get("source") in ROW_KIND:
            rows.add(f"op-{operation_id}-{ROW_KIND[ref['source']]}-{ref['line']}")
    return rows


def target_id(page: Any) -> str | None:
    return page.evaluate("document.querySelector(':target')?.id ?? null")


def in_viewport(page: Any, element_id: str) -> bool:
    return bool(page.evaluate("""id => {
        const box = document.getElementById(id).getBoundingClientRect();
        return box.height > 0 && box.bottom > 0 && box.top < window.innerHeight;
    }""", element_id))


def test_the_page_loads_with_no_console_error_and_fetches_nothing(failing_run: FailingRun, open_page: OpenPage):
    page, console = open_page(failing_run.report)
    page.wait_for_timeout(200)  # a late script error (a timer, an idle callback) would land here
    assert console.errors == []
    assert console.remote_requests == []  # self-contained: no CDN, works offline
    summary = page.locator("#summary")
    assert summary.is_visible()
    assert "response_lost" in summary.inner_text()


def test_the_failing_operation_shows_its_findings_with_their_rule_codes(failing_run: FailingRun,
                                                                       open_page: OpenPage):
    page, _ = open_page(failing_run.report)
    section = page.locator(f"section.operation#op-{failing_run.operation_id}")
    assert section.is_visible()
    shown = section.locator(".finding[data-code]")
    codes = set(shown.evaluate_all("els => els.map(e => e.dataset.code)"))
    assert {"H002", "H016"} <= codes  # the two the issue names: key changed, two effects for one intent
    assert codes == failing_run.codes  # and no finding is left out or invented
    for code in codes:  # the code is on the page for a reader, not only in an attribute
        assert code in section.locator(f'.finding[data-code="{code}"]').first.inner_text()
    row = page.locator(f'table#operations tr.operation[data-operation-id="{failing_run.operation_id}"]')
    assert row.count() == 1
    assert row.get_attribute("data-classification") == "duplicate"
    assert set(row.get_attribute("data-codes").split()) >= {"H002", "H016"}


def test_each_finding_links_to_the_rows_it_cites_and_the_rows_link_back(failing_run: FailingRun, open_page: OpenPage):
    page, console = open_page(failing_run.report)
    op = failing_run.operation_id
    findings = page.locator(f"#op-{op} .finding[data-code]")
    assert findings.count() == len(failing_run.failing_operation["findings"])
    checked = 0
    for index, finding in enumerate(failing_run.failing_operation["findings"]):
        shown = findings.nth(index)
        assert shown.get_attribute("data-code") == finding["code"]
        finding_id = shown.get_attribute("id")
        assert finding_id, "a finding needs an id for the rows to link back to"
        links = shown.locator("a.cites")
        targets = set(links.evaluate_all("els => els.map(e => e.getAttribute('href').slice(1))"))
        assert targets == cited_rows(op, finding), finding["message"]
        for row_id in sorted(targets):
            page.evaluate("window.scrollTo(0, document.body.scrollHeight)")  # start away from the row
            shown.locator(f'a.cites[href="#{row_id}"]').first.click()
            assert page.evaluate("location.hash") == f"#{row_id}"
            assert target_id(page) == row_id
            assert in_viewport(page, row_id), f"clicking the link to {row_id} did not bring it into view"
            back = page.locator(f'#{row_id} a.cited-by[href="#{finding_id}"]')
            assert back.count() == 1, f"row {row_id} has no link back to finding {finding_id}"
            back.click()
            assert target_id(page) == finding_id
            assert in_viewport(page, finding_id)
            checked += 1
    assert checked >= 6  # the run's findings cite log lines, journal flows and ledger effects
    assert console.errors == []


def test_a_failing_run_writes_its_report_into_the_evidence_folder(failing_run: FailingRun, open_page: OpenPage):
    written = failing_run.evidence / "report.html"
    assert written.is_file()
    assert str(written) in failing_run.run_output  # printed with the failure
    page, console = open_page(written)
    assert page.locator(f"section.operation#op-{failing_run.operation_id}").is_visible()
    assert console.errors == []


def test_the_timeline_shows_the_three_lanes_and_the_gap_between_attempts(failing_run: FailingRun,
                                                                        open_page: OpenPage):
    page, _ = open_page(failing_run.report)
    timeline = page.locator(f"section.operation#op-{failing_run.operation_id} table.timeline")
    timeline.scroll_into_view_if_needed()
    assert timeline.is_visible()
    for lane in ("log", "flow", "effect"):  # the agent's events, the proxy's flows, the ledger's effects
        cells = timeline.locator(f"td.lane-{lane} .evidence")
        assert cells.count() >= 2, lane
        assert cells.first.is_visible()
    gap = timeline.locator("tr.gap")
    assert gap.count() == 1 and gap.is_visible()  # two attempts: one gap, shown
    assert float(gap.get_attribute("data-seconds")) >= 0
    box = timeline.bounding_box()
    assert box and box["width"] <= page.viewport_size["width"] + 1  # no sideways scrolling at the default width


def test_the_timeline_is_on_the_first_screen_and_every_dot_on_it_has_a_legend(failing_run: FailingRun,
                                                                               open_page: OpenPage):
    """Issue 42: the timeline sat about 3,000 px down, below a 38-row checks table, and its dots had no legend."""
    page, _ = open_page(failing_run.report)
    section = page.locator(f"section.operation#op-{failing_run.operation_id}")
    top = section.locator("table.timeline").evaluate("e => e.getBoundingClientRect().top + window.scrollY")
    assert top < 900, f"the timeline starts {top:.0f} px down the page"
    assert not page.locator("table#checks").is_visible()  # folded, its counts in its summary line
    failed = sum(said == "failed" for said in failing_run.verdict["checks"].values())
    assert f"{failed} failed" in page.locator("#run-checks > summary").inner_text()
    drawn = set(section.locator("table.timeline .dot").evaluate_all(
        "els => els.map(e => [...e.classList].find(c => c.startsWith('dot-')).slice(4))"))
    assert drawn == {"log", "flow", "effect"}  # this run has dots of every lane
    legend = section.locator(".timeline-legend .legend")
    explained = dict(zip(legend.evaluate_all("els => els.map(e => e.dataset.lane)"),
                         legend.evaluate_all("els => els.map(e => e.innerText.trim())"), strict=True))
    assert drawn <= set(explained) and all(explained[lane] for lane in drawn), explained
    for lane in drawn:  # the legend's dot is drawn in the colour of the axis's
        colour = "e => getComputedStyle(e).backgroundColor"
        assert legend.locator(f".dot-{lane}").evaluate(colour) == \
            section.locator(f"td.axis .dot-{lane}").first.evaluate(colour)
