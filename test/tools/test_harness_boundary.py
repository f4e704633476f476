"""The development harness (``tools/harness/``) stays outside the product.

Nothing in ``ganeti/`` imports it, and it uses only public names of the
``ganeti`` modules (no ``module._private`` access, no ``from ganeti.x
import _private``): what it needs from the product is a public API there.
The same checker runs on made-up sources so that each rule is seen failing.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
HARNESS = ROOT / "tools" / "harness"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(source: str) -> list[str]:
    """``module._name`` uses of ganeti modules (and private names imported from them)."""
    tree = ast.parse(source)
    ganeti_names: set[str] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "ganeti" or alias.name.startswith("ganeti."):
                    ganeti_names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module \
                and (node.module == "ganeti" or node.module.startswith("ganeti.")):
            for alias in node.names:
                if _is_private(alias.name):
                    found.append(f"{node.module}.{alias.name}")
                ganeti_names.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in ganeti_names:
                found.append(f"{ast.unparse(node)}")
    return found


def imports_harness(source: str) -> bool:
    """Whether ``source`` imports ``tools`` (the repository's tools, harness included)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "tools" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and not node.level \
                and (node.module or "").split(".")[0] == "tools":
            return True
    return False


@pytest.mark.parametrize("path", sorted(HARNESS.glob("*.py")), ids=lambda p: p.name)
def test_harness_uses_only_public_names(path: pathlib.Path) -> None:
    assert private_uses(path.read_text()) == []


def test_product_does_not_import_the_harness() -> None:
    offenders = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "ganeti").rglob("*.py"))
                 if imports_harness(p.read_text())]
    assert offenders == []


@pytest.mark.parametrize("source, expected", [
    ("from ganeti import bootstrap\nbootstrap._add_key(1)\n", ["bootstrap._add_key"]),
    ("import ganeti.bootstrap\nganeti.bootstrap._x\n", ["ganeti.bootstrap._x"]),
    ("from ganeti.bootstrap import _add_key\n", ["ganeti.bootstrap._add_key"]),
    ("from ganeti import ssh as s\ns.Runner._run(1)\n", ["s.Runner._run"]),
    ("from ganeti import bootstrap\nbootstrap.add_key(1)\nself._own = 1\n", []),
    ("import os\nos._exit(0)\n", []),
], ids=["attribute", "dotted", "from-import", "alias-chain", "public", "not-ganeti"])
def test_checker_sees_private_uses(source: str, expected: list[str]) -> None:
    assert private_uses(source) == expected


@pytest.mark.parametrize("source, expected", [
    ("from tools.harness import vcluster\n", True),
    ("def f():\n    import tools.harness.sshserver\n", True),
    ("from ganeti.tools import burnin\n", False),
], ids=["from", "lazy", "product-tools"])
def test_checker_sees_harness_imports(source: str, expected: bool) -> None:
    assert imports_harness(source) is expected
