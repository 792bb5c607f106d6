"""`matrix --html`: the certification matrix as one self-contained page, generated from the matrix's data,
every value escaped by the template engine."""

from __future__ import annotations

from html.parser import HTMLParser

from harness.report import render_matrix_html, render_matrix_markdown
from harness.results.matrix import REFERENCE, Cell, Matrix

HOSTILE = "<script>alert(1)</script>|pipe"


class Page(HTMLParser):
    """The tags, the table cells' text by class, and every attribute of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.cells: list[tuple[str, str]] = []  # (class, text) of each td
        self.row_heads: list[str] = []
        self._td: list[str] | None = None
        self._td_class = ""
        self._th: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs
        if tag == "td":
            self._td, self._td_class = [], dict(attrs).get("class") or ""
        elif tag == "th" and dict(attrs).get("scope") == "row":
            self._th = []

    def handle_endtag(self, tag):
        if tag == "td" and self._td is not None:
            self.cells.append((self._td_class, " ".join("".join(self._td).split())))
            self._td = None
        elif tag == "th" and self._th is not None:
            self.row_heads.append("".join(self._th))
            self._th = None

    def handle_data(self, data):
        for part in (self._td, self._th):
            if part is not None:
                part.append(data)


def sample() -> Matrix:
    return Matrix([
        Cell(REFERENCE, "s1", True, [], "e", facts={"effects": 1, "attempts": 2, "key_behaviour": "same key"}),
        Cell(REFERENCE, "s2", False, ["H015"], "e"),
        Cell("idle", "s1", False, ["H021"], "e", ["H021"]), Cell("idle", "s2", True, [], "e"),
        Cell("forger", "s1", False, ["H018"], "e", ["H015", "H018"]),
        Cell(HOSTILE, "s1", False, ["H040"], "e", command=f"python -c '1 | 2' {HOSTILE}", bundled=False,
             facts={"effects": 2, "attempts": 3, "key_behaviour": "<b>new key</b>"}),
        Cell(HOSTILE, "s2", False, [], "", command=f"python -c '1 | 2' {HOSTILE}", bundled=False,
             error="AgentError: <img src=x onerror=alert(1)>"),
    ])


def test_the_page_escapes_what_agents_say_and_fetches_nothing():
    html = render_matrix_html(sample())
    page = Page()
    page.feed(html)
    assert "script" not in page.tags and "img" not in page.tags and "b" not in page.tags  # text, never markup
    assert "&lt;script&gt;alert(1)&lt;/script&gt;|pipe" in html
    assert HOSTILE in page.row_heads  # the label reads as itself, the pipe kept
    assert not [v for k, v in page.attrs if k in ("src", "href") or (k.startswith("on"))]  # self-contained
    assert "http://" not in html and "https://" not in html and "<link" not in html and "\x1b" not in html


def test_the_page_has_a_cell_per_agent_and_scenario_with_verdict_codes_and_facts():
    page = Page()
    page.feed(render_matrix_html(sample()))
    cells = [c for c in page.cells if "cell" in c[0].split() or c[0] == "none"]
    assert [c[0].split()[-1] for c in cells] == ["ok", "false-alarm", "caught", "ok", "missed", "none", "fail",
                                                 "error"]
    by_class = {c: text for c, text in reversed(cells)}  # the first cell of each class
    assert by_class["cell ok"].startswith("PASS effects 1 · attempts 2 key: same key")
    assert by_class["cell caught"].startswith("FAIL H021 caught")
    assert "expected H015 H018" in by_class["cell missed"]
    assert by_class["cell fail"] == "FAIL H040 effects 2 · attempts 3 key: <b>new key</b>"
    assert by_class["cell error"].startswith("ERROR AgentError: <img src=x onerror=alert(1)>")
    html = render_matrix_html(sample())
    assert "catch rate: 1/2 wrong agents caught (50%)" in html and "false alarms: 1/2 reference runs failed" in html
    assert "your agents: 0/2 cells passed" in html and "not certified" in html


def test_the_markdown_says_the_rates_before_the_table():
    text = render_matrix_markdown(sample())
    assert ("Catch rate: 1/2 wrong agents caught (50%); false alarms: 1/2 reference runs failed (50%); your agents: "
            "0/2 cells passed.") in text
    assert text.index("Catch rate") < text.index("| agent |")
