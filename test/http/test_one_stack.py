"""ganeti/http/ is the one HTTP stack: no module of the product imports the standard
library's ``http.server`` or ``http.client`` (doc/protocols/rpc.md, "The HTTP package")."""

from __future__ import annotations

import ast
import pathlib

import pytest

_ROOT = pathlib.Path(__file__).resolve().parents[2]
_REFUSED = ("http.server", "http.client")


def _imports(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            if node.module == "http":
                names += [f"http.{alias.name}" for alias in node.names]
    return names


def _offenders(root: pathlib.Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for name in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if name in _REFUSED or name.startswith(tuple(f"{r}." for r in _REFUSED)):
                found.append(f"{path.relative_to(_ROOT)}: {name}")
    return found


@pytest.mark.parametrize("top", ["ganeti", "daemons", "scripts"])
def test_no_stdlib_http_server_or_client(top: str) -> None:
    assert _offenders(_ROOT / top) == []


def test_the_check_sees_both_spellings(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.py").write_text("import http.server\n")
    (tmp_path / "b.py").write_text("from http import client\n")
    (tmp_path / "c.py").write_text("import http\nfrom http import HTTPStatus\n")
    tree = [_imports(ast.parse((tmp_path / n).read_text())) for n in ("a.py", "b.py", "c.py")]
    assert "http.server" in tree[0] and "http.client" in tree[1]
    assert not set(tree[2]) & set(_REFUSED)
