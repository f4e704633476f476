"""The ``TYPE_CHECKING = False`` start-up trick stays fenced (doc/cli-startup.md):
only the modules the ``gnt-*`` commands import at start-up may set it;
everything else imports ``typing`` plainly."""

from __future__ import annotations

import ast
import pathlib

from cli_startup import ALLOWED_GANETI

REPO = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = REPO / "ganeti"

#: packages on the CLI's start-up path: every module in them may use the trick
FENCED_PACKAGES = ("ganeti.cli", "ganeti.client")
#: on the path but imported lazily, so not in the start-up set: job progress
#: lines and the list commands' table layout
FENCED_LAZY = frozenset({"ganeti.progress", "ganeti.query.format"})


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sets_the_trick(source: str) -> bool:
    """A top-level ``TYPE_CHECKING = False`` (not text in a string)."""
    for node in ast.parse(source).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "TYPE_CHECKING"
                and isinstance(node.value, ast.Constant) and node.value.value is False):
            return True
    return False


def _modules_with_the_trick() -> list[str]:
    return [_module_name(path) for path in sorted(PACKAGE.rglob("*.py"))
            if _sets_the_trick(path.read_text(encoding="utf-8"))]


def _fenced(module: str) -> bool:
    return (module in ALLOWED_GANETI or module in FENCED_LAZY
            or any(module.startswith(pkg + ".") for pkg in FENCED_PACKAGES))


def test_the_trick_is_used_only_on_the_cli_start_up_path() -> None:
    outside = [m for m in _modules_with_the_trick() if not _fenced(m)]
    assert not outside, (f"TYPE_CHECKING = False outside the CLI start-up path: {outside};"
                         " use 'from typing import TYPE_CHECKING' there")


def test_the_check_sees_the_trick() -> None:
    """The scan finds the modules that do use it, and only real assignments."""
    found = _modules_with_the_trick()
    assert "ganeti.luxi" in found and "ganeti.serializer" in found
    assert _sets_the_trick("TYPE_CHECKING = False\n")
    assert not _sets_the_trick('TEMPLATE = """\nTYPE_CHECKING = False\n"""\n')
    assert not _fenced("ganeti.server.masterd") and not _fenced("ganeti.jqueue.queue")
