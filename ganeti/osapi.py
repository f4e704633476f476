"""The OS definition API, node side (doc/protocols/os-api.md).

An OS definition is a directory ``<search dir>/<name>`` holding
``ganeti_api_version`` (lines of 10, 15, 20), the scripts ``create``,
``import``, ``export``, ``rename`` (and ``verify`` for API 20),
``variants.list`` (optional, API >= 15; ``#`` lines skipped) and ``parameters.list`` (API 20,
``name description`` lines).  The first directory of
``paths.os_search_path`` that has ``<name>`` wins.

This module finds and checks definitions (:func:`find_os`,
:func:`diagnose_os`), builds the documented script environment from plain
inputs (:func:`build_os_env`) and runs the scripts with a timeout
(:func:`create_os`, :func:`rename_os`, :func:`export_os_disk`,
:func:`import_os_disk`, :func:`verify_os_params`).  Each run writes its
output to ``<paths.os_log_dir>/<kind>-<os>-<instance>-<timestamp>.log``;
a failure raises :class:`errors.OpExecError` carrying the log's last lines.
The values of private and secret OS parameters (``secrets``) are scrubbed
from the log (:mod:`ganeti.redact`), so neither it nor the error carries
them, whatever the script prints.

Inputs are small dataclasses (:class:`OSInstance`, :class:`OSDisk`,
:class:`OSNic`); the backend converts config objects into them.
"""

from __future__ import annotations

import logging
import os
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from ganeti import constants, errors, pathutils, redact
from ganeti.utils import process
from ganeti.hypervisor.base import NicSpec

__all__ = [
    "OSDefinition", "OSDiagnosis", "OSDisk", "OSNic", "OSInstance",
    "split_os_name", "load_os", "find_os", "diagnose_os", "select_variant",
    "build_os_core_env", "build_os_env", "run_os_script", "create_os", "rename_os",
    "export_os_disk", "import_os_disk", "verify_os_params",
    "RunningScript", "start_disk_script", "finish_disk_script",
    "API_VERSION_FILE", "VARIANTS_FILE", "PARAMETERS_FILE",
    "SCRIPT_CREATE", "SCRIPT_IMPORT", "SCRIPT_EXPORT", "SCRIPT_RENAME", "SCRIPT_VERIFY",
]

logger = logging.getLogger(__name__)

API_VERSION_FILE = "ganeti_api_version"
VARIANTS_FILE = "variants.list"
PARAMETERS_FILE = "parameters.list"
SCRIPT_CREATE = "create"
SCRIPT_IMPORT = "import"
SCRIPT_EXPORT = "export"
SCRIPT_RENAME = "rename"
SCRIPT_VERIFY = "verify"
_BASE_SCRIPTS = (SCRIPT_CREATE, SCRIPT_EXPORT, SCRIPT_IMPORT, SCRIPT_RENAME)

DEFAULT_CREATE_TIMEOUT = 3600.0
DEFAULT_RENAME_TIMEOUT = 300.0
DEFAULT_EXPORT_TIMEOUT = 3600.0
DEFAULT_VERIFY_TIMEOUT = 60.0
LOG_TAIL_LINES = 20
SCRIPT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_MAX_TEXT_FILE = 64 * 1024


@dataclass(frozen=True)
class OSDefinition:
    """A valid OS definition found on this node."""

    name: str
    path: str
    api_versions: tuple[int, ...]
    variants: tuple[str, ...] = ()
    parameters: tuple[tuple[str, str], ...] = ()
    scripts: dict[str, str] = field(default_factory=dict)

    @property
    def api_version(self) -> int:
        """The highest API version both the OS and we support."""
        return max(set(self.api_versions) & constants.OS_API_VERSIONS)

    @property
    def parameter_names(self) -> list[str]:
        return [name for name, _ in self.parameters]


@dataclass(frozen=True)
class OSDiagnosis:
    """The result of checking one OS directory (valid or not, and why)."""

    name: str
    path: str
    valid: bool
    status: str = ""
    api_versions: tuple[int, ...] = ()
    variants: tuple[str, ...] = ()
    parameters: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class OSDisk:
    """One instance disk as the OS scripts see it (size in MiB)."""

    path: str
    size: int = 0
    uri: str = ""
    access: str = constants.DISK_RDWR
    uuid: str = ""
    name: str | None = None
    backend_type: str = "block"


