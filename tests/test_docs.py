"""The docs/ pages the code and README cite exist, with the sections they name."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
# A citation, not a path in a string literal (data such as "docs/guide.md" is left alone).
CITATION = re.compile(r"(?<![\w/.\"'])docs/([\w-]+\.md)(?:#([\w-]+))?")
SOURCES = ("fabric_memory", "bench", "tests")


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), flags=re.M)
    return {_anchor(h) for h in headings}


def citations() -> list[tuple[str, str, str | None]]:
    files = [REPO / "README.md", *DOCS.glob("*.md")]
    for name in SOURCES:
        files.extend((REPO / name).rglob("*.py"))
    found = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(REPO))
        for match in CITATION.finditer(text):
            found.append((where, match.group(1), match.group(2)))
        # Links between docs pages are relative: (page.md#anchor).
        if path.parent == DOCS:
            for match in re.finditer(r"\]\(([\w-]+\.md)(?:#([\w-]+))?\)", text):
                found.append((where, match.group(1), match.group(2)))
    return found


def test_anchor_follows_github_rules() -> None:
    """Headings become lower-case, hyphenated anchors without punctuation."""
    assert _anchor("Guard rules") == "guard-rules"
    assert _anchor("sessions, stats, verify") == "sessions-stats-verify"
    assert _anchor("`state`") == "state"


def test_code_and_readme_cite_docs() -> None:
    """The package cites docs/ pages, and README links every page."""
    assert any(where.startswith("fabric_memory") for where, _, _ in citations())
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for page in sorted(DOCS.glob("*.md")):
        assert f"(docs/{page.name})" in readme, f"README does not link docs/{page.name}"


def test_citations_resolve() -> None:
    """Each docs/ citation names an existing page and, when it has one, an existing section."""
    broken = []
    for where, page, anchor in citations():
        target = DOCS / page
        if not target.is_file():
            broken.append(f"{where}: docs/{page} does not exist")
        elif anchor is not None and anchor not in anchors(target):
            broken.append(f"{where}: docs/{page} has no section #{anchor}")
    assert not broken, broken


def test_code_cites_no_outside_spec() -> None:
    """No comment cites a spec that is not in the repository ("SPEC §n")."""
    offenders = [
        f"{path.relative_to(REPO)}:{number}"
        for name in SOURCES
        for path in (REPO / name).rglob("*.py")
        if path.name != "test_docs.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "SPEC" in line
    ]
    assert not offenders, offenders


LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(page: Path) -> list[tuple[str, str | None]]:
    """(target file or "", anchor) of each Markdown link on ``page`` that is not a URL."""
    found = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        found.append((path, anchor or None))
    return found


def broken_links(pages: list[Path]) -> list[str]:
    broken = []
    for page in pages:
        for path, anchor in relative_links(page):
            target = (page.parent / path).resolve() if path else page
            if not target.exists():
                broken.append(f"{page.name}: {path} does not exist")
            elif anchor is not None and target.suffix == ".md" and anchor not in anchors(target):
                broken.append(f"{page.name}: {path or page.name} has no section #{anchor}")
    return broken


def test_every_link_of_readme_changelog_and_docs_resolves() -> None:
    """Each relative link (a file, a file#section or a #section of the same page) in README,
    CHANGELOG and every docs page names something that exists."""
    pages = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]
    assert len(pages) > 10
    assert not broken_links(pages), broken_links(pages)


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    """A link to a missing page, or to a missing section, is reported."""
    (tmp_path / "a.md").write_text("# Top\n[x](b.md) [y](#nowhere) [z](a.md#top)\n",
                                   encoding="utf-8")
    assert broken_links([tmp_path / "a.md"]) == ["a.md: b.md does not exist",
                                                 "a.md: a.md has no section #nowhere"]


def test_readme_stays_a_front_door() -> None:
    """README is at most 250 lines and keeps its two set-up commands (CI runs the second):
    the first reads as a person types it, ending in quickstart, with no shell logic."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    blocks = re.findall(r"^```sh\n(.*?)^```", text[text.index("## Set up"):], flags=re.M | re.S)
    assert blocks[0].strip().endswith("&& fabric-memory quickstart")
    assert not re.search(r"\bif\b|\bfind\b|\bexport\b|\$\(", blocks[0]), blocks[0]
    assert "pytest" in blocks[1] and "(cd tests/hosts && npm ci" in blocks[1]
