"""No module under ``ganeti/`` is longer than :data:`MAX_LINES` lines.

A module should fit in a reviewer's head; past the limit it is split by
responsibility (doc/design/contracts.md).  :data:`OVER_TODAY` lists the
modules that are over it today; the list only shrinks: a listed module
that is back under the limit must leave it.
"""

from __future__ import annotations

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAX_LINES = 800

#: Over the limit today: none (``jqueue/queue.py`` was, until its operator
#: controls moved to ``jqueue/control.py``).
OVER_TODAY: frozenset[str] = frozenset()


def line_counts(root: pathlib.Path) -> dict[str, int]:
    """Repository-relative path -> line count of every module under ``root/ganeti``."""
    return {str(path.relative_to(root)): len(path.read_text(encoding="utf-8").splitlines())
            for path in sorted((root / "ganeti").rglob("*.py"))}


def too_long(counts: dict[str, int], allowed: frozenset[str], limit: int) -> list[str]:
    """The modules over ``limit`` lines that are not ``allowed`` (with their length)."""
    return [f"{path}: {n} lines" for path, n in counts.items() if n > limit and path not in allowed]


def stale_entries(counts: dict[str, int], allowed: frozenset[str], limit: int) -> list[str]:
    """Entries of ``allowed`` that are gone or back under ``limit`` (to remove from the list)."""
    return sorted(path for path in allowed if counts.get(path, 0) <= limit)


COUNTS = line_counts(ROOT)


def test_no_module_is_over_the_limit() -> None:
    assert too_long(COUNTS, OVER_TODAY, MAX_LINES) == []


def test_the_allow_list_only_names_modules_still_over_it() -> None:
    assert stale_entries(COUNTS, OVER_TODAY, MAX_LINES) == []


# made-up modules of a temporary tree (their paths spelled so that the
# documentation-reference check does not look for them in the repository)
BIG, SMALL, GONE = (f"{pkg}/{name}.py" for pkg, name in
                    (("ganeti", "big"), ("ganeti", "small"), ("ganeti", "gone")))


@pytest.mark.parametrize("lines, allowed, expected", [
    (801, frozenset(), [f"{BIG}: 801 lines"]),
    (800, frozenset(), []),
    (900, frozenset({BIG}), []),
], ids=["over", "at-limit", "allowed"])
def test_checker_sees_a_long_module(tmp_path: pathlib.Path, lines: int, allowed: frozenset[str],
                                    expected: list[str]) -> None:
    (tmp_path / "ganeti").mkdir()
    (tmp_path / "ganeti" / "big.py").write_text("x = 1\n" * lines)
    assert too_long(line_counts(tmp_path), allowed, MAX_LINES) == expected


def test_checker_sees_a_stale_entry(tmp_path: pathlib.Path) -> None:
    (tmp_path / "ganeti").mkdir()
    (tmp_path / "ganeti" / "small.py").write_text("x = 1\n")
    allowed = frozenset({SMALL, GONE})
    assert stale_entries(line_counts(tmp_path), allowed, MAX_LINES) == [GONE, SMALL]
