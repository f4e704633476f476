"""References to documentation stay true: named files and sections exist,
and nothing cites design notes that are not part of the repository.

Docstrings and comments point at ``doc/<file>.md`` (optionally with a
section: ``doc/protocols/jobs.md, "Dependencies"``); docs name source and
test files.  A renamed file or heading breaks a test here instead of
leaving a dead pointer.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Where code (and its comments and docstrings) lives.
CODE_DIRS = ("ganeti", "daemons", "scripts", "tools", "test")
DOC_FILES = ("README.md",)
DOC_DIR = "doc"

#: Design notes outside the repository that code and docs must not cite;
#: what the code relies on is described in doc/ instead.
FORBIDDEN = [
    (re.compile(r"PROTOCOLS\b"), "the external protocol notes"),
    (re.compile(r"\bseeds?[ /_]*0\d\d", re.IGNORECASE), "a seed document"),
    (re.compile(r"\bARCHITECTURE\.md\b"), "the external architecture brief"),
    (re.compile(r"\bSTYLE\.md\b"), "the external style guide"),
    (re.compile(r"\.\./shared\b|\bshared/(?:design|seeds)\b"), "the shared design directory"),
    (re.compile(r"§\s*\d"), "a section number of the external notes"),
]

# doc/x.md, optionally followed by , "Section" (a closing backtick allowed).
_DOC_REF = re.compile(r"""(?<![\w/.-])(doc/[\w./-]+?\.md)`?(?:,\s*(?:"([^"]+)"|'([^']+)'))?""")
# A repository path of a source or test file (doc/ paths: _DOC_REF).
_PATH_REF = re.compile(r"(?<![\w/.-])((?:ganeti|test|tools|daemons|scripts)/[\w./-]*\w\.(?:py|md))\b")
# A relative markdown link target.
_MD_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")


def _text_files(root: Path, rel_dirs: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """``(relative path, text)`` of every UTF-8 text file below ``rel_dirs``."""
    for rel in rel_dirs:
        base = root / rel
        if base.is_file():
            yield rel, base.read_text(encoding="utf-8")
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for name in sorted(filenames):
                path = Path(dirpath) / name
                try:
                    text = path.read_text(encoding="utf-8")
                except (UnicodeDecodeError, OSError):
                    continue
                yield path.relative_to(root).as_posix(), text


def _joined(text: str) -> str:
    """``text`` with line breaks (and comment markers after them) as single spaces,
    so that a reference wrapped over two lines is still one match."""
    return re.sub(r"\s+", " ", re.sub(r"\n[ \t]*#+[ \t]?", " ", text))


def headings(markdown: str) -> list[str]:
    """The heading texts of a markdown file (backticks removed), outside code fences."""
    found = []
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else _HEADING.match(line)
        if m:
            found.append(m.group(1).replace("`", "").strip())
    return found


def _has_section(markdown: str, section: str) -> bool:
    want = " ".join(section.replace("`", "").split()).lower()
    return any(h.lower().startswith(want) for h in headings(markdown))


def reference_problems(root: Path, files: list[tuple[str, str]]) -> list[str]:
    """Dead ``doc/*.md`` references, unknown sections and missing named files."""
    problems = []
    for rel, text in files:
        joined = _joined(text)
        for m in _DOC_REF.finditer(joined):
            target, section = m.group(1), m.group(2) or m.group(3)
            path = root / target
            if not path.is_file():
                problems.append(f"{rel}: names {target}, which does not exist")
            elif section and not _has_section(path.read_text(encoding="utf-8"), section):
                problems.append(f"{rel}: names section {section!r} of {target}, which has"
                                " no such heading")
        for m in _PATH_REF.finditer(text):
            if not (root / m.group(1)).exists():
                problems.append(f"{rel}: names {m.group(1)}, which does not exist")
        if rel.endswith(".md"):
            for m in _MD_LINK.finditer(text):
                link = m.group(1)
                if "://" in link or link.startswith("mailto:"):
                    continue
                if not (root / rel).parent.joinpath(link).exists():
                    problems.append(f"{rel}: links to {link}, which does not exist")
    return problems


