"""``config.ini`` of an export: Ganeti's export format, written and read (doc/exports.md).

An export is a directory ``<export dir>/<instance>/`` holding one image
file per disk and ``config.ini``, an INI file with these sections (the
names and keys upstream Ganeti writes, so that exports move both ways):

``[export]``
    ``version`` (:data:`constants.EXPORT_VERSION`), ``timestamp`` (Unix
    seconds), ``source`` (the primary node), ``os``, ``compression``.
``[instance]``
    ``name``, ``maxmem``, ``minmem``, ``memory`` (= maxmem, for old
    readers), ``vcpus``, ``disk_template``, ``hypervisor``, ``tags``
    (space separated); per NIC ``nic<N>_mac``, ``_ip``, ``_network``,
    ``_name``, ``_mode``, ``_link``, ``_vlan`` and ``nic_count``; per disk
    ``disk<N>_ivname``, ``_dump`` (image file name in the export
    directory), ``_size`` (MiB), ``_name`` and ``disk_count``; and our
    extra key ``disk<N>_sha256`` (the SHA-256 of the image, which the
    import checks; upstream ignores keys it does not know, and exports
    without it import with a warning); and ``firmware_state``, a kvm
    instance's UEFI NVRAM and TPM state (base64 of a tar.gz, doc/kvm.md
    "UEFI and TPM"), put on the new primary node by an import.
``[hypervisor]``, ``[backend]``, ``[os]``, ``[os_private]``
    the instance's hypervisor, backend and OS parameters, one key each.

Absent values are written ``None``, as upstream does; :func:`parse`
reads ``None`` and ``""`` as absent.  An image name (``disk<N>_dump``)
is a plain file name of the export's own directory (:func:`check_dump_name`).
Errors about the text name its line and key and never echo more than a
short printable excerpt of it (:func:`excerpt`).  Pure text in, text out:
no files.
"""

from __future__ import annotations

import configparser
import io
import re
from dataclasses import dataclass, field
from typing import Any

from ganeti import constants, errors

__all__ = ["ExportDisk", "ExportNic", "ExportInfo", "build", "parse", "NIC_PARAMS",
           "check_dump_name", "excerpt", "SHA256_KEY", "FIRMWARE_KEY", "MAX_FIRMWARE_STATE"]

#: The NIC parameters written per NIC (``nic<N>_<param>``).
NIC_PARAMS = ("mode", "link", "vlan")
_NONE = "None"
#: the per-disk key (``disk<N>_sha256``) holding the image's SHA-256
SHA256_KEY = "sha256"
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
#: the key (in ``[instance]``) of the UEFI NVRAM and TPM state
FIRMWARE_KEY = "firmware_state"
#: its longest accepted value (characters of base64): a full 4 MiB-build NVRAM
#: that does not compress, and a TPM state, with room
MAX_FIRMWARE_STATE = 4 * 1024 * 1024
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
#: the longest excerpt of a bad value an error quotes
_EXCERPT = 40


@dataclass
class ExportDisk:
    """One disk of an export: its image file (``dump``) and its shape."""

    size: int
    dump: str | None = None
    ivname: str = ""
    name: str | None = None
    #: SHA-256 (hex) of the image; None for exports written without it
    sha256: str | None = None


@dataclass
class ExportNic:
    """One NIC of an export; ``nicparams`` holds mode/link/vlan when given."""

    mac: str | None = None
    ip: str | None = None
    name: str | None = None
    network: str | None = None
    nicparams: dict[str, str] = field(default_factory=dict)


@dataclass
class ExportInfo:
    """What ``config.ini`` says."""

    name: str
    os: str = ""
    version: int = constants.EXPORT_VERSION
    timestamp: int = 0
    source: str = ""
    compression: str = "none"
    disk_template: str | None = None
    hypervisor: str | None = None
    tags: list[str] = field(default_factory=list)
    disks: list[ExportDisk] = field(default_factory=list)
    nics: list[ExportNic] = field(default_factory=list)
    hvparams: dict[str, str] = field(default_factory=dict)
    beparams: dict[str, str] = field(default_factory=dict)
    osparams: dict[str, str] = field(default_factory=dict)
    osparams_private: dict[str, str] = field(default_factory=dict)
    #: a kvm instance's UEFI NVRAM and TPM state (base64 tar.gz; ours, doc/kvm.md)
    firmware_state: str | None = None


