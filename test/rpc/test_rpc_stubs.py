"""The generated typed stubs (``ganeti/rpc/stubs.py``): fresh, typed, byte-identical, used.

* the committed file is what ``python -m ganeti.rpc.gen`` writes now;
* every row has a ``call_<name>`` with keyword-only parameters named and
  typed like the row;
* a stub call puts the same bytes on the wire as the positional list;
* :meth:`RpcResults.one` returns the payload or raises naming ``what``;
* nothing outside ``ganeti/rpc/`` calls a procedure by its string name
  (``rpc_one(``, ``getattr(rpc, f"call_...")``, ``rpc.call("name", ...)``,
  ``call_map``, ``transport.post(..., "version", ...)``), and nothing outside
  ``ganeti/luxi.py`` calls a LUXI method by its string name
  (``cl.call("QueryJobs", ...)``: the client's typed methods instead); the
  checker is also seen finding each pattern.
"""

from __future__ import annotations

import ast
import inspect
import pathlib
import re

import pytest

from ganeti import errors, luxi, serializer
from ganeti.rpc import client, defs, gen, stubs
from ganeti.rpc.results import RpcResult, RpcResults
from ganeti.rpc.transport import FunctionTransport

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _runner(seen: list[tuple[str, bytes]], reply: bytes = b"[true, null]") -> client.RpcRunner:
    def post(address: str, port: int, procedure: str, body: bytes, timeout: float) -> bytes:
        seen.append((procedure, body))
        return reply
    return client.RpcRunner(client.StaticResolver({"n1": "10.0.0.1", "n2": "10.0.0.2"},
                                                  default_port=1811), FunctionTransport(post))


def test_committed_stubs_are_what_the_generator_writes() -> None:
    committed = pathlib.Path(stubs.__file__).read_text(encoding="utf-8")
    assert committed == gen.render(), "ganeti/rpc/stubs.py is stale: run python -m ganeti.rpc.gen"


def test_generator_check_mode_reports_fresh_file() -> None:
    assert gen.main(["--check"]) == 0


def test_generator_sees_a_changed_row() -> None:
    extra = defs.RpcCall("node_powercycle_twice", (("hypervisor", str), ("count", int | None)),
                         defs.FAST, "Made up for this test.")
    text = gen.render({**defs.CALLS, extra.name: extra})
    assert text != gen.render()
    assert "def call_node_powercycle_twice(self, node_or_nodes: Nodes, *, hypervisor: str," in text
    assert "count: int | None" in text


def test_generator_refuses_reserved_argument_names() -> None:
    bad = defs.RpcCall("bad", (("rpc_timeout", float),), defs.FAST, "x")
    with pytest.raises(ValueError, match="reserved"):
        gen.render({"bad": bad})


@pytest.mark.parametrize("name", sorted(defs.CALLS))
def test_every_row_has_a_keyword_only_typed_stub(name: str) -> None:
    row = defs.CALLS[name]
    params = inspect.signature(getattr(stubs.RpcStubs, f"call_{name}")).parameters
    assert list(params) == ["self", "node_or_nodes", *row.arg_names, "rpc_timeout"]
    for arg, tp in row.args:
        assert params[arg].kind is inspect.Parameter.KEYWORD_ONLY
        assert params[arg].annotation == gen.annotation(tp)
    assert params["rpc_timeout"].default is None


def test_runner_and_fake_take_their_stubs_from_the_generated_class() -> None:
    from fakes.fakerpc import FakeRpc
    for cls in (client.RpcRunner, FakeRpc):
        assert issubclass(cls, stubs.RpcStubs)
        assert "call_version" not in vars(cls)
    assert not hasattr(client.RpcRunner, "__getattr__")


def test_stub_sends_the_positional_list_in_row_order() -> None:
    seen: list[tuple[str, bytes]] = []
    disk = {"dev_type": "file", "logical_id": ["file", "/x"], "size": 4}
    _runner(seen).call_blockdev_create("n1", disk=disk, size=4, owner_instance_name="i1",
                                       on_primary=True, info="originstname+i1", excl_stor=False)
    assert seen == [("blockdev_create",
                     serializer.dumps_bytes([disk, 4, "i1", True, "originstname+i1", False]))]


def test_stub_body_equals_the_untyped_call() -> None:
    typed: list[tuple[str, bytes]] = []
    untyped: list[tuple[str, bytes]] = []
    _runner(typed).call_upload_file(["n1", "n2"], file_name="/var/lib/ganeti/known_hosts",
                                    content="h\n", mode=0o644, uid=None, gid=None, mtime=1.5)
    _runner(untyped).call("upload_file", ["n1", "n2"],
                          ["/var/lib/ganeti/known_hosts", "h\n", 0o644, None, None, 1.5])
    assert sorted(typed) == sorted(untyped) and len(typed) == 2


