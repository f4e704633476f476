"""The instance policy options of ``gnt-cluster`` and ``gnt-group`` (doc/ipolicy.md, "Options").

Ganeti's option syntax:

* ``--ipolicy-bounds-specs min:memory-size=128,cpu-count=1,.../max:...``,
  several pairs separated by ``//``; each pair needs every spec in both
  ``min`` and ``max``;
* ``--ipolicy-std-specs memory-size=256,...`` (cluster only);
* ``--ipolicy-disk-templates plain,file``;
* ``--ipolicy-vcpu-ratio 4``, ``--ipolicy-spindle-ratio 32``;
* the older ``--specs-mem-size min=128,max=4096,std=256`` (and
  ``--specs-cpu-count``, ``--specs-disk-count``, ``--specs-disk-size``,
  ``--specs-nic-count``), which change one bound of the current single
  ``minmax`` pair; they cannot be combined with ``--ipolicy-bounds-specs``.

At group level ``default`` as a value resets the key to the cluster's.
Values are passed on as given; the master converts and checks them.
"""

from __future__ import annotations

from ganeti import errors
from ganeti.cli.options import Option

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any, Callable

__all__ = ["IGNORE_IPOLICY_OPT", "BOUNDS_SPECS_OPT", "STD_SPECS_OPT", "DISK_TEMPLATES_OPT",
           "VCPU_RATIO_OPT", "SPINDLE_RATIO_OPT", "SPECS_OPTS", "CLUSTER_IPOLICY_OPTS",
           "GROUP_IPOLICY_OPTS", "parse_bounds_specs", "ipolicy_changes", "default_source",
           "ipolicy_info", "ipolicy_command"]

_DEFAULT = "default"

IGNORE_IPOLICY_OPT = Option("--ignore-ipolicy", dest="ignore_ipolicy", action="store_true",
                            default=False, help="Ignore instance policy violations")
BOUNDS_SPECS_OPT = Option("--ipolicy-bounds-specs", dest="ipolicy_bounds_specs", default=None,
                          metavar="min:SPEC=V,.../max:SPEC=V,...[//...]",
                          help="The min/max instance specs (complete pairs, '//' between"
                               " pairs)")
STD_SPECS_OPT = Option("--ipolicy-std-specs", dest="ipolicy_std_specs", default=None,
                       metavar="SPEC=V,...", help="The standard instance specs")
DISK_TEMPLATES_OPT = Option("--ipolicy-disk-templates", dest="ipolicy_disk_templates",
                            default=None, metavar="TEMPLATE,...",
                            help="Disk templates instances may use")
VCPU_RATIO_OPT = Option("--ipolicy-vcpu-ratio", dest="ipolicy_vcpu_ratio", default=None,
                        metavar="RATIO", help="Virtual CPUs per physical CPU")
SPINDLE_RATIO_OPT = Option("--ipolicy-spindle-ratio", dest="ipolicy_spindle_ratio",
                           default=None, metavar="RATIO",
                           help="Instance spindle use per physical spindle")

#: legacy option dest -> spec name
_SPECS = {"specs_mem_size": "memory-size", "specs_cpu_count": "cpu-count",
          "specs_disk_count": "disk-count", "specs_disk_size": "disk-size",
          "specs_nic_count": "nic-count"}
SPECS_OPTS = [Option("--" + dest.replace("_", "-"), dest=dest, default=None,
                     metavar="min=V,max=V,std=V", help=f"Bounds of {spec} (older syntax)")
              for dest, spec in _SPECS.items()]
CLUSTER_IPOLICY_OPTS = [BOUNDS_SPECS_OPT, STD_SPECS_OPT, DISK_TEMPLATES_OPT, VCPU_RATIO_OPT,
                        SPINDLE_RATIO_OPT, *SPECS_OPTS]
GROUP_IPOLICY_OPTS = [BOUNDS_SPECS_OPT, DISK_TEMPLATES_OPT, VCPU_RATIO_OPT, SPINDLE_RATIO_OPT,
                      *SPECS_OPTS]


def _bad(msg: str) -> errors.ParameterError:
    return errors.ParameterError(msg, errors.ECODE_INVAL)


