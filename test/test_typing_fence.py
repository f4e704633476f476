"""The ``TYPE_CHECKING = False`` start-up trick stays fenced (doc/cli-startup.md):
only the modules every ``gnt-*`` command imports at start-up may set it;
everything else imports ``typing`` plainly."""

from __future__ import annotations

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = REPO / "ganeti"

#: packages on the CLI's start-up path: every module in them may use the trick
FENCED_PACKAGES = ("cli", "client")
#: single modules on that path (doc/cli-startup.md, "What a verb may import"):
#: the LUXI codec and client, the serializer, and what they and the list
#: commands import at start-up
FENCED_MODULES = frozenset({
    "luxi.py", "serializer.py", "errors.py", "private.py", "ssconfstore.py",
    "query/__init__.py", "query/format.py", "utils/units.py", "progress.py",
})

_TRICK = re.compile(r"^TYPE_CHECKING\s*=\s*False\b", re.MULTILINE)


def _modules_with_the_trick() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if _TRICK.search(path.read_text(encoding="utf-8")):
            found.append(path.relative_to(PACKAGE).as_posix())
    return found


def _fenced(rel: str) -> bool:
    return rel.split("/", 1)[0] in FENCED_PACKAGES or rel in FENCED_MODULES


def test_the_trick_is_used_only_on_the_cli_start_up_path() -> None:
    outside = [rel for rel in _modules_with_the_trick() if not _fenced(rel)]
    assert not outside, (f"TYPE_CHECKING = False outside the CLI start-up path: {outside};"
                         " use 'from typing import TYPE_CHECKING' there")


def test_the_check_sees_the_trick() -> None:
    """The scan finds the modules that do use it (the check can fail)."""
    found = _modules_with_the_trick()
    assert "luxi.py" in found and "serializer.py" in found
    assert not _fenced("server/masterd.py") and not _fenced("jqueue/queue.py")
