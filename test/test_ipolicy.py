"""Tests of ganeti/ipolicy.py: defaults, validation, layering and spec checks."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ganeti import constants, errors, ipolicy, objects


def _spec(**overrides: Any) -> dict[str, Any]:
    spec = ipolicy.make_spec(memory_size=512, cpu_count=1, disk_sizes=[2048], nic_count=1,
                             spindle_use=1)
    spec.update(overrides)
    return spec


# --- defaults ---------------------------------------------------------------------------

def test_default_policy_has_ganetis_values() -> None:
    pol = ipolicy.default_ipolicy()
    [pair] = pol["minmax"]
    assert pair["min"] == {"memory-size": 128, "cpu-count": 1, "disk-count": 1,
                           "disk-size": 1024, "nic-count": 1, "spindle-use": 1}
    assert pair["max"] == {"memory-size": 32768, "cpu-count": 8, "disk-count": 16,
                           "disk-size": 1048576, "nic-count": 8, "spindle-use": 12}
    assert pol["std"] == pair["min"]
    assert pol["vcpu-ratio"] == 4.0 and pol["spindle-ratio"] == 32.0
    assert pol["disk-templates"] == sorted(constants.DISK_TEMPLATES)


def test_default_policy_is_valid_and_fresh() -> None:
    pol = ipolicy.default_ipolicy()
    assert ipolicy.check_ipolicy(pol) == pol
    pol["minmax"][0]["min"]["memory-size"] = 1
    assert ipolicy.default_ipolicy()["minmax"][0]["min"]["memory-size"] == 128


def test_default_policy_restricted_to_given_templates() -> None:
    pol = ipolicy.default_ipolicy(["plain", "file", "plain"])
    assert pol["disk-templates"] == ["file", "plain"]


def test_cluster_object_gets_the_default_policy() -> None:
    assert objects.Cluster().ipolicy == ipolicy.default_ipolicy()
    assert objects.NodeGroup().ipolicy == {}


# --- validation -------------------------------------------------------------------------

def _broken(mutate: Any) -> dict[str, Any]:
    pol = ipolicy.default_ipolicy()
    mutate(pol)
    return pol


@pytest.mark.parametrize("mutate,needle", [
    (lambda p: p.pop("vcpu-ratio"), "missing key(s) vcpu-ratio"),
    (lambda p: p.update(foo=1), "unknown key(s) foo"),
    (lambda p: p.update(minmax=[]), "non-empty list"),
    (lambda p: p["minmax"][0].update(std={}), "exactly the keys 'min' and 'max'"),
    (lambda p: p["minmax"][0]["min"].pop("nic-count"), "missing instance specs in minmax[0]/min:"
                                                       " nic-count"),
    (lambda p: p["minmax"][0]["max"].update({"cpu-count": 0}),
     "min cpu-count 1 is greater than max 0"),
    (lambda p: p["minmax"][0]["min"].update({"cpu-countx": 1}), "unknown instance spec"),
    (lambda p: p["minmax"][0]["min"].update({"memory-size": "lots"}),
     "memory-size value 'lots' is not an integer"),
    (lambda p: p["minmax"][0]["min"].update({"disk-count": -1}), "disk-count value -1 is negative"),
    (lambda p: p["std"].update({"memory-size": 65536}), "std specs"),
    (lambda p: p.update({"vcpu-ratio": 0}), "'vcpu-ratio' must be a positive number"),
    (lambda p: p.update({"spindle-ratio": "x"}), "'spindle-ratio' must be a positive number"),
    (lambda p: p.update({"disk-templates": ["plain", "floppy"]}), "unknown disk template(s)"),
    (lambda p: p.update({"disk-templates": "plain"}), "must be a list of disk templates"),
], ids=["missing-key", "unknown-key", "empty-minmax", "pair-keys", "missing-spec", "min-over-max",
        "unknown-spec", "not-int", "negative", "std-outside", "ratio-zero", "ratio-str",
        "unknown-dt", "dt-string"])
def test_check_ipolicy_refuses(mutate: Any, needle: str) -> None:
    with pytest.raises(errors.OpPrereqError) as exc:
        ipolicy.check_ipolicy(_broken(mutate))
    assert needle in str(exc.value)
    assert exc.value.ecode == errors.ECODE_INVAL


def test_check_ipolicy_normalises_strings_and_units() -> None:
    pol = ipolicy.default_ipolicy()
    pol["minmax"][0]["max"]["memory-size"] = "4G"
    pol["minmax"][0]["max"]["cpu-count"] = "4"
    pol["vcpu-ratio"] = "2"
    got = ipolicy.check_ipolicy(pol)
    assert got["minmax"][0]["max"]["memory-size"] == 4096
    assert got["minmax"][0]["max"]["cpu-count"] == 4
    assert got["vcpu-ratio"] == 2.0


def test_check_ipolicy_std_may_fit_any_pair() -> None:
    pol = ipolicy.default_ipolicy()
    second = {"min": dict(pol["minmax"][0]["max"]), "max": dict(pol["minmax"][0]["max"])}
    second["max"]["memory-size"] = 65536
    pol["minmax"].append(second)
    pol["std"] = dict(second["max"])
    assert ipolicy.check_ipolicy(pol)["std"]["memory-size"] == 65536


def test_group_policy_is_checked_without_std() -> None:
    pol = ipolicy.default_ipolicy()
    del pol["std"]
    assert "std" not in ipolicy.check_ipolicy(pol, check_std=False)
    with pytest.raises(errors.OpPrereqError, match="missing key"):
        ipolicy.check_ipolicy(pol)


# --- update and layering ----------------------------------------------------------------

def test_update_cluster_policy_merges_std_and_replaces_minmax() -> None:
    base = ipolicy.default_ipolicy()
    minmax = copy.deepcopy(base["minmax"])
    minmax[0]["max"]["memory-size"] = "8G"
    new = ipolicy.update_ipolicy(base, {"std": {"memory-size": "256"}, "minmax": minmax,
                                        "vcpu-ratio": 8, "disk-templates": ["plain"]})
    assert new["std"] == {**base["std"], "memory-size": 256}
    assert new["minmax"][0]["max"]["memory-size"] == 8192
    assert new["vcpu-ratio"] == 8.0 and new["disk-templates"] == ["plain"]
    assert base == ipolicy.default_ipolicy()  # input untouched
    ipolicy.check_ipolicy(new)


def test_update_cluster_policy_cannot_unset() -> None:
    with pytest.raises(errors.OpPrereqError, match="cannot unset 'vcpu-ratio'"):
        ipolicy.update_ipolicy(ipolicy.default_ipolicy(), {"vcpu-ratio": "default"})


def test_update_group_policy_sets_and_resets() -> None:
    grp = ipolicy.update_ipolicy({}, {"vcpu-ratio": 2, "disk-templates": ["file"]}, group=True)
    assert grp == {"vcpu-ratio": 2.0, "disk-templates": ["file"]}
    grp = ipolicy.update_ipolicy(grp, {"vcpu-ratio": "default", "disk-templates": None},
                                 group=True)
    assert grp == {}


def test_update_group_policy_refuses_std() -> None:
    with pytest.raises(errors.OpPrereqError, match="'std' cannot be set in a group"):
        ipolicy.update_ipolicy({}, {"std": {"memory-size": 256}}, group=True)


def test_update_refuses_unknown_key_and_bad_minmax() -> None:
    with pytest.raises(errors.OpPrereqError, match="unknown key"):
        ipolicy.update_ipolicy({}, {"vcpu": 2}, group=True)
    with pytest.raises(errors.OpPrereqError, match="missing instance specs"):
        ipolicy.update_ipolicy({}, {"minmax": [{"min": {}, "max": {}}]}, group=True)


def test_fill_ipolicy_group_over_cluster() -> None:
    cluster = ipolicy.default_ipolicy()
    group = {"vcpu-ratio": 1.5, "minmax": [{"min": ipolicy.default_min_spec(),
                                            "max": ipolicy.default_min_spec()}]}
    filled = ipolicy.fill_ipolicy(cluster, group)
    assert filled["vcpu-ratio"] == 1.5
    assert filled["minmax"] == group["minmax"]
    assert filled["std"] == cluster["std"]
    assert filled["disk-templates"] == cluster["disk-templates"]
    filled["minmax"][0]["min"]["cpu-count"] = 99
    assert group["minmax"][0]["min"]["cpu-count"] == 1  # deep copies
    assert ipolicy.fill_ipolicy(cluster, None) == cluster


def test_fill_ipolicy_merges_std() -> None:
    filled = ipolicy.fill_ipolicy(ipolicy.default_ipolicy(), {"std": {"cpu-count": 2}})
    assert filled["std"]["cpu-count"] == 2 and filled["std"]["memory-size"] == 128


# --- spec checks ------------------------------------------------------------------------

def test_conforming_spec_has_no_violation() -> None:
    assert ipolicy.compute_violations(ipolicy.default_ipolicy(), _spec(), "plain") == []


@pytest.mark.parametrize("overrides,message", [
    ({"memory-size": 64}, "memory-size value 64 is not in range [128, 32768]"),
    ({"memory-size": 65536}, "memory-size value 65536 is not in range [128, 32768]"),
    ({"cpu-count": 9}, "cpu-count value 9 is not in range [1, 8]"),
    ({"nic-count": 0}, "nic-count value 0 is not in range [1, 8]"),
    ({"spindle-use": 13}, "spindle-use value 13 is not in range [1, 12]"),
    ({"disk-count": 0, "disk-size": []}, "disk-count value 0 is not in range [1, 16]"),
    ({"disk-size": [2048, 100]}, "disk-size/1 value 100 is not in range [1024, 1048576]"),
], ids=["mem-low", "mem-high", "cpu", "no-nic", "spindles", "no-disk", "disk-size"])
def test_violation_names_spec_and_value(overrides: dict[str, Any], message: str) -> None:
    assert ipolicy.compute_violations(ipolicy.default_ipolicy(), _spec(**overrides)) == [message]


def test_disk_template_not_allowed() -> None:
    pol = ipolicy.default_ipolicy(["plain"])
    assert ipolicy.compute_violations(pol, _spec(), "file") == [
        "Disk template file is not allowed (allowed templates: plain)"]


def test_diskless_skips_disk_count() -> None:
    spec = _spec(**{"disk-count": 0, "disk-size": []})
    assert ipolicy.compute_violations(ipolicy.default_ipolicy(), spec, "diskless") == []


def test_unknown_values_are_not_checked() -> None:
    spec = {"memory-size": None, "cpu-count": "auto", "nic-count": 1}
    assert ipolicy.compute_violations(ipolicy.default_ipolicy(), spec) == []


def test_single_disk_size_int() -> None:
    assert ipolicy.compute_violations(ipolicy.default_ipolicy(), _spec(**{"disk-size": 1})) == [
        "disk-size/0 value 1 is not in range [1024, 1048576]"]


def test_several_pairs_best_fit_wins() -> None:
    pol = ipolicy.default_ipolicy()
    big = {"min": {**ipolicy.default_max_spec(), "memory-size": 65536},
           "max": {**ipolicy.default_max_spec(), "memory-size": 131072}}
    pol["minmax"].append(big)
    # inside the second pair: conforms
    spec = {**ipolicy.default_max_spec(), "memory-size": 70000, "disk-size": [1048576]}
    assert ipolicy.compute_violations(pol, spec) == []
    # between the pairs: only the memory is wrong against either; the first
    # pair with fewest complaints is reported
    spec["memory-size"] = 40000
    assert ipolicy.compute_violations(pol, spec) == [
        "memory-size value 40000 is not in range [128, 32768]"]
    # small everything: the first pair fits all but memory, the second nothing
    small = _spec(**{"memory-size": 64})
    assert ipolicy.compute_violations(pol, small) == [
        "memory-size value 64 is not in range [128, 32768]"]


def test_format_violations() -> None:
    assert ipolicy.format_violations(["a", "b"]) == "a, b"


# --- upgrade of stored policies ---------------------------------------------------------

def test_upgrade_keeps_a_current_policy() -> None:
    pol = ipolicy.default_ipolicy(["plain"])
    assert ipolicy.upgrade_ipolicy(pol, group=False) == pol
    assert ipolicy.upgrade_ipolicy({"vcpu-ratio": 2.0}, group=True) == {"vcpu-ratio": 2.0}


def test_upgrade_old_min_max_keys_and_missing_entries() -> None:
    old = {"min": {"memory-size": 128}, "max": {"memory-size": 4096}, "std": {"cpu-count": 1},
           "disk-templates": ["plain"]}
    new = ipolicy.upgrade_ipolicy(old, group=False)
    assert new["minmax"] == [{"min": {**ipolicy.default_min_spec(), "memory-size": 128},
                              "max": {**ipolicy.default_max_spec(), "memory-size": 4096}}]
    assert new["vcpu-ratio"] == 4.0 and new["disk-templates"] == ["plain"]
    assert new["std"] == ipolicy.default_min_spec()
    ipolicy.check_ipolicy(new)
    assert ipolicy.upgrade_ipolicy({}, group=False) == ipolicy.default_ipolicy()
    assert ipolicy.upgrade_ipolicy({"min": {}, "max": {"cpu-count": 2}}, group=True) == {
        "minmax": [{"min": {}, "max": {"cpu-count": 2}}]}
