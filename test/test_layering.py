"""The import layering of ``ganeti/__init__.py``: lower layers never import higher ones.

Every import statement of every module under ``ganeti/`` counts, also
those inside functions: a lazy import does not change who depends on
whom.  The checks:

* every module has a row in :data:`LAYERS` (its own, or its package's),
  and every row names a module or package that exists;
* imports point to the same or a lower layer;
* the master side and the node side never import each other; plug-ins
  import layers 1-2 only (and each other); front ends never import
  ``cmdlib``, ``mcpu`` or ``backend``;
* inside the logic layer, :data:`MASTER_ORDER` and :data:`NODE_ORDER`
  (``cmdlib`` <- ``mcpu`` <- ``jqueue``: cmdlib imports neither mcpu nor
  jqueue, mcpu does not import jqueue);
* no import cycle between modules, e.g. among those of ``ganeti.cli``.

Imports under ``if TYPE_CHECKING:`` never run: they must respect the
layers, but not the order inside the logic layer, and they make no cycle
(``cmdlib.base`` names ``mcpu.Processor`` in annotations).

The same checker runs on made-up modules in a temporary tree, so that each
rule is seen failing.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Collection, Iterable, Mapping

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "ganeti"

#: The root package (its ``__init__``: the layer rules and the version).
ROOT_PACKAGE = "ganeti"
ROOT_LAYER = 1

#: Module or package -> layer, one row each.  A package's row covers its
#: modules, unless some of them have rows of their own: then every module
#: of that package needs one (no catch-all for modules nobody listed).
LAYERS: dict[str, int] = {
    # 1. foundation
    "ganeti.errors": 1,
    "ganeti.constants": 1,
    "ganeti.pathutils": 1,
    "ganeti.serializer": 1,
    "ganeti.private": 1,
    "ganeti.wiretypes": 1,
    "ganeti.redact": 1,
    "ganeti.utils": 1,
    "ganeti.aliases": 1,
    "ganeti.metrics": 1,
    "ganeti.progress": 1,
    # 2. data
    "ganeti.objects": 2,
    "ganeti.parameters": 2,
    "ganeti.drbdopts": 2,
    "ganeti.hypervisor.checks": 2,
    "ganeti.ipolicy": 2,
    "ganeti.netpool": 2,
    "ganeti.opcodes": 2,
    "ganeti.rpc": 2,
    "ganeti.rpc.defs": 2,
    "ganeti.rpc.table": 2,
    "ganeti.rpc.procedure": 2,
    "ganeti.rpc.results": 2,
    "ganeti.impexp": 2,
    "ganeti.impexp.info": 2,
    "ganeti.impexp.stream": 2,
    "ganeti.impexp.osimage": 2,
    "ganeti.impexp.imagestore": 2,
    "ganeti.impexp.cloudinit": 2,
    "ganeti.impexp.metadata": 2,
    "ganeti.ha": 2,
    "ganeti.sshkeys": 2,
    # 3. mechanisms
    "ganeti.locking": 3,
    "ganeti.config": 3,
    "ganeti.config.commit": 3,
    "ganeti.config.reader": 3,
    "ganeti.config.writer": 3,
    "ganeti.config.netusers": 3,
    "ganeti.metrics.master": 3,
    "ganeti.config.check": 3,
    "ganeti.config.file": 3,
    "ganeti.ssconf": 3,
    "ganeti.ssconfstore": 1,
    "ganeti.watcher.pause": 3,
    "ganeti.crypto": 3,
    "ganeti.daemonctl": 3,
    "ganeti.ssh": 3,
    "ganeti.sshchannel": 2,
    "ganeti.luxi": 3,
    "ganeti.luxi_table": 3,
    "ganeti.iallocator": 3,
    "ganeti.query": 3,
    "ganeti.events": 3,
    "ganeti.config.events": 3,
    "ganeti.http": 3,
    "ganeti.rpc.client": 3,
    "ganeti.rpc.transport": 3,
    "ganeti.rpc.stubs": 3,
    # 4. logic: master side
    "ganeti.context": 4,
    "ganeti.cmdlib": 4,
    "ganeti.mcpu": 4,
    "ganeti.jqueue": 4,
    "ganeti.replication": 4,
    "ganeti.failover": 4,
    # 4. logic: node side
    "ganeti.hypervisor": 4,
    "ganeti.hypervisor.base": 4,
    "ganeti.hypervisor.fake": 4,
    "ganeti.hypervisor.kvm": 4,
    "ganeti.storage": 4,
    "ganeti.osapi": 4,
    "ganeti.backend": 4,
    # 5. front ends
    "ganeti.bootstrap": 5,
    "ganeti.cli": 5,
    "ganeti.client": 5,
    "ganeti.rapi": 5,
    "ganeti.tools": 5,
    "ganeti.watcher": 5,
    "ganeti.watcher.core": 5,
    "ganeti.watcher.main": 5,
    "ganeti.watcher.master": 5,
    "ganeti.watcher.nodes": 5,
    "ganeti.watcher.state": 5,
    # 6. wiring
    "ganeti.server": 6,
    # a build tool (reads the backend's @procedure functions, writes rpc/table.py
    # and rpc/stubs.py); nothing imports it
    "ganeti.rpc.gen": 6,
}

MASTER_SIDE = ("ganeti.cmdlib", "ganeti.mcpu", "ganeti.jqueue",
               "ganeti.context", "ganeti.replication", "ganeti.failover")
NODE_SIDE = ("ganeti.backend", "ganeti.hypervisor", "ganeti.storage", "ganeti.osapi")
PLUGINS = ("ganeti.hypervisor", "ganeti.storage")
FRONT_ENDS = ("ganeti.cli", "ganeti.client", "ganeti.rapi", "ganeti.tools", "ganeti.watcher")
FRONT_END_NEVER = ("ganeti.cmdlib", "ganeti.mcpu", "ganeti.backend")

#: Inside one side of the logic layer, bottom first: a module may import
#: its own group and those before it, never those after it.
MASTER_ORDER: tuple[tuple[str, ...], ...] = (
    ("ganeti.context",),
    ("ganeti.replication",),
    ("ganeti.failover",),
    ("ganeti.cmdlib",),
    ("ganeti.mcpu",),
    ("ganeti.jqueue",),
)
NODE_ORDER: tuple[tuple[str, ...], ...] = (
    ("ganeti.hypervisor", "ganeti.storage"),
    ("ganeti.osapi",),
    ("ganeti.backend",),
)


class Unlisted(AssertionError):
    """A module without a row in :data:`LAYERS`."""


def _under(module: str, prefixes: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def layer_of(module: str) -> int:
    """The layer of ``module``; :class:`Unlisted` if no row covers it."""
    if module == ROOT_PACKAGE:
        return ROOT_LAYER
    if module in LAYERS:
        return LAYERS[module]
    parts = module.split(".")
    for end in range(len(parts) - 1, 1, -1):
        package = ".".join(parts[:end])
        if package in LAYERS:
            if any(row.startswith(package + ".") for row in LAYERS):
                raise Unlisted(f"{module} is not in the layer table (its package {package}"
                               " lists its modules one by one)")
            return LAYERS[package]
    raise Unlisted(f"{module} is not in the layer table")


def _rank(module: str, order: tuple[tuple[str, ...], ...]) -> int | None:
    for rank, group in enumerate(order):
        if _under(module, group):
            return rank
    return None


class Tree:
    """The modules of a ``ganeti`` package directory and their imports."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self.paths: dict[str, pathlib.Path] = {
            self._module_name(path): path for path in sorted(root.rglob("*.py"))}
        #: (module, run_time, its text) -> its imports: the layer tests and the cycle
        #: test ask for every module's, and parsing the whole package each time is seconds
        self._imports: dict[tuple[str, bool, str], list[str]] = {}

    def _module_name(self, path: pathlib.Path) -> str:
        parts = list(path.relative_to(self.root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)

    def _resolve(self, package: str, name: str) -> str:
        """``from package import name``: the submodule if there is one."""
        candidate = f"{package}.{name}"
        if package == ROOT_PACKAGE or candidate in self.paths:
            return candidate
        return package

    def imports(self, module: str, *, run_time: bool = False) -> list[str]:
        """Every ``ganeti`` module that ``module`` imports, anywhere in its code.

        With ``run_time``, not those under ``if TYPE_CHECKING:``.  A module's text
        is parsed once per ``run_time`` (asked again, the same text gives the same).
        """
        text = self.paths[module].read_text()
        key = (module, run_time, text)
        if key not in self._imports:
            self._imports[key] = self._parse_imports(module, text, run_time=run_time)
        return list(self._imports[key])

    def _parse_imports(self, module: str, text: str, *, run_time: bool) -> list[str]:
        path = self.paths[module]
        tree = ast.parse(text, str(path))
        if run_time:
            for node in ast.walk(tree):
                if isinstance(node, ast.If) and _is_type_checking(node.test):
                    node.body = []
        found: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".")
                    if path.name != "__init__.py":
                        base = base[:-1]
                    base = base[:len(base) - node.level + 1]
                    package = ".".join(base + ([node.module] if node.module else []))
                else:
                    package = node.module or ""
                found.extend(self._resolve(package, alias.name) for alias in node.names)
        return [f for f in dict.fromkeys(found) if _under(f, [ROOT_PACKAGE]) and f != module]


