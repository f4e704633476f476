"""The auto-repair policy of ganeti/ha/policy.py: harep 3.0's reading of the tags."""

from __future__ import annotations

import pytest

from ganeti.ha import policy
from ganeti.ha.policy import Policy

P = "ganeti:watcher:autorepair:"
NOW = 1_800_000_000


def eff(inst=(), group=(), cluster=(), now=NOW) -> Policy:  # type: ignore[no-untyped-def]
    return policy.effective_policy(list(inst), list(group), list(cluster), now)


def test_no_tags_is_disabled() -> None:
    assert eff() == Policy("disabled")
    assert eff(["web", P + "bogus", "ganeti:watcher:autorepair"]) == Policy("disabled")
    assert eff().describe() == "disabled"


@pytest.mark.parametrize("rtype", policy.REPAIR_TYPES)
def test_each_type_on_each_level(rtype: str) -> None:
    assert eff([P + rtype]) == Policy("enabled", rtype, source="instance")
    assert eff(group=[P + rtype]) == Policy("enabled", rtype, source="group")
    assert eff(cluster=[P + rtype]) == Policy("enabled", rtype, source="cluster")


def test_least_destructive_tag_of_one_object_wins() -> None:
    assert eff(cluster=[P + "reinstall", P + "fix-storage"]).repair == "fix-storage"
    assert eff([P + "failover", P + "migrate", P + "reinstall"]).repair == "migrate"


def test_nearest_object_wins_as_in_harep_man_page() -> None:
    # I1 has failover, the cluster fix-storage and reinstall: I1 failover, I2 fix-storage
    cluster = [P + "fix-storage", P + "reinstall"]
    assert eff([P + "failover"], cluster=cluster) == Policy("enabled", "failover",
                                                            source="instance")
    assert eff([], cluster=cluster) == Policy("enabled", "fix-storage", source="cluster")
    # a less destructive tag nearer still wins over a more destructive one further up
    assert eff([P + "fix-storage"], [P + "reinstall"]).repair == "fix-storage"
    assert eff(group=[P + "migrate"], cluster=[P + "failover"]).source == "group"


def test_suspend_forever_and_until() -> None:
    assert eff([P + "suspend:"]) == Policy("suspended", source="instance")
    assert eff([P + "failover", P + "suspend:"]).state == "suspended"
    later = NOW + 3600
    assert eff(group=[P + "suspend:" + str(later), P + "suspend:" + str(NOW + 60)]) == Policy(
        "suspended", until=later, source="group")
    # the form without a time wins over timed ones
    assert eff([P + f"suspend:{later}", P + "suspend:"]).until is None
    assert eff([P + f"suspend:{later}"]).describe() == f"suspended until {later} (instance)"


def test_expired_or_malformed_suspension_is_ignored() -> None:
    tags = [P + f"suspend:{NOW - 1}", P + f"suspend:{NOW}", P + "suspend:soon", P + "migrate"]
    assert eff(tags) == Policy("enabled", "migrate", source="instance")
    # nothing left at this level: the level above decides
    assert eff([P + f"suspend:{NOW - 1}"], cluster=[P + "failover"]).source == "cluster"
    # harep 3.0 reads the design document's bare "suspend" as nothing at all
    assert eff([P + "suspend"], cluster=[P + "failover"]).source == "cluster"


def test_suspension_lower_down_holds_what_is_enabled_above_and_vice_versa() -> None:
    assert eff(group=[P + "suspend:"], cluster=[P + "reinstall"]) == Policy(
        "suspended", source="group")
    assert eff([P + "failover"], group=[P + "suspend:"]) == Policy("enabled", "failover",
                                                                   source="instance")


def test_suspension_ends_with_the_clock() -> None:
    tags = [P + f"suspend:{NOW + 10}", P + "failover"]
    assert eff(tags, now=NOW).state == "suspended"
    assert eff(tags, now=NOW + 10).state == "enabled"


def test_pending_and_result_tags() -> None:
    tags = [P + "failover",
            P + "result:fix-storage:id-1:1700000000:success:3+4",
            P + "result:failover:id-2:1700000100:failure:7",
            P + "result:failover:id-3:1700000050:enoperm:",
            P + "result:failover:id-4:17000:broken:1",          # unknown result
            P + "pending:failover:id-5:1700000000"]              # a field short
    found = policy.repairs(tags)
    assert [r.repair_id for r in found] == ["id-1", "id-3", "id-2"]
    assert found[0].jobs == (3, 4) and found[1].jobs == ()
    last = policy.last_repair(tags)
    assert last is not None and last.result == "failure" and last.jobs == (7,)
    assert last.describe() == "failover failure at 1700000100, jobs 7"
    pending = P + "pending:failover:id-6:1600000000:9"
    last = policy.last_repair([*tags, pending])
    assert last is not None and last.result is None and last.tag == pending
    assert last.describe() == "failover pending since 1600000000, jobs 9"
    assert policy.last_repair([P + "failover"]) is None


def test_ha_state_text() -> None:
    tags = [P + "failover", P + "result:failover:u:1700000000:success:12+13"]
    assert policy.ha_state(tags, [], [], NOW) == (
        "failover (instance); last: failover success at 1700000000, jobs 12+13")
    assert policy.ha_state([], [P + "suspend:"], [], NOW) == "suspended (group)"