def test_one_node_name_is_one_node_not_its_letters() -> None:
    seen: list[tuple[str, bytes]] = []
    res = _runner(seen).call_version("n1")
    assert list(res) == ["n1"] and len(seen) == 1


def test_rpc_timeout_reaches_the_transport() -> None:
    timeouts: list[float] = []

    def post(address: str, port: int, procedure: str, body: bytes, timeout: float) -> bytes:
        timeouts.append(timeout)
        return b"[true, 1]"
    runner = client.RpcRunner(client.StaticResolver({"n1": "10.0.0.1"}, default_port=1811),
                              FunctionTransport(post))
    runner.call_version("n1", rpc_timeout=0.25)
    runner.call_version("n1")
    assert timeouts == [0.25, defs.TIMEOUTS[defs.URGENT]]


def test_one_returns_the_payload() -> None:
    res = _runner([], b'[true, {"path": "/x"}]').call_blockdev_find("n1", disk={})
    assert isinstance(res, RpcResults)
    assert res.one("n1", "Cannot find disk") == {"path": "/x"}


def test_one_raises_naming_what_and_the_node_message() -> None:
    res = _runner([], b'[false, "no space left"]').call_blockdev_grow(
        "n1", disk={}, amount=10, dryrun=True, backingstore=False, excl_stor=False)
    with pytest.raises(errors.OpExecError, match=r"^Cannot grow disk 0: no space left$"):
        res.one("n1", "Cannot grow disk 0")
    with pytest.raises(errors.OpExecError, match=r"^blockdev_grow failed on node n1: no space"):
        res.one("n1")


def test_answered_yields_the_payloads_in_order_and_warns_for_the_others() -> None:
    res = RpcResults("volume_list", {
        "n1": RpcResult("n1", payload=[1]),
        "n2": RpcResult("n2", fail_msg="disk on fire"),
        "n3": RpcResult("n3", payload=[3]),
    })
    warned: list[tuple[str, str]] = []
    got = list(res.answered(["n3", "n2", "n4", "n1"], lambda node, why: warned.append((node, why))))
    assert got == [("n3", [3]), ("n1", [1])]
    assert warned == [("n2", "disk on fire"), ("n4", "no answer")]


def test_one_refuses_a_node_that_was_not_called() -> None:
    res = _runner([]).call_version("n1")
    with pytest.raises(errors.OpExecError, match="version: no answer from node n2"):
        res.one("n2")


def test_one_on_an_offline_node_raises() -> None:
    res = RpcResults("version", [("n1", RpcResult("n1", None, client.OFFLINE_MSG, True, "version"))])
    with pytest.raises(errors.OpExecError, match="offline"):
        res.one("n1", "Cannot ask n1")


def test_per_node_sends_each_node_its_own_arguments_in_one_call() -> None:
    seen: list[tuple[str, bytes]] = []
    disks = {"n1": [[{"a": 1}, "i1", 0]], "n2": [[{"b": 2}, "i2", 1]]}
    res = _runner(seen).per_node(disks, lambda rpc, node: rpc.call_blockdev_getstatus(
        node, disks=disks[node]))
    assert list(res) == ["n1", "n2"] and res.procedure == "blockdev_getstatus"
    assert sorted(seen) == sorted([("blockdev_getstatus", serializer.dumps_bytes([disks["n1"]])),
                                   ("blockdev_getstatus", serializer.dumps_bytes([disks["n2"]]))])


def test_per_node_refuses_a_builder_calling_another_node() -> None:
    with pytest.raises(errors.ProgrammerError, match="per_node"):
        _runner([]).per_node(["n1"], lambda rpc, node: rpc.call_version("n2"))


def test_per_node_of_no_nodes_calls_nothing() -> None:
    seen: list[tuple[str, bytes]] = []
    assert _runner(seen).per_node([], lambda rpc, node: rpc.call_version(node)) == {}
    assert seen == []


def test_probe_version_asks_version_once_and_returns_the_answer() -> None:
    seen: list[tuple[str, bytes]] = []
    assert client.probe_version(_runner(seen, b"[true, 2080000]").transport, "10.0.0.9", 1811,
                                2.0) == 2080000
    assert seen == [("version", b"[]")]


def test_probe_version_raises_when_the_daemon_does_not_answer() -> None:
    def post(address: str, port: int, procedure: str, body: bytes, timeout: float) -> bytes:
        raise errors.RpcTransportError("connection refused")
    with pytest.raises(errors.RpcError, match="connection refused"):
        client.probe_version(FunctionTransport(post), "10.0.0.9", 1811, 2.0)


# --- nobody outside ganeti/rpc/ calls a procedure by its string name ---------------------

#: text patterns, refused in every source file outside ganeti/rpc/
_TEXT_PATTERNS = [re.compile(p) for p in (r"\brpc_one\(", r"""\bf["']call_""",
                                          r"""getattr\([^)]*["']call_""", r"\.call_map\(")]
