"""The ipolicy options of gnt-cluster/gnt-group: parsing into change sets, and display."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ganeti import errors, ipolicy
from ganeti.cli import ipolicy_opts

_MIN = "memory-size=128,cpu-count=1,disk-count=1,disk-size=1024,nic-count=1,spindle-use=1"
_MAX = "memory-size=4G,cpu-count=4,disk-count=4,disk-size=100G,nic-count=2,spindle-use=4"


def _opts(**kw: Any) -> SimpleNamespace:
    values = {o.dest: None for o in ipolicy_opts.CLUSTER_IPOLICY_OPTS}
    values.update(kw)
    return SimpleNamespace(**values)


def test_no_option_no_change() -> None:
    assert ipolicy_opts.ipolicy_changes(_opts(), group=False) is None


def test_all_new_style_options() -> None:
    got = ipolicy_opts.ipolicy_changes(_opts(
        ipolicy_bounds_specs=f"min:{_MIN}/max:{_MAX}//min:{_MIN}/max:{_MIN}",
        ipolicy_std_specs="memory-size=512", ipolicy_disk_templates="plain,file",
        ipolicy_vcpu_ratio="2", ipolicy_spindle_ratio="16"), group=False)
    assert got is not None
    assert len(got["minmax"]) == 2 and got["minmax"][0]["max"]["memory-size"] == "4G"
    assert got["std"] == {"memory-size": "512"}
    assert got["disk-templates"] == ["plain", "file"]
    assert (got["vcpu-ratio"], got["spindle-ratio"]) == ("2", "16")
    # the master side accepts exactly this
    new = ipolicy.check_ipolicy(ipolicy.update_ipolicy(ipolicy.default_ipolicy(), got))
    assert new["minmax"][0]["max"]["disk-size"] == 102400


@pytest.mark.parametrize("text,needle", [
    (f"min:{_MIN}", "need both min: and max:"),
    (f"min:{_MIN}/std:{_MIN}", "expected min:SPEC=V"),
    (f"min:{_MIN}/min:{_MIN}", "'min' given twice"),
    ("min:memory-size/max:cpu-count=1", "expected SPEC=VALUE"),
])
def test_bad_bounds_specs(text: str, needle: str) -> None:
    with pytest.raises(errors.ParameterError, match=needle):
        ipolicy_opts.parse_bounds_specs(text)


def test_group_default_resets() -> None:
    got = ipolicy_opts.ipolicy_changes(_opts(ipolicy_bounds_specs="default",
                                             ipolicy_disk_templates="default",
                                             ipolicy_vcpu_ratio="default"), group=True)
    assert got == {"minmax": "default", "disk-templates": "default", "vcpu-ratio": "default"}


def test_legacy_specs_change_the_current_pair() -> None:
    current = ipolicy.default_ipolicy()
    got = ipolicy_opts.ipolicy_changes(
        _opts(specs_mem_size="min=256,max=8G,std=512", specs_nic_count="max=2"),
        group=False, current=lambda: current)
    assert got is not None
    assert got["minmax"] == [{"min": {**current["minmax"][0]["min"], "memory-size": "256"},
                              "max": {**current["minmax"][0]["max"], "memory-size": "8G",
                                      "nic-count": "2"}}]
    assert got["std"] == {**current["std"], "memory-size": "512"}


@pytest.mark.parametrize("kw,group,needle", [
    ({"specs_mem_size": "min=1", "ipolicy_bounds_specs": f"min:{_MIN}/max:{_MAX}"}, False,
     "cannot be combined"),
    ({"specs_mem_size": "std=256"}, True, "Invalid bound 'std'"),
    ({"specs_mem_size": "avg=256"}, False, "Invalid bound 'avg'"),
])
def test_legacy_specs_refused(kw: dict[str, str], group: bool, needle: str) -> None:
    with pytest.raises(errors.ParameterError, match=needle):
        ipolicy_opts.ipolicy_changes(_opts(**kw), group=group,
                                     current=ipolicy_opts.default_source(["plain"]))


def test_legacy_specs_need_one_pair() -> None:
    two = ipolicy.default_ipolicy()
    two["minmax"].append(two["minmax"][0])
    with pytest.raises(errors.ParameterError, match="exactly one min/max pair"):
        ipolicy_opts.ipolicy_changes(_opts(specs_cpu_count="max=2"), group=False,
                                     current=lambda: two)


def test_ipolicy_info_cluster_and_group() -> None:
    import yaml

    from ganeti.cli import info
    pol = ipolicy.default_ipolicy(["file", "plain"])
    cluster = yaml.safe_load(info.format_info(ipolicy_opts.ipolicy_info(pol)))
    assert cluster["bounds specs"][0]["max/0"]["memory-size"] == 32768
    assert cluster["allowed disk templates"] == "file, plain"
    assert cluster["vcpu-ratio"] == 4.0 and "std" in cluster
    group = yaml.safe_load(info.format_info(ipolicy_opts.ipolicy_info(pol, {"vcpu-ratio": 4.0})))
    assert group["vcpu-ratio"] == 4.0
    assert group["spindle-ratio"] == "default (32.0)"
    assert group["bounds specs"][0]["min/0"]["memory-size"].startswith("default (")
    assert group["allowed disk templates"] == "default (file, plain)" and "std" not in group
