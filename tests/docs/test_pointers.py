"""Every pointer of the README and of docs/*.md lands on something that exists (issue 42): relative links to a
file that exists and, with an anchor, to a heading of that file; prose pointers to a section (`docs/proxy.md,
"Traffic files"`, `(README, "Speed")`) to a heading of that page; and a pointer to a table in the README to a
README section that holds one. `mkdocs build --strict` checks links between the pages, but neither the README's
links nor the prose a reader follows by hand."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```$", flags=re.M | re.S)
# `docs/proxy.md, "Traffic files"`, `checker.md "Limits"`, `(README, "Speed")`
SECTION_POINTER = re.compile(r"((?:docs/)?[\w.-]+\.md|README),? \"([^\"]+)\"")
# "the SDK table in the README", "the README's table", "the README table" ...
README_TABLE = re.compile(r"\btables? in the README\b|\bREADME(?:'s)? (?:\w+ )?tables?\b")
# ... must name its section within the same clause: `the README's table ("Agent frameworks certified")`
NAMED_AFTER = re.compile(r"[^.;]{0,40}?\"([^\"]+)\"")


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension (mkdocs, here) gives a heading; GitHub's agrees on ours."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def prose(page: Path) -> str:
    """The page without its code blocks (a command's `a.md` is no pointer)."""
    return FENCE.sub("", page.read_text(encoding="utf-8"))


def headings(page: Path) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"^#{1,6} (.+)$", prose(page), flags=re.M)]


def section(page: Path, heading: str) -> str:
    """The text under `heading`, down to the next heading of its level or above."""
    text = prose(page)
    start = re.search(rf"^(#+) {re.escape(heading)}$", text, flags=re.M)
    assert start, heading
    end = re.search(rf"^#{{1,{len(start.group(1))}}} ", text[start.end():], flags=re.M)
    return text[start.end():start.end() + end.start() if end else len(text)]


def target(page: Path, name: str) -> Path:
    if name == "README":
        return README
    for candidate in (page.parent / name, REPO / name, REPO / "docs" / name):
        if candidate.is_file():
            return candidate
    return page.parent / name


def names(page: Path) -> str:
    return str(page.relative_to(REPO))


@pytest.mark.parametrize("page", PAGES, ids=names)
def test_every_relative_link_lands_on_a_file_and_heading_that_exist(page: Path) -> None:
    broken = []
    for link in LINK.findall(prose(page)):
        if re.match(r"[a-z]+:", link):  # https:, mailto:
            continue
        path, _, anchor = link.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{link}: no file {file.relative_to(REPO) if file.is_relative_to(REPO) else file}")
        elif anchor and file.suffix == ".md" and anchor not in {slug(h) for h in headings(file)}:
            broken.append(f"{link}: {names(file)} has no heading whose anchor is #{anchor}")
    assert not broken, f"{names(page)}: " + "; ".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=names)
def test_every_pointer_to_a_named_section_lands_on_a_heading_of_that_page(page: Path) -> None:
    broken = []
    for name, wanted in SECTION_POINTER.findall(" ".join(prose(page).split())):
        file = target(page, name)
        if not file.is_file():
            broken.append(f'{name}, "{wanted}": no file {name}')
        elif not any(wanted.lower() in h.lower() for h in headings(file)):
            broken.append(f'{name}, "{wanted}": {names(file)} has no such heading')
    assert not broken, f"{names(page)}: " + "; ".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=names)
def test_every_pointer_to_a_table_in_the_readme_names_a_section_that_holds_one(page: Path) -> None:
    text = " ".join(prose(page).split())
    broken = []
    for mention in README_TABLE.finditer(text):
        named = NAMED_AFTER.match(text, mention.end())
        sections = [h for h in headings(README) if named and named.group(1).lower() in h.lower()]
        if not sections:
            broken.append(f"\"{mention.group(0)}\" names no section of the README "
                          f"(its headings: {', '.join(headings(README))})")
        elif not re.search(r"^\|", section(README, sections[0]), flags=re.M):
            broken.append(f"\"{mention.group(0)}\": the README's \"{sections[0]}\" holds no table")
    assert not broken, f"{names(page)}: " + "; ".join(broken)