def violations(module: str, imports: Iterable[str],
               type_only: Collection[str] = ()) -> list[str]:
    """What is wrong with ``module`` importing ``imports`` (empty: nothing).

    ``type_only`` are those of ``imports`` that only type checkers import.
    """
    try:
        mine = layer_of(module)
    except Unlisted as exc:
        return [str(exc)]
    problems = []
    for imp in imports:
        if imp == ROOT_PACKAGE:
            continue
        try:
            theirs = layer_of(imp)
        except Unlisted as exc:
            problems.append(f"{module} imports {imp}: {exc}")
            continue
        if theirs > mine:
            problems.append(f"{module} (layer {mine}) imports {imp} (layer {theirs})")
        if _under(module, MASTER_SIDE) and _under(imp, NODE_SIDE):
            problems.append(f"master side {module} imports node side {imp}")
        if _under(module, NODE_SIDE) and _under(imp, MASTER_SIDE):
            problems.append(f"node side {module} imports master side {imp}")
        if _under(module, PLUGINS) and theirs > 2 and not _under(imp, PLUGINS):
            problems.append(f"plug-in {module} imports {imp} (layer {theirs})")
        if _under(module, FRONT_ENDS) and _under(imp, FRONT_END_NEVER):
            problems.append(f"front end {module} imports {imp}")
        for order in () if imp in type_only else (MASTER_ORDER, NODE_ORDER):
            low, high = _rank(module, order), _rank(imp, order)
            if low is not None and high is not None and high > low:
                problems.append(f"{module} imports {imp}, which comes after it in the logic"
                                " layer's order")
    return problems