#: only sources with one of these need the (slower) syntax tree
_AST_NEEDED = re.compile(r"\.(?:call|call_map|post)\(")
#: receivers of ``.call(`` that are node RPC runners (LUXI clients also have ``.call``)
_RPC_RECEIVER = re.compile(r"rpc|runner", re.IGNORECASE)


def string_name_calls(source: str, *, luxi_names: bool = True) -> list[str]:
    """Lines of ``source`` that call a node procedure (or, with ``luxi_names``,
    a LUXI method) by its string name."""
    found = []
    for lineno, line in enumerate(source.splitlines(), 1):
        if any(p.search(line) for p in _TEXT_PATTERNS):
            found.append(f"{lineno}: {line.strip()}")
    if not _AST_NEEDED.search(source):
        return found
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("call", "call_map", "post")):
            continue
        if node.func.attr == "post":     # the transport, with a procedure name
            if any(isinstance(a, ast.Constant) and a.value in defs.CALLS for a in node.args):
                found.append(f"{node.lineno}: {ast.unparse(node)[:100]}")
            continue
        first = node.args[0] if node.args else None
        by_name = isinstance(first, ast.Constant) and (
            first.value in defs.CALLS or (luxi_names and first.value in luxi.METHODS))
        on_runner = bool(_RPC_RECEIVER.search(ast.unparse(node.func.value)))
        if by_name or on_runner:
            found.append(f"{node.lineno}: {ast.unparse(node)[:100]}")
    return found


def test_checker_finds_every_refused_pattern() -> None:
    bad = '\n'.join([
        'rpc_one(self, "blockdev_create", node, disk)',
        'getattr(self.rpc, f"call_{proc}")([node])',
        'getattr(runner, "call_version")([node])',
        'rpc.call("write_ssconf_files", nodes, [values])',
        'self.context.rpc.call(procedure, [node], args)',
        'cl.call("version", [])',
        'self.require_rpc().call_map("blockdev_getstatus", args)',
        'HttpsTransport(pem).post(address, port, "version", b"[]", 2.0)',
        'cl.call("QueryClusterInfo", [])',
        'client_factory(15.0).call("AutoArchiveJobs", [3600, 30.0], timeout=60.0)',
        'self.client.call("SubmitManyJobs", [[op] for op in ops])',
    ])
    assert sorted({int(hit.split(":")[0]) for hit in string_name_calls(bad)}) == \
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]


def test_checker_accepts_typed_calls_and_luxi() -> None:
    good = '\n'.join([
        'rpc.call_blockdev_create(node, disk=d, size=1, owner_instance_name="i", on_primary=True,'
        ' info="", excl_stor=False).one(node, "Cannot create")',
        'cl.QueryClusterInfo()',
        'cl.AutoArchiveJobs(3600, 30.0, read_timeout=60.0)',
        'subprocess.call(cmd)',
        'client.post("/2/instances", body)',
    ])
    assert string_name_calls(good) == []


def test_checker_lets_the_luxi_module_call_its_own_methods_by_name() -> None:
    """``ganeti/luxi.py`` is where the typed methods turn into ``call("Name", ...)``."""
    own = 'return self.call("QueryClusterInfo", [], timeout=read_timeout)'
    assert string_name_calls(own, luxi_names=False) == []
    assert string_name_calls(own) != []
    assert string_name_calls('self.call("version", [])', luxi_names=False) != []


#: files that may talk to the transport by procedure name, and why
_ALLOWED = {
    "tools/bench/bench_rpc.py": "measures the bare transport (TLS + HTTP) against the stubs",
}


def _python_sources() -> list[pathlib.Path]:
    """Every Python file of the product and its tools (entry points have no suffix)."""
    files = [p for top in ("ganeti", "tools", "daemons", "scripts")
             for p in (ROOT / top).rglob("*") if p.is_file()]
    return sorted(p for p in files if p.suffix == ".py" or (
        not p.suffix and p.read_bytes()[:64].startswith(b"#!") and b"python" in p.read_bytes()[:64]))


def test_no_procedure_called_by_string_name_outside_rpc() -> None:
    offenders = []
    for path in _python_sources():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("ganeti/rpc/") or rel in _ALLOWED:
            continue
        source = path.read_text(encoding="utf-8")
        offenders += [f"{rel}:{hit}" for hit in
                      string_name_calls(source, luxi_names=rel != "ganeti/luxi.py")]
    assert offenders == [], ("call the typed stubs (rpc.call_<name>(node, arg=...)) or the"
                             " LUXI client's typed methods (cl.QueryJobs(...)) instead")


def test_the_scan_sees_the_product_and_its_entry_points() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in _python_sources()}
    assert {"ganeti/cmdlib/instance.py", "ganeti/bootstrap.py", "tools/burnin",
            "daemons/ganeti-noded", *_ALLOWED} <= names
