"""ganeti.query loads its names lazily; the type checker sees them through an import block.

The two lists (``_SUBMODULE`` for run time, the ``if TYPE_CHECKING:``
imports for mypy) must name the same things from the same submodules.
"""

from __future__ import annotations

import ast
import pathlib

from ganeti import query

INIT = pathlib.Path(query.__file__)


def _type_checking_imports() -> dict[str, str]:
    tree = ast.parse(INIT.read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module
                for alias in imp.names:
                    found[alias.name] = imp.module.rsplit(".", 1)[-1]
    return found


def test_type_checking_block_matches_lazy_table() -> None:
    assert _type_checking_imports() == query._SUBMODULE


def test_every_lazy_name_is_exported_and_loads() -> None:
    assert sorted(query._SUBMODULE) == sorted(query.__all__)
    for name in query.__all__:
        assert getattr(query, name) is not None