#: One instance NIC as the OS scripts see it: the same value as the
#: hypervisor's view of a NIC.
OSNic = NicSpec


@dataclass(frozen=True)
class OSInstance:
    """The instance an OS script works on (``os`` may be ``name+variant``)."""

    name: str
    os: str
    hypervisor: str = constants.HT_FAKE
    uuid: str = ""
    hvparams: dict[str, Any] = field(default_factory=dict)
    beparams: dict[str, Any] = field(default_factory=dict)
    osparams: dict[str, Any] = field(default_factory=dict)
    disks: tuple[OSDisk, ...] = ()
    nics: tuple[OSNic, ...] = ()
    #: the values of its private and secret OS parameters (also in
    #: ``osparams``): scrubbed from the scripts' logs
    secrets: tuple[Any, ...] = ()


# --- finding and checking definitions ---------------------------------------

def split_os_name(name: str) -> tuple[str, str | None]:
    """``"debian+minimal"`` -> ``("debian", "minimal")``; no variant -> None."""
    base, sep, variant = name.partition("+")
    return base, (variant if sep else None)


def _read_lines(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read(_MAX_TEXT_FILE)
    return [line.strip() for line in text.splitlines() if line.strip()]


def _read_os_file(name: str, path: str, what: str) -> list[str]:
    """The lines of a file of OS ``name``; :class:`errors.InvalidOS` if unreadable."""
    try:
        return _read_lines(path)
    except FileNotFoundError:
        raise errors.InvalidOS(f"OS {name}: missing {what} {path}") from None
    except OSError as exc:
        raise errors.InvalidOS(f"OS {name}: cannot read {what}: {exc}") from exc


def load_os(name: str, os_dir: str) -> OSDefinition:
    """Check the definition in ``os_dir``; raise :class:`errors.InvalidOS` if broken."""
    if not os.path.isdir(os_dir):
        raise errors.InvalidOS(f"OS {name}: {os_dir} is not a directory")
    lines = _read_os_file(name, os.path.join(os_dir, API_VERSION_FILE), "API version file")
    try:
        versions = tuple(int(line) for line in lines)
    except ValueError:
        raise errors.InvalidOS(f"OS {name}: API version file contains non-numbers: {lines!r}") from None
    if not set(versions) & constants.OS_API_VERSIONS:
        raise errors.InvalidOS(
            f"OS {name}: API version mismatch (found {list(versions)},"
            f" supported {sorted(constants.OS_API_VERSIONS)})")
    api = max(set(versions) & constants.OS_API_VERSIONS)

    wanted = list(_BASE_SCRIPTS) + ([SCRIPT_VERIFY] if api >= constants.OS_API_V20 else [])
    scripts = {}
    for script in wanted:
        spath = os.path.join(os_dir, script)
        try:
            st = os.stat(spath)
        except OSError:
            raise errors.InvalidOS(f"OS {name}: script '{script}' is missing") from None
        if not stat.S_ISREG(st.st_mode):
            raise errors.InvalidOS(f"OS {name}: script '{script}' is not a regular file")
        if not st.st_mode & stat.S_IXUSR:
            raise errors.InvalidOS(f"OS {name}: script '{script}' is not executable")
        scripts[script] = spath

    variants: tuple[str, ...] = ()
    vfile = os.path.join(os_dir, VARIANTS_FILE)
    if api >= constants.OS_API_V15 and os.path.exists(vfile):
        # comment lines are skipped; an empty list means no variants
        variants = tuple(line for line in _read_os_file(name, vfile, VARIANTS_FILE)
                         if not line.startswith("#"))

    parameters: tuple[tuple[str, str], ...] = ()
    if api >= constants.OS_API_V20:
        plines = _read_os_file(name, os.path.join(os_dir, PARAMETERS_FILE), PARAMETERS_FILE)
        parsed = []
        for line in plines:
            pname, _, doc = line.partition(" ")
            parsed.append((pname.strip(), doc.strip()))
        parameters = tuple(parsed)

    return OSDefinition(name=name, path=os_dir, api_versions=versions, variants=variants,
                        parameters=parameters, scripts=scripts)


def _search(paths: pathutils.Paths) -> list[tuple[str, str]]:
    """``(name, dir)`` of every directory entry in the search path, in order."""
    found = []
    for base_dir in paths.os_search_path:
        try:
            names = sorted(os.listdir(base_dir))
        except OSError:
            continue
        for name in names:
            if os.path.isdir(os.path.join(base_dir, name)):
                found.append((name, os.path.join(base_dir, name)))
    return found


def find_os(paths: pathutils.Paths, name: str) -> OSDefinition:
    """The definition of ``name`` (a variant suffix is ignored).

    Raises :class:`errors.InvalidOS` when it is not found or is broken.
    """
    base, _ = split_os_name(name)
    if not base or "/" in base or base.startswith("."):
        raise errors.InvalidOS(f"Invalid OS name {name!r}")
    for base_dir in paths.os_search_path:
        os_dir = os.path.join(base_dir, base)
        if os.path.isdir(os_dir):
            return load_os(base, os_dir)
    raise errors.InvalidOS(
        f"OS {base} not found in the search path ({', '.join(paths.os_search_path)})")


def diagnose_os(paths: pathutils.Paths) -> list[OSDiagnosis]:
    """Check every OS in the search path, in search order.

    The same name may appear more than once; the first entry is the one in
    effect.  Broken definitions are reported with ``valid=False`` and the
    reason in ``status``.
    """
    result = []
    for name, os_dir in _search(paths):
        try:
            osd = load_os(name, os_dir)
        except errors.InvalidOS as exc:
            result.append(OSDiagnosis(name=name, path=os_dir, valid=False, status=str(exc)))
            continue
        result.append(OSDiagnosis(name=name, path=os_dir, valid=True,
                                  api_versions=osd.api_versions, variants=osd.variants,
                                  parameters=osd.parameters))
    return result


def select_variant(os_def: OSDefinition, variant: str | None) -> str | None:
    """The variant to use: the given one, or the first listed; None if none.

    Raises :class:`errors.InvalidOS` for an unknown variant, or for a
    variant given to an OS without ``variants.list``.
    """
    if not os_def.variants:
        if variant:
            raise errors.InvalidOS(f"OS {os_def.name} does not support variants"
                                   f" (asked for '{variant}')")
        return None
    if variant is None:
        return os_def.variants[0]
    if variant not in os_def.variants:
        raise errors.InvalidOS(f"Unsupported variant '{variant}' of OS {os_def.name}"
                               f" (supported: {', '.join(os_def.variants)})")
    return variant


# --- environment ------------------------------------------------------------

def _env_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def build_os_core_env(os_def: OSDefinition, os_name: str, osparams: dict[str, Any],
                      debug_level: int = 0) -> dict[str, str]:
    """The environment every script gets: API version, OS name/variant, OSP_*.

    Raises :class:`errors.InvalidOS` for a bad variant.
    """
    _, variant = split_os_name(os_name)
    api = os_def.api_version
    env = {"OS_API_VERSION": str(api), "OS_NAME": os_def.name,
           "DEBUG_LEVEL": str(debug_level), "PATH": SCRIPT_PATH}
    if api >= constants.OS_API_V15:
        chosen = select_variant(os_def, variant)
        env["OS_VARIANT"] = chosen or ""
    elif variant:
        raise errors.InvalidOS(f"OS {os_def.name} (API {api}) does not support variants")
    if api >= constants.OS_API_V20:
        for pname, pvalue in osparams.items():
            env[f"OSP_{pname.upper()}"] = _env_value(pvalue)
    return env


def build_os_env(os_def: OSDefinition, inst: OSInstance, *,
                 debug_level: int = 0) -> dict[str, str]:
    """The full documented environment for an instance script."""
    env = build_os_core_env(os_def, inst.os, inst.osparams, debug_level)
    env.update({"INSTANCE_NAME": inst.name, "INSTANCE_OS": inst.os,
                "INSTANCE_UUID": inst.uuid, "HYPERVISOR": inst.hypervisor,
                "DISK_COUNT": str(len(inst.disks)), "NIC_COUNT": str(len(inst.nics))})
    disk_frontend = inst.hvparams.get("disk_type")
    for idx, disk in enumerate(inst.disks):
        pre = f"DISK_{idx}_"
        env[pre + "PATH"] = disk.path
        env[pre + "ACCESS"] = disk.access
        env[pre + "SIZE"] = str(disk.size)
        env[pre + "UUID"] = disk.uuid
        env[pre + "BACKEND_TYPE"] = disk.backend_type
        if disk.uri:
            env[pre + "URI"] = disk.uri
        if disk.name:
            env[pre + "NAME"] = disk.name
        if disk_frontend:
            env[pre + "FRONTEND_TYPE"] = str(disk_frontend)
    nic_frontend = inst.hvparams.get("nic_type")
    for idx, nic in enumerate(inst.nics):
        pre = f"NIC_{idx}_"
        env[pre + "MAC"] = nic.mac
        env[pre + "MODE"] = nic.mode
        env[pre + "LINK"] = nic.link
        env[pre + "UUID"] = nic.uuid
        if nic.ip:
            env[pre + "IP"] = nic.ip
        if nic.name:
            env[pre + "NAME"] = nic.name
        if nic.mode == constants.NIC_MODE_BRIDGED:
            env[pre + "BRIDGE"] = nic.link
        for key, value in nic.network_env:
            env[pre + key] = value
        if nic_frontend:
            env[pre + "FRONTEND_TYPE"] = str(nic_frontend)
    # the parameter's own (lower-case) name, as OS scripts test for it
    # (e.g. INSTANCE_HV_serial_console)
    for key, value in inst.hvparams.items():
        env[f"INSTANCE_HV_{key}"] = _env_value(value)
    for key, value in inst.beparams.items():
        env[f"INSTANCE_BE_{key}"] = _env_value(value)
    return env


# --- running scripts --------------------------------------------------------

def _open_log(paths: pathutils.Paths, kind: str, os_name: str, instance: str,
              clock: Callable[[], float]) -> tuple[str, int]:
    os.makedirs(paths.os_log_dir, mode=0o750, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d_%H_%M_%S", time.localtime(clock()))
    base = f"{kind}-{os_name}-{instance}-{stamp}"
    # one forked node daemon child per request: after the plain name, the
    # process id makes a clash (same operation in the same second) unlikely,
    # so this never probes through many names
    pid = os.getpid()
    for attempt in range(1000):
        suffix = "" if attempt == 0 else f"-{pid}" if attempt == 1 else f"-{pid}-{attempt}"
        path = os.path.join(paths.os_log_dir, f"{base}{suffix}.log")
        try:
            return path, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
        except FileExistsError:
            continue
    raise errors.OpExecError(f"Cannot create a unique OS log file for {base}")


def _secret_texts(secrets: Sequence[Any]) -> set[str]:
    return {text for value in secrets for text in redact.secret_texts(value)}


def _scrub_log(path: str, texts: set[str]) -> None:
    """Rewrite the log at ``path`` with every one of ``texts`` replaced by the marker."""
    if not texts:
        return
    tmp = f"{path}.scrub"
    try:
        with open(path, encoding="utf-8", errors="replace") as src, \
                open(tmp, "w", encoding="utf-8") as dst:
            os.fchmod(dst.fileno(), 0o640)
            for line in src:
                dst.write(redact.scrub_text(line, texts))
        os.replace(tmp, path)
    except OSError as exc:
        logger.warning("Cannot scrub the OS log %s: %s", path, exc)
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _log_tail(path: str, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 64 * 1024))
            data = fh.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"(cannot read log: {exc})"
    return "\n".join(data.splitlines()[-lines:])


def _run_streaming(argv: list[str], env: dict[str, str], cwd: str, log_fd: int,
                   stdin_path: str | None, stdout_path: str | None,
                   timeout: float | None) -> tuple[int | None, int | None, bool]:
    """Run with stdin/stdout bound to files (binary data), stderr to the log.

    :func:`ganeti.utils.process.run_command` captures text, which would
    corrupt disk images; this is its binary-safe sibling.
    """
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    try:
        stdout = open(stdout_path, "wb") if stdout_path else log_fd
        try:
            try:
                proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=stdin, stdout=stdout,
                                        stderr=log_fd, start_new_session=True)
            except OSError as exc:
                raise errors.CommandError(f"Cannot run {argv[0]}: {exc}") from exc
            timed_out = False
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                proc.wait()
        finally:
            if stdout_path:
                stdout.close()  # type: ignore[union-attr]
    finally:
        if stdin_path:
            stdin.close()  # type: ignore[union-attr]
    code = proc.returncode
    if code is not None and code < 0:
        return None, -code, timed_out
    return code, None, timed_out


