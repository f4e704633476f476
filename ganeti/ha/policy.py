"""An instance's auto-repair policy and last repair, from its tags (doc/ha.md).

Ganeti's auto-repair tool ``harep`` (upstream's design-autorepair.rst and harep(1)) is
steered by tags, read here as harep 3.0 reads them:

* ``ganeti:watcher:autorepair:<type>`` on an instance, its primary node's
  group or the cluster allows repairs up to ``<type>``; the types, from
  the least to the most destructive, are :data:`REPAIR_TYPES`, and each
  allows the ones before it.  Several in one object: the least
  destructive wins.
* ``ganeti:watcher:autorepair:suspend:`` (nothing after the colon) holds
  repairs for ever, ``...:suspend:<unix time>`` until that time (a past
  time is ignored; with several, the latest).  A suspension in an object
  beats its enable tags.  The bare ``...:suspend`` of the design document
  is not read by harep, and not here either.
* The nearest object with either kind of tag decides: instance, then
  group, then cluster; none of them: repairs are not enabled.

harep records its work on the instance: ``...:pending:<type>:<id>:<time>:<jobs>``
while its jobs run, then ``...:result:<type>:<id>:<time>:<result>:<jobs>``
(``success``, ``failure`` or ``enoperm``; jobs joined by ``+``).

Pure: tags and the current time in, values out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["TAG_PREFIX", "SUSPEND_PREFIX", "PENDING_PREFIX", "RESULT_PREFIX", "REPAIR_TYPES",
           "RESULTS", "Policy", "Repair", "object_policy", "effective_policy", "repairs",
           "last_repair", "ha_state"]

TAG_PREFIX = "ganeti:watcher:autorepair:"
SUSPEND_PREFIX = TAG_PREFIX + "suspend:"
PENDING_PREFIX = TAG_PREFIX + "pending:"
RESULT_PREFIX = TAG_PREFIX + "result:"
#: repair types, least destructive first
REPAIR_TYPES = ("fix-storage", "migrate", "failover", "reinstall")
RESULTS = ("success", "failure", "enoperm")

_INT = re.compile(r"-?[0-9]+\Z")


@dataclass(frozen=True)
class Policy:
    """What harep may do to an instance.

    ``state`` is ``enabled`` (``repair``: the most destructive repair
    allowed), ``suspended`` (``until``: the end, None for ever) or
    ``disabled``; ``source`` is where it came from (``instance``,
    ``group``, ``cluster``; None when nothing is tagged).
    """

    state: str
    repair: str | None = None
    until: int | None = None
    source: str | None = None

    def describe(self) -> str:
        """``failover (group)``, ``suspended until 1767225600 (cluster)``, ``disabled``."""
        if self.state == "enabled":
            text = str(self.repair)
        elif self.state == "suspended":
            text = "suspended" if self.until is None else f"suspended until {self.until}"
        else:
            return "disabled"
        return f"{text} ({self.source})"


DISABLED = Policy("disabled")


def object_policy(tags: Iterable[str], now: float, source: str | None = None) -> Policy | None:
    """The policy one object's tags set, or None when they set none (look further up)."""
    enabled: list[int] = []
    forever = False
    until: list[int] = []
    for tag in tags:
        if tag.startswith(SUSPEND_PREFIX):
            rest = tag[len(SUSPEND_PREFIX):]
            if not rest:
                forever = True
            elif _INT.match(rest) and int(rest) > now:
                until.append(int(rest))
        elif tag.startswith(TAG_PREFIX):
            rest = tag[len(TAG_PREFIX):]
            if rest in REPAIR_TYPES:
                enabled.append(REPAIR_TYPES.index(rest))
    if forever:
        return Policy("suspended", source=source)
    if until:
        return Policy("suspended", until=max(until), source=source)
    if enabled:
        return Policy("enabled", repair=REPAIR_TYPES[min(enabled)], source=source)
    return None


def effective_policy(instance_tags: Iterable[str], group_tags: Iterable[str],
                     cluster_tags: Iterable[str], now: float) -> Policy:
    """The policy of an instance: its own tags, else its primary node's group's, else the
    cluster's, else :data:`DISABLED`."""
    for tags, source in ((instance_tags, "instance"), (group_tags, "group"),
                         (cluster_tags, "cluster")):
        found = object_policy(tags, now, source)
        if found is not None:
            return found
    return DISABLED


@dataclass(frozen=True)
class Repair:
    """One repair harep recorded in a ``pending`` or ``result`` tag (``result`` None:
    pending)."""

    repair: str
    repair_id: str
    time: int
    jobs: tuple[int, ...]
    result: str | None
    tag: str

    def describe(self) -> str:
        """``failover success at 1767225600, jobs 12+13`` or ``failover pending since ...``."""
        jobs = "+".join(str(j) for j in self.jobs) or "none"
        if self.result is None:
            return f"{self.repair} pending since {self.time}, jobs {jobs}"
        return f"{self.repair} {self.result} at {self.time}, jobs {jobs}"


def _parse(tag: str) -> Repair | None:
    if tag.startswith(PENDING_PREFIX):
        parts = tag[len(PENDING_PREFIX):].split(":")
        if len(parts) != 4:
            return None
        rtype, rid, ts, jobs = parts
        result = None
    elif tag.startswith(RESULT_PREFIX):
        parts = tag[len(RESULT_PREFIX):].split(":")
        if len(parts) != 5:
            return None
        rtype, rid, ts, result, jobs = parts
        if result not in RESULTS:
            return None
    else:
        return None
    job_texts = jobs.split("+") if jobs else []
    if rtype not in REPAIR_TYPES or not _INT.match(ts) \
            or not all(j.isdigit() for j in job_texts):
        return None
    return Repair(rtype, rid, int(ts), tuple(int(j) for j in job_texts), result, tag)


def repairs(tags: Iterable[str]) -> list[Repair]:
    """The well-formed ``pending`` and ``result`` tags, oldest first (harep ignores the
    others)."""
    found = [r for r in (_parse(t) for t in tags) if r is not None]
    return sorted(found, key=lambda r: (r.time, r.result is None, r.tag))


def last_repair(tags: Iterable[str]) -> Repair | None:
    """A pending repair if there is one (harep allows one at a time), else the newest
    result; None when harep never recorded any."""
    found = repairs(tags)
    pending = [r for r in found if r.result is None]
    if pending:
        return pending[-1]
    return found[-1] if found else None


def ha_state(instance_tags: Iterable[str], group_tags: Iterable[str],
             cluster_tags: Iterable[str], now: float) -> str:
    """The ``ha_state`` query field: the policy, then the last repair if any
    (``failover (instance); last: failover success at 1767225600, jobs 12``)."""
    itags = list(instance_tags)
    text = effective_policy(itags, group_tags, cluster_tags, now).describe()
    last = last_repair(itags)
    return text if last is None else f"{text}; last: {last.describe()}"
