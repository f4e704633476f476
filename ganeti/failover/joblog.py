"""Job logs compared, not maxima: which acknowledged jobs a taker lacks, and from whom.

Pure decision logic (doc/design/failover.md, "Catching up before the vote").
A job is acknowledged only once its file is on a strict majority of the
master candidates (doc/design/replication.md, Invariant 1), so every strict
majority of the candidates holds at least one copy of every acknowledged
job.  Before it votes, a taker therefore asks the candidates for their *job
logs* (the set of job ids they hold, queue and archive, and their queue
serial; RPC ``jobqueue_log``) and:

* refuses unless a strict majority of the online candidates of its
  configuration answered (itself included): with fewer, a job could exist
  only on the silent ones;
* fetches every id some answering candidate holds and it lacks, gaps below
  its own highest id included (comparing only the highest ids would miss
  them), each from one node that holds it (:func:`plan_catch_up`);
* raises its queue serial to the highest serial any answering candidate
  has, so that no id handed out by an earlier master (acknowledged or
  only reserved) is ever handed out again.

Ids nobody answering holds were never acknowledged (a job whose quorum
write failed may exist on a minority only: it is failed, never run).

Job ids travel as sorted ``[[first, last], ...]`` ranges (:func:`to_ranges`),
so an archive of many thousand jobs stays a few bytes
(:mod:`ganeti.utils.idranges`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ganeti.utils.idranges import from_ranges, to_ranges

__all__ = ["NodeLog", "CatchUp", "to_ranges", "from_ranges", "log_from_data",
           "plan_catch_up"]

@dataclass(frozen=True)
class NodeLog:
    """One node's job log: the ids it holds (queue and archive) and its queue serial."""

    node: str
    ids: frozenset[int]
    serial: int = 0


def log_from_data(node: str, data: object) -> NodeLog | str:
    """A :class:`NodeLog` from the ``jobqueue_log`` payload, or why it is unusable."""
    if not isinstance(data, dict):
        return f"invalid answer {str(data)[:80]!r}"
    ids = from_ranges(data.get("ids"))
    if isinstance(ids, str):
        return ids
    serial = data.get("serial")
    if not isinstance(serial, int) or isinstance(serial, bool) or serial < 0:
        return f"invalid queue serial {serial!r}"
    return NodeLog(node, frozenset(ids), serial)


@dataclass(frozen=True)
class CatchUp:
    """What :func:`plan_catch_up` decided.

    ``ok``: the taker may go on to the vote once it fetched ``fetch``
    (``{node: [ids to fetch from it]}``) and raised its queue serial to
    ``serial``.  ``reason`` says why not, or what will be done.
    """

    ok: bool
    reason: str
    fetch: dict[str, list[int]] = field(default_factory=dict)
    serial: int = 0
    missing: dict[str, str] = field(default_factory=dict)

    @property
    def lacking(self) -> int:
        """How many job ids the taker lacks."""
        return sum(len(ids) for ids in self.fetch.values())


def plan_catch_up(me: str, candidates: Sequence[str],
                  logs: Mapping[str, NodeLog | str]) -> CatchUp:
    """What ``me`` must fetch before it may take the master role (see the module docstring).

    ``candidates`` are the online master candidates of the taker's
    configuration (``me`` among them, added if not); ``logs`` maps them to
    their :class:`NodeLog` or to why they gave none (``me``'s own log
    included: without it nothing can be compared).  Each missing id is
    fetched from the answering node holding the most missing ids (fewest
    requests), ties by name.
    """
    names = list(dict.fromkeys([*candidates, me]))
    missing = {n: (logs.get(n) if isinstance(logs.get(n), str) else "no answer")
               for n in names if not isinstance(logs.get(n), NodeLog)}
    got = {n: log for n in names if isinstance((log := logs.get(n)), NodeLog)}
    own = got.get(me)
    if own is None:
        return CatchUp(False, f"This node's own job log is unavailable ({missing.get(me)})",
                       missing={k: str(v) for k, v in missing.items()})
    need = len(names) // 2 + 1
    serial = max([own.serial, *(max(log.ids, default=0) for log in got.values()),
                  *(log.serial for log in got.values())])
    missing_txt = {k: str(v) for k, v in missing.items()}
    if len(got) < need:
        silent = ", ".join(f"{n} ({why})" for n, why in sorted(missing_txt.items()))
        return CatchUp(False, f"Only {len(got)} of {len(names)} master candidates gave their job"
                       f" log, a strict majority ({need}) is needed so that no acknowledged job"
                       f" can be missed; not answering: {silent}", serial=serial,
                       missing=missing_txt)
    lacking: dict[int, list[str]] = {}
    for name, log in sorted(got.items()):
        if name == me:
            continue
        for job_id in log.ids - own.ids:
            lacking.setdefault(job_id, []).append(name)
    fetch: dict[str, list[int]] = {}
    todo = set(lacking)
    while todo:
        best = max(sorted({n for job_id in todo for n in lacking[job_id]}),
                   key=lambda n: len(got[n].ids & todo))
        take = sorted(got[best].ids & todo)
        fetch[best] = take
        todo.difference_update(take)
    count = len(lacking)
    reason = (f"{len(got)} of {len(names)} master candidates gave their job log; "
              + (f"{count} job(s) missing here, fetched from {', '.join(sorted(fetch))}"
                 if count else "no job missing here"))
    return CatchUp(True, reason, fetch, serial, missing_txt)