def run_os_script(paths: pathutils.Paths, os_def: OSDefinition, script: str,
                  env: dict[str, str], *, kind: str, instance_name: str,
                  timeout: float | None, args: Sequence[str] = (),
                  stdin_path: str | None = None, stdout_path: str | None = None,
                  clock: Callable[[], float] = time.time, quiet_success: bool = False,
                  secrets: Sequence[Any] = ()) -> str:
    """Run ``script`` of ``os_def`` with ``env``; return the log file path.

    Output goes to a new log file under ``paths.os_log_dir``, with the
    values of ``secrets`` scrubbed.  With
    ``stdin_path``/``stdout_path`` the script's stdin/stdout are bound to
    those files (binary safe, for import/export).  With ``quiet_success``
    (``verify``, run on every instance add) a run that succeeds without
    output leaves no log file and ``""`` is returned.  Raises
    :class:`errors.InvalidOS` if the script is not part of the definition
    and :class:`errors.OpExecError` (with the log tail) if it fails or
    times out.
    """
    spath = os_def.scripts.get(script)
    if spath is None:
        raise errors.InvalidOS(f"OS {os_def.name} has no '{script}' script")
    texts = _secret_texts(secrets)
    argv = [spath, *args]
    streaming = bool(stdin_path or stdout_path)
    res: process.RunResult | None = None
    run_error: errors.CommandError | None = None
    if not streaming:
        # output is captured in memory: run first, then write the log
        try:
            res = process.run_command(argv, env=env, cwd=os_def.path, timeout=timeout,
                                      reset_env=True)
        except errors.CommandError as exc:
            run_error = exc
        if quiet_success and res is not None and not res.exit_code \
                and res.signal is None and not res.timed_out and not res.output:
            return ""
    log_path, log_fd = _open_log(paths, kind, os_def.name, instance_name, clock)
    try:
        header = (f"# {kind} of instance {instance_name} with OS {os_def.name}: {' '.join(argv)}\n"
                  + "".join(f"# {k}={'<hidden>' if k.startswith('OSP_') else v}\n"
                            for k, v in sorted(env.items())))
        os.write(log_fd, header.encode("utf-8"))
        try:
            if streaming:
                code, sig, timed_out = _run_streaming(argv, env, os_def.path, log_fd,
                                                      stdin_path, stdout_path, timeout)
            elif run_error is not None:
                raise run_error
            else:
                assert res is not None
                os.write(log_fd, redact.scrub_text(res.output, texts).encode("utf-8"))
                code, sig, timed_out = res.exit_code, res.signal, res.timed_out
        except errors.CommandError as exc:
            text = redact.scrub_text(str(exc), texts)
            os.write(log_fd, f"{text}\n".encode("utf-8"))
            raise errors.OpExecError(f"OS {kind} script for instance {instance_name}"
                                     f" could not be run: {text} (log: {log_path})") from None
    finally:
        os.close(log_fd)
    if streaming:
        _scrub_log(log_path, texts)
    if timed_out:
        reason = f"timed out after {timeout} seconds"
    elif sig is not None:
        reason = f"killed by signal {sig}"
    elif code:
        reason = f"exit code {code}"
    else:
        logger.info("OS %s script of %s for %s succeeded (log %s)",
                    script, os_def.name, instance_name, log_path)
        return log_path
    raise errors.OpExecError(
        f"OS {kind} script of {os_def.name} for instance {instance_name} failed ({reason});"
        f" last lines of {log_path}:\n{_log_tail(log_path)}")