def _text(value: Any) -> str:
    if value is None:
        return _NONE
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _value(value: str | None) -> str | None:
    if value is None or value in ("", _NONE):
        return None
    return value


def _parser() -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(interpolation=None, strict=False)
    parser.optionxform = str.lower  # type: ignore[assignment,method-assign]
    return parser


def build(info: ExportInfo) -> str:
    """The ``config.ini`` text for ``info`` (sections and keys as upstream writes them)."""
    cfg = _parser()
    exp, ins = constants.INISECT_EXP, constants.INISECT_INS
    cfg.add_section(exp)
    cfg.set(exp, "version", str(info.version))
    cfg.set(exp, "timestamp", str(int(info.timestamp)))
    cfg.set(exp, "source", info.source)
    cfg.set(exp, "os", info.os)
    cfg.set(exp, "compression", info.compression)
    cfg.add_section(ins)
    cfg.set(ins, "name", info.name)
    for key in ("maxmem", "minmem", "vcpus"):
        if key in info.beparams:
            cfg.set(ins, key, _text(info.beparams[key]))
    if "maxmem" in info.beparams:
        cfg.set(ins, "memory", _text(info.beparams["maxmem"]))
    cfg.set(ins, "disk_template", _text(info.disk_template))
    cfg.set(ins, "hypervisor", _text(info.hypervisor))
    cfg.set(ins, "tags", " ".join(info.tags))
    for idx, nic in enumerate(info.nics):
        cfg.set(ins, f"nic{idx}_mac", _text(nic.mac))
        cfg.set(ins, f"nic{idx}_ip", _text(nic.ip))
        cfg.set(ins, f"nic{idx}_network", _text(nic.network))
        cfg.set(ins, f"nic{idx}_name", _text(nic.name))
        for param in NIC_PARAMS:
            cfg.set(ins, f"nic{idx}_{param}", _text(nic.nicparams.get(param)))
    cfg.set(ins, "nic_count", str(len(info.nics)))
    for idx, disk in enumerate(info.disks):
        cfg.set(ins, f"disk{idx}_ivname", disk.ivname or f"disk/{idx}")
        cfg.set(ins, f"disk{idx}_dump", _text(disk.dump))
        cfg.set(ins, f"disk{idx}_size", str(int(disk.size)))
        cfg.set(ins, f"disk{idx}_name", _text(disk.name))
        if disk.sha256 is not None:
            cfg.set(ins, f"disk{idx}_{SHA256_KEY}", disk.sha256)
    cfg.set(ins, "disk_count", str(len(info.disks)))
    if info.firmware_state:
        cfg.set(ins, FIRMWARE_KEY, info.firmware_state)
    for section, values in ((constants.INISECT_HYP, info.hvparams),
                            (constants.INISECT_BEP, info.beparams),
                            (constants.INISECT_OSP, info.osparams),
                            (constants.INISECT_OSP_PRIVATE, info.osparams_private)):
        cfg.add_section(section)
        for key in sorted(values):
            cfg.set(section, key, _text(values[key]))
    out = io.StringIO()
    cfg.write(out)
    return out.getvalue()


def excerpt(value: str, limit: int = _EXCERPT) -> str:
    """A short printable excerpt of ``value`` for an error text (``""`` when none is).

    Only printable ASCII is kept (other characters become ``?``), and at
    most ``limit`` characters (default 40), so that no raw bytes of a
    file reach a job log.
    """
    cleaned = "".join(c if " " <= c <= "~" else "?" for c in value.strip())
    if not cleaned.strip("?"):
        return ""
    return cleaned if len(cleaned) <= limit else cleaned[:limit] + "..."


def _quoted(value: str) -> str:
    short = excerpt(value)
    return f" '{short}'" if short else ""


