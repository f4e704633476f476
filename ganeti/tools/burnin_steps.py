"""The steps of burnin, in upstream's order, each with the rule that skips it.

A :class:`Step` has a name (the timing table's row), a title (its
``- <title>`` line), ``skip_reason(burner)`` (None when the step applies,
else the one-line reason printed as ``- Skipping <title> (<reason>)``) and
``run(burner)``, which prints the per-instance lines and hands the jobs to
the burner's :class:`~ganeti.tools.burnin.JobRunner`.  Opcodes are dicts
with Ganeti's names and parameters (doc/protocols/opcodes.md), so that a
step can drive an opcode the local library does not define (the master
validates every one at submission).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ganeti import constants
from ganeti.tools.burnin_jobs import Job
from ganeti.opcodes import wire

if TYPE_CHECKING:
    from ganeti.tools.burnin import Burner

__all__ = ["Step", "STEPS", "STEP_NAMES", "GROWABLE", "MIRRORED", "MOVABLE", "IMPEXP"]

#: Ganeti's replace-disks modes and local export mode (doc/protocols/opcodes.md).
REPLACE_DISK_PRI = "replace_on_primary"
REPLACE_DISK_SEC = "replace_on_secondary"
REPLACE_DISK_CHG = "replace_new_secondary"
EXPORT_MODE_LOCAL = "local"
#: The operations of a disk/NIC modification list (ganeti.opcodes.instance's DDM_*,
#: not imported: the opcode classes cost a tenth of burnin's start-up).
DDM_ADD, DDM_MODIFY, DDM_REMOVE = "add", "modify", "remove"
#: A NIC parameter value asking the master to generate one (a MAC).
VALUE_GENERATE = "generate"

#: Templates whose disks can grow.
GROWABLE = frozenset([constants.DT_PLAIN, constants.DT_DRBD8, constants.DT_FILE,
                      constants.DT_SHARED_FILE, constants.DT_RBD, constants.DT_EXT,
                      constants.DT_GLUSTER])
#: Templates every node can reach (internally or externally mirrored): failover, migrate.
MIRRORED = constants.DTS_INT_MIRROR | constants.DTS_EXT_MIRROR
#: Templates whose data lives on the primary only and moves by copying.
MOVABLE = frozenset([constants.DT_PLAIN, constants.DT_FILE])
#: Templates burnin exports and imports back (all it supports: an export
#: of a diskless instance is its config.ini alone).
IMPEXP = frozenset([constants.DT_DISKLESS, constants.DT_FILE, constants.DT_SHARED_FILE,
                    constants.DT_PLAIN, constants.DT_DRBD8, constants.DT_RBD, constants.DT_EXT,
                    constants.DT_GLUSTER])


@dataclass(frozen=True)
class Step:
    """One burnin step: its name, title, skip rule and body."""

    name: str
    title: str
    skip_reason: Callable[[Burner], str | None]
    run: Callable[[Burner], None]


def _cycle(nodes: list[str], shift: int, count: int) -> list[str]:
    """``count`` nodes starting at ``nodes[shift]``, round robin."""
    return [nodes[(i + shift) % len(nodes)] for i in range(count)]


def _nodes(b: Burner) -> list[str]:
    assert b.state is not None
    return b.state.nodes


def _template(b: Burner) -> str:
    return b.opts.disk_template


def _switch(flag: str, switch: str, *more: Callable[[Burner], str | None]
            ) -> Callable[[Burner], str | None]:
    """A skip rule: ``--no-<switch>`` given, else the first other rule that says no."""
    def rule(b: Burner) -> str | None:
        if not getattr(b.opts, flag):
            return f"--no-{switch} given"
        for check in more:
            why = check(b)
            if why:
                return why
        return None
    return rule


def _needs_nodes(count: int) -> Callable[[Burner], str | None]:
    def rule(b: Burner) -> str | None:
        have = len(_nodes(b))
        return f"needs at least {count} nodes, {have} selected" if have < count else None
    return rule


def _templates(allowed: frozenset[str], what: str) -> Callable[[Burner], str | None]:
    def rule(b: Burner) -> str | None:
        return None if _template(b) in allowed else f"disk template {_template(b)} {what}"
    return rule


def _always(b: Burner) -> str | None:
    return None


# --- common opcodes ------------------------------------------------------------

def _stop(name: str) -> dict[str, Any]:
    return wire.instance_shutdown(instance_name=name)


def _start(name: str) -> dict[str, Any]:
    return wire.instance_startup(instance_name=name, force=False)


def _rename(b: Burner, old: str, new: str) -> dict[str, Any]:
    return wire.drop_none(wire.instance_rename(instance_name=old, new_name=new,
                                               name_check=b.opts.name_check,
                                               ip_check=b.opts.ip_check))


def _disk_sizes(b: Burner) -> list[int]:
    """The instances' disk sizes now: the created sizes, plus the growth once
    the grow-disks step is done (an import must declare disks that hold the
    exported images: doc/exports.md)."""
    grown = any(r.name == "grow-disks" and r.status == "done" for r in b.results)
    if not grown:
        return list(b.opts.disk_size)
    return [size + growth for size, growth in zip(b.opts.disk_size, b.opts.disk_growth)]


def _create_op(b: Burner, name: str, pnode: str | None, snode: str | None,
               **extra: Any) -> dict[str, Any]:
    o = b.opts
    return wire.drop_none(wire.instance_create(instance_name=name,
                                               disks=[{"size": size} for size in _disk_sizes(b)],
                                               disk_template=o.disk_template,
                                               nics=[dict(n) for n in o.nics], os_type=o.os,
                                               pnode=pnode, snode=snode, start=True,
                                               ip_check=o.ip_check, name_check=o.name_check,
                                               wait_for_sync=True, file_driver="loop",
                                               iallocator=o.iallocator, beparams=o.beparams,
                                               hvparams=dict(o.hvparams), hypervisor=o.hypervisor,
                                               osparams=dict(o.osparams), **extra))


def _placement(b: Burner, pnode: str, snode: str) -> tuple[str | None, str | None, str]:
    """``(pnode, snode, text)`` for a new instance: iallocator, primary only, or both."""
    if b.opts.iallocator:
        return None, None, f"with iallocator {b.opts.iallocator}"
    if _template(b) not in constants.DTS_INT_MIRROR:
        return pnode, None, f"on {pnode}"
    return pnode, snode, f"on {pnode}, {snode}"


def _after_check(b: Burner) -> None:
    for name in b.instances:
        b.check_alive(name)


# --- the steps -----------------------------------------------------------------

Ops = list[dict[str, Any]]


def _each(b: Burner, title: str, step: str, ops_for: Callable[[str], Ops], *,
          check: bool = True, on_success: Callable[[str], None] | None = None) -> None:
    """The common body of a step: one job an instance, run under ``step``.

    Prints ``title``, then ``instance <name>`` and whatever ``ops_for(name)``
    prints (the step's detail lines) for each instance; with ``check``, every
    instance is checked alive afterwards.
    """
    b.log(title)
    jobs = []
    for name in b.instances:
        b.log(f"instance {name}", 1)
        done = None if on_success is None else functools.partial(on_success, name)
        jobs.append(Job(name, ops_for(name), on_success=done))
    b.runner.run(step, jobs)
    if check:
        _after_check(b)


def _logged(b: Burner, lines: tuple[str, ...], ops: Ops) -> Ops:
    """``ops``, once the detail ``lines`` are printed."""
    for line in lines:
        b.log(line, 2)
    return ops


def _by_instance(b: Burner, shift: int) -> dict[str, str]:
    """Each instance's node from the selected ones, round robin from ``nodes[shift]``."""
    return dict(zip(b.instances, _cycle(_nodes(b), shift, len(b.instances))))


def _create(b: Burner) -> None:
    pnodes, snodes = _by_instance(b, 0), _by_instance(b, 1)

    def ops(name: str) -> Ops:
        p, s, text = _placement(b, pnodes[name], snodes[name])
        return _logged(b, (text,), [_create_op(b, name, p, s, mode=constants.INSTANCE_CREATE)])
    _each(b, "Creating instances", "create", ops, on_success=b.to_remove.append)


def _runtime_memory(b: Burner) -> None:
    size = b.opts.minmem_size
    _each(b, "Setting instance runtime memory", "runtime-memory",
          lambda name: _logged(b, (f"Set memory to {size} MB",), [
              wire.instance_set_params(instance_name=name, runtime_mem=size)]),
          check=False)


def _memory_rule(b: Burner) -> str | None:
    if b.opts.minmem_size >= b.opts.maxmem_size:
        return "minimum and maximum memory are equal"
    return None


def _grow(b: Burner) -> None:
    def ops(name: str) -> Ops:
        out = []
        for idx, growth in enumerate(b.opts.disk_growth):
            if growth > 0:
                b.log(f"increase disk/{idx} by {growth} MB", 2)
                out.append(wire.instance_grow_disk(instance_name=name, disk=idx, amount=growth,
                                                   wait_for_sync=True, ignore_ipolicy=True))
        return out
    _each(b, "Growing disks", "grow-disks", ops, check=False)


def _growth_rule(b: Burner) -> str | None:
    if not any(g > 0 for g in b.opts.disk_growth):
        return "--disk-growth is 0"
    return None


def _replace1(b: Burner) -> None:
    def ops(name: str) -> Ops:
        out = []
        for mode in (REPLACE_DISK_SEC, REPLACE_DISK_PRI):
            b.log(f"run {mode}", 2)
            out.append(wire.drop_none(wire.instance_replace_disks(
                instance_name=name, mode=mode, disks=list(range(len(b.opts.disk_size))),
                early_release=b.opts.early_release)))
        return out
    _each(b, "Replacing disks on the same nodes", "replace1", ops, check=False)


def _replace2(b: Burner) -> None:
    tnodes = _by_instance(b, 2)
    alloc = b.opts.iallocator

    def ops(name: str) -> Ops:
        text = f"with iallocator {alloc}" if alloc else tnodes[name]
        return _logged(b, (f"run {REPLACE_DISK_CHG} {text}",), [
            wire.drop_none(wire.instance_replace_disks(instance_name=name, mode=REPLACE_DISK_CHG,
                                                       remote_node=None if alloc else tnodes[name],
                                                       iallocator=alloc, disks=[],
                                                       early_release=b.opts.early_release))])
    _each(b, "Changing the secondary node", "replace2", ops, check=False)


def _targets(b: Burner) -> dict[str, str | None]:
    """The target of each instance's failover/migration: the selected node after its primary.

    None (the master decides: the secondary, or the iallocator) for
    internally mirrored templates and with ``-I``; so ``-n`` is honoured
    for the externally mirrored ones.
    """
    if b.opts.iallocator or _template(b) in constants.DTS_INT_MIRROR:
        return {name: None for name in b.instances}
    nodes = _nodes(b)
    where = b.primaries()
    targets: dict[str, str | None] = {}
    for name in b.instances:
        pnode = where.get(name)
        idx = nodes.index(pnode) if pnode in nodes else -1
        targets[name] = nodes[(idx + 1) % len(nodes)]
    return targets


def _failover(b: Burner) -> None:
    # the targets are queried once, after the step's title (as each job is built)
    targets = functools.cache(functools.partial(_targets, b))

    def ops(name: str) -> Ops:
        target = targets()[name]
        return _logged(b, (f"to {target}",) if target else (), [
            wire.drop_none(wire.instance_failover(instance_name=name, ignore_consistency=False,
                                                  target_node=target))])
    _each(b, "Failing over instances", "failover", ops)


def _move(b: Burner) -> None:
    tnodes = _by_instance(b, 1)
    _each(b, "Moving instances", "move",
          lambda name: _logged(b, (f"to {tnodes[name]}",), [
              wire.drop_none(wire.instance_move(instance_name=name, target_node=tnodes[name]))]))


def _migrate(b: Burner) -> None:
    targets = functools.cache(functools.partial(_targets, b))

    def ops(name: str) -> Ops:
        target = targets()[name]
        text = "migration and migration cleanup" + (f" (to {target})" if target else "")
        return _logged(b, (text,), [
            wire.drop_none(wire.instance_migrate(instance_name=name, cleanup=False, target_node=target)),
            wire.instance_migrate(instance_name=name, cleanup=True)])
    _each(b, "Migrating instances", "migrate", ops, check=False)


def _migrate_rule(b: Burner) -> str | None:
    assert b.state is not None
    if not b.state.hv_can_migrate:
        return f"hypervisor {b.state.hypervisor} does not support it"
    return None


def _import_export(b: Burner) -> None:
    pnodes, snodes, enodes = _by_instance(b, 0), _by_instance(b, 1), _by_instance(b, 2)

    def ops(name: str) -> Ops:
        enode = enodes[name]
        p, s, text = _placement(b, pnodes[name], snodes[name])
        lines = (f"export to node {enode}", "remove instance",
                 f"import from {enode} {text.replace('on ', 'to ', 1)}", "remove export")
        # src_path relative to the export directory: the instance's name
        return _logged(b, lines, [
            wire.drop_none(wire.backup_export(instance_name=name, target_node=enode,
                                              mode=EXPORT_MODE_LOCAL, shutdown=True)),
            wire.instance_remove(instance_name=name, ignore_failures=True),
            _create_op(b, name, p, s, mode=constants.INSTANCE_IMPORT, src_node=enode,
                       src_path=name),
            wire.backup_remove(instance_name=name)])
    _each(b, "Exporting and re-importing instances", "export-import", ops)


def _reinstall(b: Burner) -> None:
    _each(b, "Reinstalling instances", "reinstall",
          lambda name: _logged(b, ("reinstall without passing the OS",
                                   "reinstall specifying the OS"), [
              _stop(name),
              wire.instance_reinstall(instance_name=name),
              wire.drop_none(wire.instance_reinstall(instance_name=name, os_type=b.opts.os)),
              _start(name)]))


def _reboot(b: Burner) -> None:
    def ops(name: str) -> Ops:
        out = []
        for rtype in b.opts.reboot_types:
            b.log(f"reboot with type '{rtype}'", 2)
            out.append(wire.instance_reboot(instance_name=name, reboot_type=rtype,
                                            ignore_secondaries=False))
        return out
    _each(b, "Rebooting instances", "reboot", ops)


def _rename_rule(b: Burner) -> str | None:
    return None if b.opts.rename else "no --rename NAME given"


def _rename_away_and_back(b: Burner) -> None:
    b.log("Renaming instances")
    other = b.opts.rename
    assert other is not None
    # one spare name for all instances: one instance at a time, never in parallel
    for name in b.instances:
        b.log(f"instance {name}", 1)
        b.log(f"rename to {other} and back", 2)
        b.runner.run("rename", [Job(name, [_stop(name), _rename(b, name, other),
                                           _start(other)])], parallel=False)
        b.check_alive(other)
        b.runner.run("rename", [Job(name, [_stop(other), _rename(b, other, name),
                                           _start(name)])], parallel=False)
        b.check_alive(name)


def _rename_same(b: Burner) -> None:
    _each(b, "Renaming the instances to their own name", "rename-same",
          lambda name: _logged(b, ("rename to the same name",),
                               [_stop(name), _rename(b, name, name), _start(name)]))


def _activate_disks(b: Burner) -> None:
    def ops(name: str) -> Ops:
        act = wire.instance_activate_disks(instance_name=name)
        return _logged(b, ("activate disks when online", "activate disks when offline",
                           "deactivate disks (when offline)"), [
            act, _stop(name), dict(act),
            wire.instance_deactivate_disks(instance_name=name), _start(name)])
    _each(b, "Activating/deactivating disks", "activate-disks", ops)


def _add_remove_disks(b: Burner) -> None:
    _each(b, "Adding and removing disks", "add-remove-disks",
          lambda name: _logged(b, ("adding a disk", "removing last disk"), [
              wire.instance_set_params(instance_name=name,
                                       disks=[[DDM_ADD, {"size": b.opts.disk_size[0]}]]),
              _stop(name),
              wire.instance_set_params(instance_name=name, disks=[[DDM_REMOVE, {}]]),
              _start(name)]))


def _disks_rule(b: Burner) -> str | None:
    if _template(b) == constants.DT_DISKLESS:
        return "diskless instances have no disks"
    return None if b.opts.do_addremove_disks else "--no-add-disks given"


def _add_remove_nics(b: Burner) -> None:
    _each(b, "Adding and removing NICs", "add-remove-nics",
          lambda name: _logged(b, ("adding a NIC", "changing a NIC", "removing last NIC"), [
              wire.instance_set_params(instance_name=name, nics=[[DDM_ADD, {}]]),
              wire.instance_set_params(instance_name=name,
                                       nics=[[DDM_MODIFY, -1, {"mac": VALUE_GENERATE}]]),
              wire.instance_set_params(instance_name=name, nics=[[DDM_REMOVE, {}]])]),
          check=False)


def _nics_rule(b: Burner) -> str | None:
    assert b.state is not None
    mode = b.state.default_nic_mode
    if mode != constants.NIC_MODE_BRIDGED:
        return f"the cluster's default NIC mode is {mode}, not bridged"
    return None


def _confd_rule(b: Burner) -> str | None:
    if not b.opts.do_confd_tests:
        return "--no-confd given"
    return "this cluster runs no confd daemon"


def _no_op(b: Burner) -> None:
    raise AssertionError("a step that is always skipped ran")


def _stop_start(b: Burner) -> None:
    _each(b, "Stopping and starting instances", "stop-start",
          lambda name: [_stop(name), _start(name)])


def _remove(b: Burner) -> None:
    b.log("Removing instances")
    # a failed export-import may have removed an instance without importing it back
    existing = b.existing_instances()
    jobs = []
    for name in list(b.to_remove):
        if name not in existing:
            b.log(f"instance {name} (gone already)", 1)
            b.to_remove.remove(name)
            continue
        b.log(f"instance {name}", 1)
        jobs.append(Job(name, [wire.instance_remove(instance_name=name, ignore_failures=True)],
                        on_success=functools.partial(b.to_remove.remove, name)))
    b.runner.run("remove", jobs, keep_going=True)


def _remove_rule(b: Burner) -> str | None:
    if b.opts.keep_instances:
        return "--keep-instances given"
    return None if b.to_remove else "no instance was created"


_NOT_INT_MIRRORED = "is not internally mirrored"

STEPS: tuple[Step, ...] = (
    Step("create", "instance creation", _always, _create),
    Step("runtime-memory", "runtime memory change", _memory_rule, _runtime_memory),
    Step("grow-disks", "disk growth",
         lambda b: _templates(GROWABLE, "has no growable disks")(b) or _growth_rule(b), _grow),
    Step("replace1", "disk replacement on the same nodes",
         _switch("do_replace1", "replace1",
                 _templates(constants.DTS_INT_MIRROR, _NOT_INT_MIRRORED)), _replace1),
    Step("replace2", "secondary node change",
         _switch("do_replace2", "replace2",
                 _templates(constants.DTS_INT_MIRROR, _NOT_INT_MIRRORED), _needs_nodes(3)),
         _replace2),
    Step("failover", "failover",
         _switch("do_failover", "failover",
                 _templates(MIRRORED, "is not mirrored, its instances move instead"),
                 _needs_nodes(2)), _failover),
    Step("move", "move",
         _switch("do_move", "move",
                 _templates(MOVABLE, "is mirrored, its instances fail over instead"),
                 _needs_nodes(2)), _move),
    Step("migrate", "migration",
         _switch("do_migrate", "migrate",
                 _templates(MIRRORED, "does not support it"), _migrate_rule, _needs_nodes(2)),
         _migrate),
    Step("export-import", "export and import",
         _switch("do_importexport", "importexport",
                 _templates(IMPEXP, "cannot be exported")), _import_export),
    Step("reinstall", "reinstall", _switch("do_reinstall", "reinstall"), _reinstall),
    Step("reboot", "reboot", _switch("do_reboot", "reboot"), _reboot),
    Step("rename", "rename", _rename_rule, _rename_away_and_back),
    Step("rename-same", "rename to the same name", _switch("do_renamesame", "renamesame"),
         _rename_same),
    Step("activate-disks", "disk activation", _switch("do_activate_disks", "activate-disks"),
         _activate_disks),
    Step("add-remove-disks", "disk addition/removal", _disks_rule, _add_remove_disks),
    Step("add-remove-nics", "NIC addition/removal",
         _switch("do_addremove_nics", "add-nics", _nics_rule), _add_remove_nics),
    Step("confd", "confd queries", _confd_rule, _no_op),
    Step("stop-start", "stop/start", _switch("do_startstop", "startstop"), _stop_start),
    Step("remove", "instance removal", _remove_rule, _remove),
)

STEP_NAMES = tuple(s.name for s in STEPS)