def create_os(paths: pathutils.Paths, inst: OSInstance, *, reinstall: bool = False,
              debug_level: int = 0, timeout: float | None = DEFAULT_CREATE_TIMEOUT,
              clock: Callable[[], float] = time.time) -> str:
    """Run the OS ``create`` script for ``inst`` (log kind ``add``); return the log path."""
    os_def = find_os(paths, inst.os)
    env = build_os_env(os_def, inst, debug_level=debug_level)
    if reinstall:
        env["INSTANCE_REINSTALL"] = "1"
    return run_os_script(paths, os_def, SCRIPT_CREATE, env, kind="add",
                         instance_name=inst.name, timeout=timeout, clock=clock,
                         secrets=inst.secrets)


def rename_os(paths: pathutils.Paths, inst: OSInstance, old_name: str, *,
              debug_level: int = 0, timeout: float | None = DEFAULT_RENAME_TIMEOUT,
              clock: Callable[[], float] = time.time) -> str:
    """Run ``rename`` (``inst.name`` is the new name); return the log path."""
    os_def = find_os(paths, inst.os)
    env = build_os_env(os_def, inst, debug_level=debug_level)
    env["OLD_INSTANCE_NAME"] = old_name
    return run_os_script(paths, os_def, SCRIPT_RENAME, env, kind="rename",
                         instance_name=inst.name, timeout=timeout, clock=clock,
                         secrets=inst.secrets)