def _is_type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (``[a, b, ..., a]``), or None."""
    state: dict[str, int] = {}          # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def run_time_graph(tree: Tree) -> dict[str, list[str]]:
    """Module -> the modules of the tree it imports when it runs."""
    return {m: [i for i in tree.imports(m, run_time=True) if i in tree.paths]
            for m in tree.paths}


TREE = Tree(ROOT)


def _check(tree: Tree, module: str) -> list[str]:
    imports = tree.imports(module)
    type_only = set(imports) - set(tree.imports(module, run_time=True))
    return violations(module, imports, type_only)


@pytest.mark.parametrize("module", sorted(TREE.paths))
def test_imports_point_downward(module: str) -> None:
    assert _check(TREE, module) == []


def test_every_row_names_a_module() -> None:
    missing = [row for row in LAYERS
               if row not in TREE.paths and not any(m.startswith(row + ".") for m in TREE.paths)]
    assert missing == []


def test_order_groups_have_rows() -> None:
    for row in [r for order in (MASTER_ORDER, NODE_ORDER) for group in order for r in group]:
        assert row in LAYERS and LAYERS[row] == 4, row


def test_no_import_cycle() -> None:
    cycle = find_cycle(run_time_graph(TREE))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


# -- the checker on made-up modules -------------------------------------------

def _tree(tmp_path: pathlib.Path, files: Mapping[str, str]) -> Tree:
    root = tmp_path / "ganeti"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in [p for p in path.relative_to(root).parents if str(p) != "."]:
            (root / parent / "__init__.py").touch()
        path.write_text(text)
    (root / "__init__.py").touch()
    return Tree(root)


@pytest.mark.parametrize("rel, source, expected", [
    ("errors.py", "from ganeti import config\n",
     "ganeti.errors (layer 1) imports ganeti.config (layer 3)"),
    ("luxi.py", "from ganeti.cmdlib import base\n",
     "ganeti.luxi (layer 3) imports ganeti.cmdlib (layer 4)"),
    ("cmdlib/bad.py", "from ganeti import mcpu\n",
     "ganeti.cmdlib.bad imports ganeti.mcpu, which comes after it"),
    ("cmdlib/bad.py", "def lazy():\n    from ganeti.jqueue import queue\n",
     "ganeti.cmdlib.bad imports ganeti.jqueue, which comes after it"),
    ("cmdlib/bad.py", "from .. import jqueue\n",
     "ganeti.cmdlib.bad imports ganeti.jqueue, which comes after it"),
    ("mcpu.py", "import ganeti.jqueue.queue\n",
     "ganeti.mcpu imports ganeti.jqueue.queue, which comes after it"),
    ("replication/bad.py", "from ganeti.cmdlib import base\n",
     "ganeti.replication.bad imports ganeti.cmdlib, which comes after it"),
    ("osapi.py", "from ganeti.backend import node\n",
     "ganeti.osapi imports ganeti.backend, which comes after it"),
    ("mcpu.py", "from ganeti.backend import node\n",
     "master side ganeti.mcpu imports node side ganeti.backend"),
    ("backend/bad.py", "from ganeti import context\n",
     "node side ganeti.backend.bad imports master side ganeti.context"),
    ("hypervisor/kvm/bad.py", "from ganeti import config\n",
     "plug-in ganeti.hypervisor.kvm.bad imports ganeti.config (layer 3)"),
    ("client/gnt_bad.py", "from ganeti import mcpu\n",
     "front end ganeti.client.gnt_bad imports ganeti.mcpu"),
    ("newthing.py", "", "ganeti.newthing is not in the layer table"),
    ("rpc/newcall.py", "",
     "ganeti.rpc.newcall is not in the layer table (its package ganeti.rpc lists"),
    ("cli/bad.py", "from ganeti import wiring\n",
     "ganeti.cli.bad imports ganeti.wiring: ganeti.wiring is not in the layer table"),
    ("errors.py", "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from ganeti import config\n",
     "ganeti.errors (layer 1) imports ganeti.config (layer 3)"),
], ids=["foundation-up", "mechanism-up", "cmdlib-mcpu", "lazy-cmdlib-jqueue",
        "relative-cmdlib-jqueue", "mcpu-jqueue", "replication-cmdlib", "osapi-backend",
        "master-node", "node-master", "plugin", "front-end", "unlisted",
        "unlisted-in-listed-package", "imports-unlisted", "type-only-up"])
def test_checker_rejects(tmp_path: pathlib.Path, rel: str, source: str, expected: str) -> None:
    tree = _tree(tmp_path, {rel: source})
    module = next(m for m, p in tree.paths.items() if p == tree.root / rel)
    problems = _check(tree, module)
    assert any(p.startswith(expected) for p in problems), problems


def test_checker_accepts_a_well_behaved_module(tmp_path: pathlib.Path) -> None:
    tree = _tree(tmp_path, {"cmdlib/base.py": "",
                            "cmdlib/good.py": "from ganeti import errors, locking, replication\n"
                                              "from ganeti.cmdlib import base\n"
                                              "from . import base as again\n"})
    assert tree.imports("ganeti.cmdlib.good") == [
        "ganeti.errors", "ganeti.locking", "ganeti.replication", "ganeti.cmdlib.base"]
    assert _check(tree, "ganeti.cmdlib.good") == []


def test_type_only_import_may_name_a_later_logic_module(tmp_path: pathlib.Path) -> None:
    tree = _tree(tmp_path, {"cmdlib/typed.py": "from typing import TYPE_CHECKING\n"
                                               "if TYPE_CHECKING:\n"
                                               "    from ganeti.mcpu import Processor\n"})
    assert tree.imports("ganeti.cmdlib.typed") == ["ganeti.mcpu"]
    assert tree.imports("ganeti.cmdlib.typed", run_time=True) == []
    assert _check(tree, "ganeti.cmdlib.typed") == []


def test_cycle_behind_a_lazy_import_is_found(tmp_path: pathlib.Path) -> None:
    tree = _tree(tmp_path, {
        "cli/low.py": "def lazy():\n    from ganeti.cli.high import thing\n",
        "cli/high.py": "from ganeti.cli import low\nthing = 1\n",
        "cli/other.py": "from ganeti.cli import low\n",
    })
    assert find_cycle(run_time_graph(tree)) == [
        "ganeti.cli.high", "ganeti.cli.low", "ganeti.cli.high"]
    # the same import for type checkers only does not run
    (tree.root / "cli" / "low.py").write_text(
        "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from ganeti.cli.high import thing\n")
    assert find_cycle(run_time_graph(tree)) is None
    assert tree.imports("ganeti.cli.low") == ["ganeti.cli.high"]