def _keyval(text: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise _bad(f"Invalid {what} item '{item}' (expected SPEC=VALUE)")
        out[key.strip()] = value.strip()
    return out


def parse_bounds_specs(text: str) -> list[dict[str, dict[str, str]]]:
    """``min:a=1,.../max:a=2,...//min:...`` -> ``[{"min": {...}, "max": {...}}, ...]``."""
    pairs = []
    for chunk in text.split("//"):
        pair: dict[str, dict[str, str]] = {}
        for part in chunk.split("/"):
            part = part.strip()
            if not part:
                continue
            kind, sep, rest = part.partition(":")
            if not sep or kind not in ("min", "max"):
                raise _bad(f"Invalid bounds specs '{part}' (expected min:SPEC=V,... or"
                           " max:SPEC=V,...)")
            if kind in pair:
                raise _bad(f"'{kind}' given twice in bounds specs '{chunk}'")
            pair[kind] = _keyval(rest, "bounds specs")
        if set(pair) != {"min", "max"}:
            raise _bad(f"Bounds specs '{chunk}' need both min: and max:")
        pairs.append(pair)
    return pairs


def _legacy_specs(opts: Any, current: Callable[[], dict[str, Any]] | None,
                  group: bool) -> dict[str, Any]:
    given = {spec: _keyval(getattr(opts, dest), f"--{dest.replace('_', '-')}")
             for dest, spec in _SPECS.items() if getattr(opts, dest, None)}
    if not given:
        return {}
    if getattr(opts, "ipolicy_bounds_specs", None):
        raise _bad("The --specs-* options cannot be combined with --ipolicy-bounds-specs")
    policy = current() if current is not None else {}
    minmax = policy.get("minmax") or []
    if len(minmax) != 1:
        raise _bad("The --specs-* options need a policy with exactly one min/max pair;"
                   " use --ipolicy-bounds-specs")
    pair = {"min": dict(minmax[0]["min"]), "max": dict(minmax[0]["max"])}
    std = dict(policy.get("std") or {})
    for spec, values in given.items():
        for kind, value in values.items():
            if kind in ("min", "max"):
                pair[kind][spec] = value
            elif kind == "std" and not group:
                std[spec] = value
            else:
                raise _bad(f"Invalid bound '{kind}' for {spec} (expected min, max"
                           f"{'' if group else ' or std'})")
    changes: dict[str, Any] = {"minmax": [pair]}
    if any("std" in v for v in given.values()):
        changes["std"] = std
    return changes


def ipolicy_changes(opts: Any, *, group: bool,
                    current: Callable[[], dict[str, Any]] | None = None
                    ) -> dict[str, Any] | None:
    """The ``ipolicy`` change set of the options given, or None when there is none.

    ``current`` returns the effective policy; only the ``--specs-*``
    options need it (they change one bound of the current pair).
    """
    changes: dict[str, Any] = {}
    bounds = getattr(opts, "ipolicy_bounds_specs", None)
    if bounds:
        changes["minmax"] = _DEFAULT if group and bounds == _DEFAULT \
            else parse_bounds_specs(bounds)
    std = getattr(opts, "ipolicy_std_specs", None)
    if std:
        changes["std"] = _keyval(std, "--ipolicy-std-specs")
    dts = getattr(opts, "ipolicy_disk_templates", None)
    if dts is not None:
        changes["disk-templates"] = _DEFAULT if group and dts == _DEFAULT \
            else [t.strip() for t in dts.split(",") if t.strip()]
    for dest, key in (("ipolicy_vcpu_ratio", "vcpu-ratio"),
                      ("ipolicy_spindle_ratio", "spindle-ratio")):
        value = getattr(opts, dest, None)
        if value is not None:
            changes[key] = value
    legacy = _legacy_specs(opts, current, group)
    if "std" in legacy and "std" in changes:
        raise _bad("Give the std specs either with --ipolicy-std-specs or with --specs-*")
    changes.update(legacy)
    return changes or None


def default_source(disk_templates: Any) -> Callable[[], dict[str, Any]]:
    """A ``current`` for :func:`ipolicy_changes` at cluster init: Ganeti's default policy."""
    def source() -> dict[str, Any]:
        from ganeti import ipolicy  # lazy: CLI start-up
        return ipolicy.default_ipolicy(disk_templates)
    return source


def ipolicy_info(policy: dict[str, Any], custom: dict[str, Any] | None = None) -> list[Any]:
    """The ``Instance policy`` entry of ``gnt-cluster info`` / ``gnt-group info``.

    ``(key, value)`` pairs for :func:`ganeti.cli.info.format_info`, with
    Ganeti's keys: ``bounds specs`` (a list of ``{min/N: SPEC, max/N:
    SPEC}``), ``std`` (cluster only), ``allowed disk templates``,
    ``vcpu-ratio``, ``spindle-ratio``.  With ``custom`` (a group's own
    keys), inherited values read ``default (VALUE)`` as in Ganeti.
    """
    from ganeti.cli.info import params_info   # lazy: CLI start-up
    cluster = custom is None
    own = policy if custom is None else custom
    minmax = own.get("minmax") or []
    inherited_minmax = not minmax
    if inherited_minmax:
        minmax = policy.get("minmax") or []
    bounds = []
    for idx, pair in enumerate(minmax):
        bounds.append([(f"{key}/{idx}", params_info({} if inherited_minmax else pair.get(key),
                                                    pair.get(key) or {}))
                       for key in ("min", "max")])
    out: list[Any] = [("bounds specs", bounds)]
    if cluster and "std" in policy:
        out.append(("std", params_info(policy["std"], policy["std"])))
    templates = own.get("disk-templates")
    if templates is not None:
        out.append(("allowed disk templates", ", ".join(templates)))
    else:
        out.append(("allowed disk templates",
                    f"default ({', '.join(policy.get('disk-templates') or [])})"))
    for key in ("vcpu-ratio", "spindle-ratio"):
        if key in own:
            out.append((key, own[key]))
        elif key in policy:
            out.append((key, f"default ({policy[key]})"))
    return out


def _specs_text(specs: dict[str, Any]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(specs.items()))


def ipolicy_command(policy: dict[str, Any], *, group: bool) -> str:
    """The instance policy options that re-create ``policy``'s specs (Ganeti's
    ``show-ispecs-cmd``): `` --ipolicy-std-specs K=V,...`` (cluster only) and
    `` --ipolicy-bounds-specs min:K=V,.../max:K=V,...//...``, keys sorted; only
    complete min/max pairs are shown; "" when there are no specs."""
    out = []
    std = policy.get("std")
    if not group and std:
        out.append(f" {STD_SPECS_OPT.flags[0]} {_specs_text(std)}")
    pairs = [f"min:{_specs_text(pair['min'])}/max:{_specs_text(pair['max'])}"
             for pair in policy.get("minmax") or [] if pair.get("min") and pair.get("max")]
    if pairs:
        out.append(f" {BOUNDS_SPECS_OPT.flags[0]} {'//'.join(pairs)}")
    return "".join(out)