def _check_index(inst: OSInstance, index: int) -> OSDisk:
    if not 0 <= index < len(inst.disks):
        raise errors.OpExecError(f"Instance {inst.name} has no disk {index}")
    return inst.disks[index]


def _run_disk_script(paths: pathutils.Paths, inst: OSInstance, index: int, script: str,
                     kind: str, *, debug_level: int, timeout: float | None,
                     clock: Callable[[], float], stdin_path: str | None = None,
                     stdout_path: str | None = None) -> str:
    # export/import: the disk's variables are named <KIND>_INDEX, <KIND>_DISK_PATH, ...
    disk = _check_index(inst, index)
    os_def = find_os(paths, inst.os)
    env = build_os_env(os_def, inst, debug_level=debug_level)
    prefix = kind.upper()
    env.update({f"{prefix}_INDEX": str(index), f"{prefix}_DISK_PATH": disk.path,
                f"{prefix}_DEVICE": disk.path})
    if disk.uri:
        env[f"{prefix}_DISK_URI"] = disk.uri
    return run_os_script(paths, os_def, script, env, kind=kind,
                         instance_name=inst.name, timeout=timeout,
                         stdin_path=stdin_path, stdout_path=stdout_path, clock=clock,
                         secrets=inst.secrets)


def export_os_disk(paths: pathutils.Paths, inst: OSInstance, index: int, dest_path: str, *,
                   debug_level: int = 0, timeout: float | None = DEFAULT_EXPORT_TIMEOUT,
                   clock: Callable[[], float] = time.time) -> str:
    """Run ``export`` for disk ``index``; its stdout is written to ``dest_path``."""
    return _run_disk_script(paths, inst, index, SCRIPT_EXPORT, "export",
                            debug_level=debug_level, timeout=timeout, clock=clock,
                            stdout_path=dest_path)


