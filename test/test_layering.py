"""The import layering of ganeti/__init__.py: lower layers never import higher ones."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "ganeti"

# module prefix -> layer number (longest prefix wins)
LAYERS = {
    "ganeti": 1,
    "ganeti.errors": 1, "ganeti.constants": 1, "ganeti.pathutils": 1,
    "ganeti.serializer": 1, "ganeti.utils": 1, "ganeti.compat": 1, "ganeti.aliases": 1,
    "ganeti.objects": 2, "ganeti.parameters": 2, "ganeti.opcodes": 2,
    "ganeti.rpc.defs": 2, "ganeti.rpc": 2, "ganeti.ht": 2,
    "ganeti.locking": 3, "ganeti.config": 3, "ganeti.configcheck": 3, "ganeti.ssconf": 3,
    "ganeti.crypto": 3, "ganeti.luxi": 3, "ganeti.query": 3,
    "ganeti.rpc.client": 3, "ganeti.rpc.transport": 3, "ganeti.http": 3,
    "ganeti.workerpool": 3, "ganeti.ssh": 3,
    "ganeti.bootstrap": 5,
    "ganeti.cmdlib": 4, "ganeti.mcpu": 4, "ganeti.jqueue": 4,
    "ganeti.hooksmaster": 4, "ganeti.iallocator": 4, "ganeti.context": 4,
    "ganeti.backend": 4, "ganeti.hypervisor": 4, "ganeti.storage": 4,
    "ganeti.osapi": 4, "ganeti.replication": 4,
    "ganeti.cli": 5, "ganeti.client": 5, "ganeti.rapi": 5,
    "ganeti.watcher": 5, "ganeti.tools": 5,
    "ganeti.server": 6,
}
MASTER_SIDE = ("ganeti.cmdlib", "ganeti.mcpu", "ganeti.jqueue", "ganeti.hooksmaster",
               "ganeti.iallocator", "ganeti.context", "ganeti.replication")
NODE_SIDE = ("ganeti.backend", "ganeti.hypervisor", "ganeti.storage", "ganeti.osapi")
PLUGINS = ("ganeti.hypervisor", "ganeti.storage")
FRONT_ENDS = ("ganeti.cli", "ganeti.client", "ganeti.rapi", "ganeti.tools", "ganeti.watcher")


def _has_prefix(mod: str, prefixes: tuple[str, ...]) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def layer_of(module: str) -> int:
    best, layer = "", None
    for prefix, num in LAYERS.items():
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
            best, layer = prefix, num
    if layer is None:
        raise AssertionError(f"{module} is not in the layer table")
    return layer


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    mod = _module_name(path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".")
                if path.name != "__init__.py":
                    base = base[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "ganeti" or (node.module is None and node.level):
                found.extend(f"{target}.{a.name}" for a in node.names)
            else:
                found.append(target)
    return [f for f in found if f == "ganeti" or f.startswith("ganeti.")]


FILES = sorted(ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_imports_point_downward(path: pathlib.Path) -> None:
    mod = _module_name(path)
    mine = layer_of(mod)
    for imp in _imports(path):
        if imp == "ganeti" or imp.split(".")[0] != "ganeti":
            continue
        theirs = layer_of(imp)
        assert theirs <= mine, f"{mod} (layer {mine}) imports {imp} (layer {theirs})"
        if _has_prefix(mod, MASTER_SIDE):
            assert not _has_prefix(imp, NODE_SIDE), f"master side {mod} imports node side {imp}"
        if _has_prefix(mod, NODE_SIDE):
            assert not _has_prefix(imp, MASTER_SIDE), f"node side {mod} imports master side {imp}"
        if _has_prefix(mod, PLUGINS):
            assert theirs <= 2 or _has_prefix(imp, PLUGINS), f"plug-in {mod} imports {imp}"
        if _has_prefix(mod, FRONT_ENDS):
            assert not _has_prefix(imp, ("ganeti.cmdlib", "ganeti.mcpu", "ganeti.backend")), \
                f"front end {mod} imports {imp}"


def test_layer_table_catches_violation(tmp_path: pathlib.Path) -> None:
    # The checker itself must be able to fail.
    assert layer_of("ganeti.errors") < layer_of("ganeti.server.masterd")
    assert layer_of("ganeti.cmdlib.node") == 4
    with pytest.raises(AssertionError):
        layer_of("ganeti_other")