def _line_of(text: str, section: str, key: str) -> int | None:
    """The line number (from 1) of ``key`` in ``[section]`` of ``text``, if found."""
    current = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            current = stripped[1:-1].strip()
        elif current == section and re.split(r"[=:]", stripped, maxsplit=1)[0].strip().lower() \
                == key:
            return number
    return None


def _where(text: str, section: str, key: str) -> str:
    line = _line_of(text, section, key)
    return f"line {line}, " if line else ""


def check_dump_name(name: str) -> str:
    """An image name of an export: a plain file name in the export's own directory.

    Refuses (:class:`errors.ConfigurationError`) an empty name, ``/``,
    a name starting with ``.`` (``..`` included), and control characters,
    so that a ``config.ini`` can never point at another export's image or
    any file outside its directory.
    """
    if (not name or "/" in name or name.startswith(".") or len(name) > 255
            or any(not c.isprintable() for c in name)):
        raise errors.ConfigurationError("is not a file name of the export's own directory")
    return name


def _int(cfg: configparser.RawConfigParser, text: str, section: str, key: str,
         what: str) -> int:
    raw = cfg.get(section, key)
    try:
        return int(raw.strip())
    except ValueError:
        raise errors.ConfigurationError(
            f"Export: config.ini {_where(text, section, key)}key {key} in [{section}]:"
            f" invalid {what}{_quoted(raw)}") from None


def _parse_error(exc: configparser.Error) -> str:
    """What is wrong with a text configparser refused (no raw bytes of it)."""
    if isinstance(exc, configparser.MissingSectionHeaderError):
        return f"line {exc.lineno} comes before any [section]"
    if isinstance(exc, configparser.ParsingError):
        lines = ", ".join(str(number) for number, _ in exc.errors[:5])
        return f"line {lines} is not a 'key = value' line" if len(exc.errors) == 1 \
            else f"lines {lines} are not 'key = value' lines"
    lineno = getattr(exc, "lineno", None)
    return f"line {lineno} is not valid" if lineno else "it is not an INI file"


def _disk(cfg: configparser.RawConfigParser, text: str, idx: int) -> ExportDisk:
    """Disk ``idx`` of ``[instance]``: its size, image name and checksum checked."""
    ins = constants.INISECT_INS
    disk = ExportDisk(size=_int(cfg, text, ins, f"disk{idx}_size", f"size of disk {idx}"),
                      dump=_value(cfg.get(ins, f"disk{idx}_dump", fallback=None)),
                      ivname=cfg.get(ins, f"disk{idx}_ivname", fallback=f"disk/{idx}"),
                      name=_value(cfg.get(ins, f"disk{idx}_name", fallback=None)))
    if disk.size < 0:
        key = f"disk{idx}_size"
        raise errors.ConfigurationError(f"Export: config.ini {_where(text, ins, key)}key {key}"
                                        f" in [{ins}]: negative size of disk {idx}")
    if disk.dump is not None:
        key = f"disk{idx}_dump"
        try:
            check_dump_name(disk.dump)
        except errors.ConfigurationError as exc:
            raise errors.ConfigurationError(
                f"Export: config.ini {_where(text, ins, key)}key {key} in [{ins}]: the image"
                f" name{_quoted(disk.dump)} {exc}") from None
    sha = _value(cfg.get(ins, f"disk{idx}_{SHA256_KEY}", fallback=None))
    if sha is not None:
        key = f"disk{idx}_{SHA256_KEY}"
        if not _SHA256_RE.fullmatch(sha.strip().lower()):
            raise errors.ConfigurationError(
                f"Export: config.ini {_where(text, ins, key)}key {key} in [{ins}]: not a"
                f" SHA-256 (64 hex digits){_quoted(sha)}")
        disk.sha256 = sha.strip().lower()
    return disk