def import_os_disk(paths: pathutils.Paths, inst: OSInstance, index: int, src_path: str, *,
                   debug_level: int = 0, timeout: float | None = DEFAULT_EXPORT_TIMEOUT,
                   clock: Callable[[], float] = time.time) -> str:
    """Run ``import`` for disk ``index`` with ``src_path`` on its stdin."""
    return _run_disk_script(paths, inst, index, SCRIPT_IMPORT, "import",
                            debug_level=debug_level, timeout=timeout, clock=clock,
                            stdin_path=src_path)


@dataclass
class RunningScript:
    """An OS ``export``/``import`` script running with a pipe on stdout/stdin.

    ``pipe`` is the script's stdout (export) or stdin (import); the caller
    reads or writes it, closes it, then calls :func:`finish_disk_script`.
    """

    proc: subprocess.Popen[bytes]
    pipe: IO[bytes]
    log_path: str
    kind: str
    os_name: str
    instance_name: str
    secrets: tuple[Any, ...] = ()


def start_disk_script(paths: pathutils.Paths, inst: OSInstance, index: int, kind: str, *,
                      debug_level: int = 0,
                      clock: Callable[[], float] = time.time) -> RunningScript:
    """Start ``export`` (stdout piped) or ``import`` (stdin piped) for disk ``index``.

    The environment is the one :func:`export_os_disk` / :func:`import_os_disk`
    give; stderr goes to a new log.  Raises :class:`errors.InvalidOS` and
    :class:`errors.OpExecError` (the script cannot be run).
    """
    if kind not in (SCRIPT_EXPORT, SCRIPT_IMPORT):
        raise errors.ProgrammerError(f"Not a disk script: {kind!r}")
    disk = _check_index(inst, index)
    os_def = find_os(paths, inst.os)
    env = build_os_env(os_def, inst, debug_level=debug_level)
    prefix = kind.upper()
    env.update({f"{prefix}_INDEX": str(index), f"{prefix}_DISK_PATH": disk.path,
                f"{prefix}_DEVICE": disk.path})
    if disk.uri:
        env[f"{prefix}_DISK_URI"] = disk.uri
    spath = os_def.scripts[kind]
    log_path, log_fd = _open_log(paths, kind, os_def.name, inst.name, clock)
    try:
        header = (f"# {kind} of instance {inst.name} with OS {os_def.name}: {spath}\n"
                  + "".join(f"# {k}={'<hidden>' if k.startswith('OSP_') else v}\n"
                            for k, v in sorted(env.items())))
        os.write(log_fd, header.encode("utf-8"))
        exporting = kind == SCRIPT_EXPORT
        try:
            proc = subprocess.Popen(
                [spath], env=env, cwd=os_def.path,
                stdin=subprocess.DEVNULL if exporting else subprocess.PIPE,
                stdout=subprocess.PIPE if exporting else log_fd, stderr=log_fd,
                start_new_session=True)
        except OSError as exc:
            os.write(log_fd, f"Cannot run {spath}: {exc}\n".encode("utf-8"))
            raise errors.OpExecError(f"OS {kind} script for instance {inst.name} could not be"
                                     f" run: {exc} (log: {log_path})") from exc
    finally:
        os.close(log_fd)
    pipe = proc.stdout if exporting else proc.stdin
    assert pipe is not None
    return RunningScript(proc=proc, pipe=pipe, log_path=log_path, kind=kind,
                         os_name=os_def.name, instance_name=inst.name, secrets=inst.secrets)


