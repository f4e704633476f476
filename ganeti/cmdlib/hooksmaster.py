"""Master side of hooks: build the GANETI_* environment, run pre/post hooks.

An LU declares ``HPATH`` (e.g. ``"node-add"``, None for no hooks),
``HTYPE`` (``constants.HTYPE_*``), ``BuildHooksEnv() -> dict`` (keys
without the ``GANETI_`` prefix) and ``BuildHooksNodes() -> (pre_nodes,
post_nodes)``.  The processor does::

    hm = HooksMaster.from_lu(lu, rpc_runner.call_hooks_runner, cluster_name, master_name)
    hm.run_pre()        # raises errors.HooksAbort if a pre hook refused
    ... lu.Exec(...) ...
    hm.run_post()       # failures are only logged

Rules (doc/protocols/hooks.md, "Pre and post phases"): a failing pre hook aborts the operation with the
scripts' output; a node that cannot be reached (or is offline) does **not**
count as a deny, it is only logged; post hook failures are logged.  The
post environment is the pre environment plus the LU's environment as
computed after ``Exec``, prefixed ``GANETI_POST_``.

**Skipping nodes without scripts.**  An optional ``node_filter(nodes,
hpath, phase) -> nodes`` narrows the nodes actually contacted: the master
passes one that leaves out nodes known to have no entry in
``hooks/<hpath>-<phase>.d`` (see ``cmdlib.hooksrunner.HookDirsCache``), so an
operation on a cluster without hook scripts makes no hooks RPC at all.
Running the hooks runner on such a node would return ``[]`` anyway; the
environment is still built (the pre environment is kept for the post
phase) so the result is identical.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Protocol, Sequence

from ganeti import constants, errors
from ganeti.pathutils import Paths

__all__ = ["HooksMaster", "HooksCall", "NodeFilter", "build_env", "format_env_value"]

logger = logging.getLogger(__name__)

class HooksCall(Protocol):
    """``rpc.call_hooks_runner``: ``(node_names, *, hpath, phase, env) -> {node: RpcResult}``."""

    def __call__(self, node_or_nodes: Sequence[str], *, hpath: str, phase: str,
                 env: dict[str, Any]) -> Mapping[str, Any]: ...


# node_filter(node_names, hpath, phase) -> the nodes that may have scripts
NodeFilter = Callable[[list[str], str, str], list[str]]


def format_env_value(value: Any) -> str:
    """A hook environment value: None -> "", lists -> space separated, else str()."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return " ".join(format_env_value(v) for v in value)
    return str(value)


def build_env(*, hpath: str, phase: str, opcode: str, htype: str | None,
              cluster_name: str, master_name: str, data_dir: str,
              lu_env: dict[str, Any], post_env: dict[str, Any] | None = None,
              target: str | None = None) -> dict[str, str]:
    """The full ``GANETI_*`` environment of one hooks phase (pure function).

    ``lu_env`` keys get the ``GANETI_`` prefix unless they already have it;
    ``post_env`` keys (post phase only) get ``GANETI_POST_``.
    """
    env: dict[str, str] = {
        "GANETI_HOOKS_VERSION": str(constants.HOOKS_VERSION),
        "GANETI_HOOKS_PHASE": phase,
        "GANETI_HOOKS_PATH": hpath,
        "GANETI_OP_CODE": opcode,
        "GANETI_CLUSTER": cluster_name,
        "GANETI_MASTER": master_name,
        "GANETI_DATA_DIR": data_dir,
    }
    if htype:
        env["GANETI_OBJECT_TYPE"] = htype
    if target:
        env["GANETI_OP_TARGET"] = target
    for key, value in lu_env.items():
        name = key if key.startswith("GANETI_") else f"GANETI_{key}"
        env[name] = format_env_value(value)
    if phase == constants.HOOKS_PHASE_POST and post_env:
        for key, value in post_env.items():
            bare = key[len("GANETI_"):] if key.startswith("GANETI_") else key
            env[f"GANETI_POST_{bare}"] = format_env_value(value)
    return env