def parse(text: str) -> ExportInfo:
    """Read ``config.ini`` text (ours or upstream's).

    Raises :class:`errors.ConfigurationError` when it is not INI, lacks the
    ``[export]`` or ``[instance]`` section or the instance name, has
    another export version, a disk size that is not a number, an image
    name outside the export's directory or a malformed checksum.  The
    message names the line and key, never more of the text than
    :func:`excerpt` gives.
    """
    cfg = _parser()
    try:
        cfg.read_string(text)
    except configparser.Error as exc:
        raise errors.ConfigurationError(f"Export: config.ini is not valid: {_parse_error(exc)}"
                                        ) from None
    exp, ins = constants.INISECT_EXP, constants.INISECT_INS
    for section in (exp, ins):
        if not cfg.has_section(section):
            raise errors.ConfigurationError(f"Export: config.ini has no [{section}] section")
    name = _value(cfg.get(ins, "name", fallback=None))
    if not name:
        raise errors.ConfigurationError("Export: config.ini names no instance")
    version = _int(cfg, text, exp, "version", "version") \
        if cfg.has_option(exp, "version") else 0
    if version != constants.EXPORT_VERSION:
        raise errors.ConfigurationError(f"Export: wrong export version {version}"
                                        f" (wanted {constants.EXPORT_VERSION})")
    info = ExportInfo(name=name, version=version,
                      os=cfg.get(exp, "os", fallback="").strip(),
                      source=cfg.get(exp, "source", fallback="").strip(),
                      compression=cfg.get(exp, "compression", fallback="none").strip() or "none")
    if cfg.has_option(exp, "timestamp"):
        info.timestamp = _int(cfg, text, exp, "timestamp", "timestamp")
    info.disk_template = _value(cfg.get(ins, "disk_template", fallback=None))
    info.hypervisor = _value(cfg.get(ins, "hypervisor", fallback=None))
    info.tags = cfg.get(ins, "tags", fallback="").split()
    state = _value(cfg.get(ins, FIRMWARE_KEY, fallback=None))
    if state is not None:
        state = "".join(state.split())
        if len(state) > MAX_FIRMWARE_STATE or not _BASE64.fullmatch(state):
            raise errors.ConfigurationError(
                f"Export: config.ini {_where(text, ins, FIRMWARE_KEY)}key {FIRMWARE_KEY} in"
                f" [{ins}]: not base64 of at most {MAX_FIRMWARE_STATE} characters")
        info.firmware_state = state
    for idx in range(constants.MAX_DISKS):
        if not cfg.has_option(ins, f"disk{idx}_size"):
            break
        info.disks.append(_disk(cfg, text, idx))
    for idx in range(constants.MAX_NICS):
        if not cfg.has_option(ins, f"nic{idx}_mac"):
            break

        def nic_value(key: str, idx: int = idx) -> str | None:
            return _value(cfg.get(ins, f"nic{idx}_{key}", fallback=None))
        params = {p: v for p in NIC_PARAMS if (v := nic_value(p)) is not None}
        info.nics.append(ExportNic(mac=nic_value("mac"), ip=nic_value("ip"),
                                   name=nic_value("name"), network=nic_value("network"),
                                   nicparams=params))
    for key, found in (("disk_count", len(info.disks)), ("nic_count", len(info.nics))):
        if _value(cfg.get(ins, key, fallback=None)) is not None \
                and _int(cfg, text, ins, key, "count") != found:
            raise errors.ConfigurationError(
                f"Export: config.ini {_where(text, ins, key)}key {key} in [{ins}]: says"
                f" {cfg.get(ins, key).strip()}, but {found} are described")
    sections = {constants.INISECT_HYP: info.hvparams, constants.INISECT_BEP: info.beparams,
                constants.INISECT_OSP: info.osparams,
                constants.INISECT_OSP_PRIVATE: info.osparams_private}
    for section, target in sections.items():
        if cfg.has_section(section):
            target.update(cfg.items(section))
    if not cfg.has_section(constants.INISECT_BEP):
        # old exports keep the backend parameters in [instance]
        for key in ("maxmem", "minmem", "vcpus", "memory"):
            if cfg.has_option(ins, key):
                info.beparams[key] = cfg.get(ins, key)
    if "memory" in info.beparams:
        memory = info.beparams.pop("memory")
        info.beparams.setdefault("maxmem", memory)
        info.beparams.setdefault("minmem", memory)
    return info
