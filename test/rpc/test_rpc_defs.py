"""Tests for ganeti.rpc.defs: the generated table against the ``@procedure`` functions.

The table (``rpc/table.py``) is generated from the decorated backend
functions; these tests fail when it is stale, and check that the node
daemon's dispatch (``backend.get_function``) and the master's table name
the same procedures with the same parameters.
"""

from __future__ import annotations

import importlib
import inspect
import pathlib

import pytest

from ganeti import backend
from ganeti.rpc import defs, gen, procedure, table


def test_committed_table_is_what_the_generator_writes() -> None:
    committed = pathlib.Path(table.__file__).read_text(encoding="utf-8")
    assert committed == gen.render_table(gen.collect()), \
        "ganeti/rpc/table.py is stale: run python -m ganeti.rpc.gen"


def test_table_rows_are_what_the_functions_declare() -> None:
    declared = {d.call.name: d.call for d in gen.collect()}
    assert list(declared) == list(defs.CALLS)
    assert declared == defs.CALLS


def test_flag_sets_come_from_the_decorators() -> None:
    specs = {name: procedure.spec_of(fn) for name, fn in backend.all_functions().items()}
    assert defs.FENCED_CALLS == {n for n, s in specs.items() if s and s.fenced}
    assert defs.OFFLINE_CALLS == {n for n, s in specs.items() if s and s.offline}
    assert defs.KEEPALIVE_CALLS == {n for n, s in specs.items() if s and s.keepalive and not s.fenced}
    assert defs.KEEPALIVE_WRITE_CALLS == {n for n, s in specs.items()
                                          if s and s.keepalive and s.fenced}
    # the fencing and kept-connection rules as the node daemon applies them
    assert {"upload_file", "master_lease", "replicate_state", "ha_lease"} <= defs.FENCED_CALLS
    assert defs.OFFLINE_CALLS == {"master_lease"}
    assert {"version", "node_info"} <= defs.KEEPALIVE_CALLS
    assert "jobqueue_update_many" in defs.KEEPALIVE_WRITE_CALLS


@pytest.mark.parametrize("name", sorted(defs.CALLS))
def test_every_row_has_backend_function_with_same_params(name: str) -> None:
    call = defs.CALLS[name]
    fn = backend.get_function(name)
    params = list(inspect.signature(fn).parameters)
    assert params[0] == "ctx", f"{name}: first parameter must be ctx"
    assert tuple(params[1:]) == call.arg_names, f"{name}: {params[1:]} != {call.arg_names}"
    assert call.timeout in defs.TIMEOUTS
    assert call.doc


def test_backend_procedures_are_exactly_the_rows() -> None:
    # What the node daemon can run (the decorated functions it finds) and
    # what the master can call (the committed table).
    procedures = set(backend.all_functions())
    assert sorted(procedures - set(defs.CALLS)) == [], "backend procedures without a row"
    assert sorted(set(defs.CALLS) - procedures) == [], "rows without a backend procedure"


@pytest.mark.parametrize("modname", backend.DOMAIN_MODULES)
def test_domain_module_exports_exactly_its_procedures(modname: str) -> None:
    module = importlib.import_module(f"ganeti.backend.{modname}")
    for name in module.__all__:
        fn = getattr(module, name)
        assert inspect.isfunction(fn) and fn.__module__ == module.__name__, \
            f"{modname}.__all__ lists {name}, which is not a procedure defined there"
        assert procedure.spec_of(fn) is not None, f"{modname}.{name} lacks @procedure"
    decorated = {name for name, obj in vars(module).items()
                 if procedure.spec_of(obj) is not None and obj.__module__ == module.__name__}
    assert decorated == set(module.__all__), f"{modname}: @procedure functions missing from __all__"


def test_every_backend_module_is_a_domain_module() -> None:
    # A module missing from DOMAIN_MODULES would serve nothing.
    files = {p.stem for p in pathlib.Path(backend.__file__).parent.glob("*.py")}
    assert files - {"__init__", "context"} == set(backend.DOMAIN_MODULES)


