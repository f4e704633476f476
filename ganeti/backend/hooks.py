"""The hooks runner: run the scripts of one hooks directory on this node.

:func:`hooks_list` lets the master skip the hooks RPC for nodes without
scripts (``cmdlib.hooksrunner.HookDirsCache``).
"""

from __future__ import annotations

import logging
import os
import stat
from typing import Any

from ganeti import constants, errors
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import NORMAL, URGENT, procedure
from ganeti.utils import process
from ganeti.utils.validation import is_valid_script_name

__all__ = ["hooks_runner", "hooks_list"]

logger = logging.getLogger(__name__)

HOOKS_BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MAX_HOOK_OUTPUT = 64 * 1024


def _is_executable_file(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and os.access(path, os.X_OK)


@procedure(NORMAL)
def hooks_runner(ctx: NodeContext, hpath: str, phase: str, env: dict) -> list[list[Any]]:
    """Run hooks/<hpath>-<phase>.d scripts in order; return [[script, HKR_*, output], ...].

    Run ``hooks/<hpath>-<phase>.d/*`` in sorted order; report each script.

    Returns ``[[script, status, output], ...]`` with status
    ``constants.HKR_SUCCESS`` (exit 0), ``HKR_FAIL`` (non-zero exit, signal
    or timeout after ``ctx.hooks_timeout`` seconds) or ``HKR_SKIP`` (name
    not matching ``^[a-zA-Z0-9_-]+$``, not a regular executable file).
    Scripts get a clean environment: ``PATH``, the given ``env`` (values
    turned into strings) and ``GANETI_HOOKS_PATH``/``GANETI_HOOKS_PHASE``/
    ``GANETI_HOOKS_VERSION`` unless already given.  A missing directory
    means no scripts.  Raises :class:`errors.OpExecError` for a bad
    ``hpath`` or ``phase``.
    """
    if not is_valid_script_name(hpath):
        raise errors.OpExecError(f"Invalid hooks path {hpath!r}")
    if phase not in (constants.HOOKS_PHASE_PRE, constants.HOOKS_PHASE_POST):
        raise errors.OpExecError(f"Invalid hooks phase {phase!r}")
    directory = ctx.paths.hooks_dir(hpath, phase)
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise errors.OpExecError(f"Cannot list {directory}: {exc}") from exc
    full_env = {"PATH": HOOKS_BASE_PATH}
    full_env.update({str(k): "" if v is None else str(v) for k, v in env.items()})
    full_env.setdefault("GANETI_HOOKS_PATH", hpath)
    full_env.setdefault("GANETI_HOOKS_PHASE", phase)
    full_env.setdefault("GANETI_HOOKS_VERSION", str(constants.HOOKS_VERSION))
    results: list[list[Any]] = []
    for name in names:
        path = os.path.join(directory, name)
        if not is_valid_script_name(name) or not _is_executable_file(path):
            results.append([name, constants.HKR_SKIP, ""])
            continue
        try:
            res = process.run_command([path], env=full_env, reset_env=True,
                                      cwd=ctx.paths.root, timeout=ctx.hooks_timeout)
        except errors.CommandError as exc:
            results.append([name, constants.HKR_FAIL, str(exc)])
            continue
        output = res.output
        if len(output) > MAX_HOOK_OUTPUT:
            output = output[:MAX_HOOK_OUTPUT] + "\n[output truncated]"
        if res.failed:
            output = (output.rstrip("\n") + "\n" + res.fail_reason).lstrip("\n")
            status = constants.HKR_FAIL
            logger.info("Hook %s/%s failed: %s", directory, name, res.fail_reason)
        else:
            status = constants.HKR_SUCCESS
        results.append([name, status, output])
    return results


@procedure(URGENT)
def hooks_list(ctx: NodeContext) -> list[str]:
    """Names of the non-empty <hpath>-<phase>.d directories under the node's hooks directory
    (sorted).

    Sorted names of the non-empty ``*.d`` directories under the hooks directory.

    A directory counts when it has any entry at all (even one the runner
    would skip), so the master skips a node only when running its hooks
    would report nothing.  A missing hooks directory gives ``[]``.
    """
    base = ctx.paths.hooks_base_dir
    try:
        names = os.listdir(base)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise errors.OpExecError(f"Cannot list {base}: {exc}") from exc
    found = []
    for name in names:
        if not name.endswith(".d"):
            continue
        try:
            with os.scandir(os.path.join(base, name)) as it:
                if any(True for _ in it):
                    found.append(name)
        except NotADirectoryError:
            continue
        except OSError:
            found.append(name)     # unreadable: let the hooks runner report it
    return sorted(found)