def finish_disk_script(run: RunningScript, timeout: float | None = DEFAULT_EXPORT_TIMEOUT,
                       *, kill: bool = False) -> str:
    """Wait for a script of :func:`start_disk_script` (killed first with ``kill``).

    Returns the log path; raises :class:`errors.OpExecError` with the log
    tail when it failed (or was killed).
    """
    try:
        run.pipe.close()
    except OSError:
        pass
    if kill:
        try:
            os.killpg(run.proc.pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        code = run.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(run.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        run.proc.wait()
        code = None
    _scrub_log(run.log_path, _secret_texts(run.secrets))
    if code == 0:
        return run.log_path
    reason = (f"timed out after {timeout} seconds" if code is None
              else f"killed by signal {-code}" if code < 0 else f"exit code {code}")
    raise errors.OpExecError(
        f"OS {run.kind} script of {run.os_name} for instance {run.instance_name} failed"
        f" ({reason}); last lines of {run.log_path}:\n{_log_tail(run.log_path)}")


def verify_os_params(paths: pathutils.Paths, os_name: str, osparams: dict[str, Any], *,
                     timeout: float | None = DEFAULT_VERIFY_TIMEOUT,
                     clock: Callable[[], float] = time.time,
                     secrets: Sequence[Any] = ()) -> None:
    """Check ``osparams`` for ``os_name`` (names, then ``verify parameters``).

    ``secrets``: the values among them that are private or secret
    (scrubbed from the log and the error).

    Raises :class:`errors.InvalidOS` if the OS is missing/broken or has no
    parameters (API < 20) while some are given, and
    :class:`errors.ParameterError` for unknown names or values the OS's
    ``verify`` script refuses (its output tail is in the message).
    """
    os_def = find_os(paths, os_name)
    if os_def.api_version < constants.OS_API_V20:
        if osparams:
            raise errors.InvalidOS(f"OS {os_def.name} (API {os_def.api_version})"
                                   " does not support OS parameters")
        return
    unknown = sorted(set(osparams) - set(os_def.parameter_names))
    if unknown:
        raise errors.ParameterError(
            f"Unknown parameters for OS {os_def.name}: {', '.join(unknown)}", errors.ECODE_INVAL)
    env = build_os_core_env(os_def, os_name, osparams)
    try:
        run_os_script(paths, os_def, SCRIPT_VERIFY, env, kind="verify",
                      instance_name="params", timeout=timeout, args=["parameters"], clock=clock,
                      quiet_success=True, secrets=secrets)
    except errors.OpExecError as exc:
        raise errors.ParameterError(
            f"OS {os_def.name} refused the parameters: {exc}", errors.ECODE_INVAL) from exc