def test_timeout_policy_order() -> None:
    t = defs.TIMEOUTS
    assert t["urgent"] < t["fast"] < t["normal"] < t["slow"] < t["4hrs"] < t["1day"]


def test_unknown_timeout_class_rejected() -> None:
    with pytest.raises(ValueError):
        defs._row("x", [], "sometimes", "doc")


@pytest.mark.parametrize("args, ok", [
    (["/var/lib/ganeti/config.data", "x", 0o644, None, None, None], True),
    (["/f", "x", 0o644, 0, 0, 12], True),          # int accepted for float
    (["/f", "x", True, None, None, None], False),  # bool is not an int
    (["/f", "x", "644", None, None, None], False),
    (["/f", "x", 0o644, None, None], False),       # too few
    ({"file_name": "/f"}, False),                  # not a list
    (None, False),
], ids=["ok", "int-for-float", "bool-not-int", "str-not-int", "count", "dict", "none"])
def test_check_args(args, ok: bool) -> None:
    problem = defs.check_args(defs.CALLS["upload_file"], args)
    assert (problem is None) == ok
    if not ok:
        assert "upload_file" in problem


def test_check_args_names_the_argument() -> None:
    problem = defs.check_args(defs.CALLS["test_delay"], ["soon"])
    assert problem == "test_delay: Parameter 'duration' must be a number, got 'soon'"


@pytest.mark.parametrize("root, path, canonical", [
    ("/", "/var/lib/ganeti/x", "/var/lib/ganeti/x"),
    ("/tmp/n1", "/tmp/n1/var/lib/ganeti/x", "/var/lib/ganeti/x"),
    ("/tmp/n1/", "/tmp/n1", "/"),
    ("/tmp//n1/", "/tmp/n1/var/../var/./lib//x", "/var/lib/x"),   # both normalised first
    ("/tmp/n1/.", "/tmp/n1/queue/", "/queue"),
])
def test_to_canonical(root: str, path: str, canonical: str) -> None:
    assert defs.to_canonical(root, path) == canonical


def test_to_canonical_outside_root() -> None:
    with pytest.raises(ValueError):
        defs.to_canonical("/tmp/n1", "/tmp/n10/x")
    with pytest.raises(ValueError):
        defs.to_canonical("/tmp/n1", "/tmp/n1/../n2/x")


@pytest.mark.parametrize("canonical, expected", [
    ("/var/lib/ganeti/x", "/tmp/n1/var/lib/ganeti/x"),
    ("//var/x", "/tmp/n1/var/x"),
    ("/../../etc/passwd", "/tmp/n1/etc/passwd"),
    ("/", "/tmp/n1"),
])
def test_from_canonical_stays_below_root(canonical: str, expected: str) -> None:
    assert defs.from_canonical("/tmp/n1", canonical) == expected


@pytest.mark.parametrize("seconds,scale,floor,expected", [
    (20.0, 1.0, 5.0, 20.0),       # the option's default changes nothing
    (20.0, 0.05, 5.0, 5.0),       # the tests' scale stops at the floor
    (20.0, 0.5, 5.0, 10.0),
    (20.0, 2.0, 5.0, 40.0),       # a larger scale lengthens it
    (2.0, 0.05, 5.0, 2.0),        # a floor above the default is the default
])
def test_scaled_timeout(seconds: float, scale: float, floor: float, expected: float) -> None:
    assert defs.scaled_timeout(seconds, scale, floor) == pytest.approx(expected)


def test_scaled_timeouts_scale_every_class() -> None:
    assert defs.scaled_timeouts(1.0) is None
    scaled = defs.scaled_timeouts(0.05)
    assert scaled is not None and scaled.keys() == defs.TIMEOUTS.keys()
    assert scaled[defs.URGENT] == pytest.approx(3.0)