def citation_problems(files: list[tuple[str, str]]) -> list[str]:
    """Citations of design notes that are not in the repository."""
    problems = []
    for rel, text in files:
        for lineno, line in enumerate(text.splitlines(), 1):
            for pattern, what in FORBIDDEN:
                if pattern.search(line):
                    problems.append(f"{rel}:{lineno}: cites {what}: {line.strip()}")
    return problems


def _repo_files(dirs: tuple[str, ...]) -> list[tuple[str, str]]:
    me = Path(__file__).resolve().relative_to(ROOT).as_posix()
    return [(rel, text) for rel, text in _text_files(ROOT, dirs) if rel != me]


def test_named_docs_sections_and_files_exist() -> None:
    files = _repo_files(CODE_DIRS + DOC_FILES + (DOC_DIR,))
    problems = reference_problems(ROOT, files)
    assert not problems, "\n".join(problems)


def test_nothing_cites_design_notes_outside_the_repository() -> None:
    files = list(_repo_files(CODE_DIRS + DOC_FILES + (DOC_DIR,)))
    problems = citation_problems(files)
    assert not problems, "\n".join(problems)


def test_doc_index_lists_every_doc_file() -> None:
    index = (ROOT / DOC_DIR / "README.md").read_text(encoding="utf-8")
    listed = {link for link in _MD_LINK.findall(index)}
    docs = {p.relative_to(ROOT / DOC_DIR).as_posix() for p in (ROOT / DOC_DIR).rglob("*.md")}
    missing = sorted(docs - listed - {"README.md"})
    assert not missing, f"doc/README.md does not list: {', '.join(missing)}"


# --- the checks themselves can fail --------------------------------------------

def _tree(tmp_path: Path, files: dict[str, str]) -> list[tuple[str, str]]:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(_text_files(tmp_path, ("ganeti", "doc")))


@pytest.mark.parametrize("source, expected", [
    ('"""See doc/gone.md."""\n', "names doc/gone.md, which does not exist"),
    ('# see doc/a.md, "Nowhere"\n', "names section 'Nowhere' of doc/a.md"),
    ('"""``test/rpc/test_nothing.py`` checks it."""\n', "names test/rpc/test_nothing.py"),
], ids=["missing-file", "missing-section", "missing-test-file"])
def test_reference_check_reports_dead_references(tmp_path: Path, source: str,
                                                 expected: str) -> None:
    files = _tree(tmp_path, {"ganeti/x.py": source, "doc/a.md": "# A\n\n## Framing\n"})
    problems = reference_problems(tmp_path, files)
    assert len(problems) == 1 and expected in problems[0], problems


def test_reference_check_accepts_wrapped_references_and_heading_prefixes(tmp_path: Path) -> None:
    source = ('"""Framing (doc/a.md, "Framing and\n    errors"); see also\n'
              '# doc/a.md, \'Framing\'\n"""\n')
    files = _tree(tmp_path, {"ganeti/x.py": source,
                             "doc/a.md": "# A\n\n## Framing and errors (with notes)\n",
                             "doc/README.md": "[a](a.md)\n"})
    assert reference_problems(tmp_path, files) == []


def test_reference_check_reports_dead_markdown_links(tmp_path: Path) -> None:
    files = _tree(tmp_path, {"doc/README.md": "[x](protocols/x.md)\n"})
    assert reference_problems(tmp_path, files) == [
        "doc/README.md: links to protocols/x.md, which does not exist"]


@pytest.mark.parametrize("line", [
    "Wire protocol (PROTOCOLS.md 2.10)", "replication (seed 004)", "layer 6 in STYLE.md",
    "statuses of §2.7", "see ../shared/design", "ARCHITECTURE.md says so",
], ids=["protocols", "seed", "style", "section-sign", "shared-dir", "architecture"])
def test_citation_check_reports_external_notes(line: str) -> None:
    assert len(citation_problems([("ganeti/x.py", f"# {line}\n")])) == 1


def test_citation_check_leaves_ordinary_words_alone() -> None:
    text = "# a shared/exclusive lock; random.seed(0); protocols of doc/protocols/\n"
    assert citation_problems([("ganeti/x.py", text)]) == []
