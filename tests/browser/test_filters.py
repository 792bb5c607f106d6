"""The index's filters, in headless Chromium: with JavaScript the selects hide the other operations in
place; without it the page is whole (summary, index, every section) and the filter links lead to the
filtered index. The report is of a synthetic run of every story (6 healthy, 2 duplicate, 2 key_conflict)."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import MixedRun, OpenPage


def shown_rows(page: Any, scope: str = "table#operations") -> dict[str, bool]:
    """Every index row's operation id, and whether a reader can see it."""
    rows = page.locator(f"{scope} tr.operation")
    ids = rows.evaluate_all("els => els.map(e => e.dataset.operationId)")
    return {op: rows.nth(k).is_visible() for k, op in enumerate(ids)}


def visible(rows: dict[str, bool]) -> set[str]:
    return {op for op, seen in rows.items() if seen}


def test_the_report_holds_every_story(mixed_run: MixedRun):
    classes = {op["classification"] for op in mixed_run.verdict["operations"]}
    assert classes == {"healthy", "duplicate", "key_conflict"}
    assert mixed_run.operations(code="H016") == mixed_run.operations(classification="duplicate")


def test_choosing_a_classification_hides_the_other_operations(mixed_run: MixedRun, open_page: OpenPage):
    page, console = open_page(mixed_run.report)
    every = mixed_run.operations()
    assert visible(shown_rows(page)) == every
    for classification in ("duplicate", "key_conflict", "healthy"):
        page.select_option("#filter-classification", classification)
        rows = shown_rows(page)
        assert set(rows) == every  # hidden, not removed
        assert visible(rows) == mixed_run.operations(classification=classification), classification
    page.select_option("#filter-classification", "")  # every classification again
    assert visible(shown_rows(page)) == every
    assert console.errors == []


def test_choosing_a_rule_hides_the_operations_it_did_not_fire_on(mixed_run: MixedRun, open_page: OpenPage):
    page, console = open_page(mixed_run.report)
    for code in ("H016", "H004", "H002"):
        page.select_option("#filter-rule", code)
        expected = mixed_run.operations(code=code)
        assert expected, code
        assert visible(shown_rows(page)) == expected, code
    page.select_option("#filter-rule", "H016")
    page.select_option("#filter-classification", "key_conflict")  # both: no operation is both
    assert visible(shown_rows(page)) == set()
    page.select_option("#filter-rule", "")
    assert visible(shown_rows(page)) == mixed_run.operations(classification="key_conflict")
    assert console.errors == []


def test_without_javascript_the_page_is_whole_and_the_filter_links_lead_to_filtered_views(
        mixed_run: MixedRun, open_page: OpenPage):
    page, console = open_page(mixed_run.report, javascript=False)
    assert page.evaluate("1 + 1") == 2  # the test's own scripts still run; the page's do not
    assert page.locator("#summary").is_visible()
    assert page.locator("#index").is_visible()
    every = mixed_run.operations()
    assert visible(shown_rows(page)) == every
    sections = page.locator("section.operation")
    assert set(sections.evaluate_all("els => els.map(e => e.dataset.operationId)")) == every
    assert all(sections.nth(k).is_visible() for k in range(sections.count()))
    assert not page.locator("#filter-classification").is_visible()  # a control that cannot work is not shown
    for kind, value, expected in (("classification", "duplicate", mixed_run.operations(classification="duplicate")),
                                  ("classification", "key_conflict",
                                   mixed_run.operations(classification="key_conflict")),
                                  ("rule", "H004", mixed_run.operations(code="H004"))):
        link = page.locator(f'a.filter[data-filter="{kind}"][data-value="{value}"]').first
        href = link.get_attribute("href")
        link.click()
        page.wait_for_load_state()
        if href.startswith("#"):  # one file: the filtered index is a section shown by :target
            assert page.evaluate("location.hash") == href
            filtered = page.locator(f"section.filtered-index{href}")
            assert filtered.is_visible()
            assert visible(shown_rows(page, f"section.filtered-index{href}")) == expected, href
            others = page.locator("section.filtered-index:not(:target)")
            assert not any(others.nth(k).is_visible() for k in range(others.count()))
        else:  # paged: a file of its own
            assert page.url.endswith(href)
            assert visible(shown_rows(page)) == expected, href
            page.go_back()
    assert console.errors == []