class HooksMaster:
    """Runs the pre and post hooks of one operation on its nodes."""

    def __init__(self, hooks_call: HooksCall, *, hpath: str | None, opcode: str,
                 htype: str | None, cluster_name: str, master_name: str,
                 env_fn: Callable[[], dict[str, Any]],
                 pre_nodes: Sequence[str], post_nodes: Sequence[str],
                 post_nodes_fn: Callable[[list[str]], list[str]] | None = None,
                 target: str | None = None, data_dir: str | None = None,
                 log_fn: Callable[[str], None] | None = None,
                 node_filter: NodeFilter | None = None) -> None:
        self.hooks_call = hooks_call
        self.node_filter = node_filter
        self.hpath = hpath
        self.opcode = opcode
        self.htype = htype
        self.cluster_name = cluster_name
        self.master_name = master_name
        self.env_fn = env_fn
        self.pre_nodes = list(pre_nodes)
        self.post_nodes = list(post_nodes)
        self.post_nodes_fn = post_nodes_fn
        self.target = target
        self.data_dir = data_dir or Paths(root="/").data_dir
        self.log_fn = log_fn
        self.pre_env: dict[str, Any] | None = None

    @classmethod
    def from_lu(cls, lu: Any, hooks_call: HooksCall, cluster_name: str, master_name: str,
                **kwargs: Any) -> HooksMaster:
        """Build from an LU (``HPATH``, ``HTYPE``, ``op``, ``BuildHooksEnv``, ``BuildHooksNodes``)."""
        hpath = getattr(lu, "HPATH", None)
        pre_nodes: Sequence[str] = ()
        post_nodes: Sequence[str] = ()
        if hpath:
            pre_nodes, post_nodes = lu.BuildHooksNodes()
        op = getattr(lu, "op", None)
        opcode = (getattr(op, "OP_ID", None) or type(op).__name__) if op is not None else ""
        target = kwargs.pop("target", None)
        if target is None and op is not None and hasattr(op, "summary"):
            try:
                summary = op.summary()
                target = summary[summary.find("(") + 1:-1] if "(" in summary else None
            except Exception:  # a summary is a nicety, never a reason to fail
                target = None
        return cls(hooks_call, hpath=hpath, opcode=opcode, htype=getattr(lu, "HTYPE", None),
                   cluster_name=cluster_name, master_name=master_name,
                   env_fn=lu.BuildHooksEnv, pre_nodes=pre_nodes, post_nodes=post_nodes,
                   post_nodes_fn=getattr(lu, "PreparePostHookNodes", None),
                   target=target, **kwargs)

    def _env(self, phase: str, post_env: dict[str, Any] | None = None) -> dict[str, str]:
        assert self.hpath is not None
        if self.pre_env is None:
            self.pre_env = dict(self.env_fn())
        return build_env(hpath=self.hpath, phase=phase, opcode=self.opcode, htype=self.htype,
                         cluster_name=self.cluster_name, master_name=self.master_name,
                         data_dir=self.data_dir, lu_env=self.pre_env, post_env=post_env,
                         target=self.target)

    def _run(self, phase: str, nodes: list[str], env: dict[str, str]
             ) -> dict[str, list[tuple[str, int, str]]]:
        """Run one phase; ``{node: [(script, status, output)]}`` of reachable nodes."""
        assert self.hpath is not None
        if nodes and self.node_filter is not None:
            nodes = list(self.node_filter(list(nodes), self.hpath, phase))
        if not nodes:
            return {}
        results = self.hooks_call(nodes, hpath=self.hpath, phase=phase, env=env)
        reported: dict[str, list[tuple[str, int, str]]] = {}
        for node in nodes:
            res = results.get(node)
            if res is None or getattr(res, "offline", False):
                continue
            if res.fail_msg:
                logger.warning("Cannot run %s hooks %s on node %s: %s", phase, self.hpath,
                               node, res.fail_msg)
                if self.log_fn:
                    self.log_fn(f"Communication failure to node {node} while running"
                                f" {phase} hooks: {res.fail_msg}")
                continue
            entries = []
            for entry in res.payload or []:
                try:
                    script, status, output = entry
                except (TypeError, ValueError):
                    logger.warning("Malformed hooks result from %s: %r", node, entry)
                    continue
                entries.append((str(script), int(status), str(output)))
            reported[node] = entries
        return reported

    def run_pre(self) -> dict[str, list[tuple[str, int, str]]]:
        """Run the pre hooks; raises :class:`errors.HooksAbort` if any script failed.

        The exception message lists every failing ``node:script`` with its output.
        """
        if not self.hpath:
            return {}
        results = self._run(constants.HOOKS_PHASE_PRE, self.pre_nodes,
                            self._env(constants.HOOKS_PHASE_PRE))
        failures = [(node, script, output) for node, entries in results.items()
                    for script, status, output in entries if status == constants.HKR_FAIL]
        if failures:
            lines = [f"Hook script {script} failed on node {node}:"
                     + (f"\n  {output.strip()}" if output.strip() else " (no output)")
                     for node, script, output in failures]
            raise errors.HooksAbort(f"Pre-hooks of {self.hpath} refused the operation:\n"
                                    + "\n".join(lines))
        return results

    def run_post(self, post_env: dict[str, Any] | None = None) -> dict[str, list[tuple[str, int, str]]]:
        """Run the post hooks; failures are logged (and reported via ``log_fn``), never raised.

        ``post_env`` defaults to calling ``env_fn`` again (the state after Exec).
        """
        if not self.hpath:
            return {}
        if self.pre_env is None:
            self.pre_env = dict(self.env_fn())
        if post_env is None:
            post_env = dict(self.env_fn())
        nodes = list(self.post_nodes)
        if self.post_nodes_fn is not None:
            nodes = list(self.post_nodes_fn(nodes))
        results = self._run(constants.HOOKS_PHASE_POST, nodes,
                            self._env(constants.HOOKS_PHASE_POST, post_env))
        for node, entries in results.items():
            for script, status, output in entries:
                if status == constants.HKR_FAIL:
                    logger.warning("Post hook %s failed on node %s: %s", script, node, output)
                    if self.log_fn:
                        self.log_fn(f"Post hook {script} failed on node {node}: {output.strip()}")
        return results

    def run_phase(self, phase: str, nodes: Sequence[str] | None = None
                  ) -> dict[str, list[tuple[str, int, str]]]:
        """Run an arbitrary phase on ``nodes`` (default: that phase's nodes), no abort logic."""
        if not self.hpath:
            return {}
        if nodes is None:
            nodes = self.pre_nodes if phase == constants.HOOKS_PHASE_PRE else self.post_nodes
        return self._run(phase, list(nodes), self._env(phase))
