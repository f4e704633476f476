"""The master vote: may this node take the master role?  Pure decision logic.

Whenever a node takes the master role (the master daemon starting, or
``gnt-cluster master-failover``), it asks every node of its configuration
what it believes (RPC ``master_vote_info``, one :class:`NodeAnswer` each)
and :func:`decide` says whether the takeover may go ahead
(doc/design/failover.md, "The vote"):

* a **strict majority** of the nodes in the configuration must answer
  (the taker counts as one, answering for itself);
* among the answering **master candidates**, nobody may have a higher
  config serial, job id (the highest in its queue, archive included) or
  queue serial than the taker: otherwise the taker's copies are stale and
  it would reuse job ids or roll config changes back;
* at plain **startup**, a strict majority must also name the taker as the
  master, and no node may have accepted a master epoch newer than the
  taker's (a newer master exists: this one was fenced);
* with ``no_voting`` (``--no-voting --yes-do-it``) the checks are skipped,
  and the decision says so;
* a taker that holds a majority's claim of an epoch (``claimed``) and
  finds newer data only on rival takers of older epochs, which name
  themselves the master, waits (``retry``): such a rival cannot have its
  epoch accepted by a majority any more, so it puts its configuration
  back (doc/design/failover.md, "Concurrent takers").

The decision also carries what a takeover must set so that nothing is
reused: the queue serial (every job id any answering node has seen or
reserved, so the next id is higher), the config serial (higher than any
seen) and the new master epoch (higher than any accepted anywhere).  The
message lists the answers side by side so that an operator sees at once
which node has which serials.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["NodeAnswer", "Decision", "decide", "format_answers", "answer_from_data",
           "MODE_STARTUP", "MODE_FAILOVER"]

MODE_STARTUP = "startup"
MODE_FAILOVER = "failover"


@dataclass(frozen=True)
class NodeAnswer:
    """What one node believes (the reply of ``master_vote_info``).

    ``master`` is the master named by the node's ssconf (None: it has
    none).  ``candidate`` says whether the node holds the configuration
    and queue (a master candidate); the serials are None for the others.
    ``epoch`` is the newest master epoch the node has accepted,
    ``reserved_job_id`` / ``reserved_serial`` the highest job id and config
    serial a master reserved on it (see
    doc/design/failover.md, "Fencing"); every node keeps those.
    """

    node: str
    master: str | None
    candidate: bool = False
    config_serial: int | None = None
    job_id: int | None = None
    queue_serial: int | None = None
    epoch: int = 0
    reserved_job_id: int = 0
    reserved_serial: int = 0
    #: seconds since the node last confirmed a master's lease (None: never);
    #: read by the master autopromotion (doc/ha.md)
    contact_age: float | None = None

    @property
    def highest_job_id(self) -> int:
        """The highest job id this node knows about (files, serial, reservation)."""
        return max(self.job_id or 0, self.queue_serial or 0, self.reserved_job_id)


def answer_from_data(node: str, data: object) -> NodeAnswer | str:
    """A :class:`NodeAnswer` from the RPC payload, or why it is unusable (text)."""
    if not isinstance(data, dict):
        return f"invalid answer {str(data)[:80]!r}"

    def opt_int(key: str) -> int | None:
        value = data.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    master = data.get("master")
    return NodeAnswer(node=node, master=master if isinstance(master, str) else None,
                      candidate=data.get("candidate") is True,
                      config_serial=opt_int("config_serial"), job_id=opt_int("job_id"),
                      queue_serial=opt_int("queue_serial"), epoch=opt_int("epoch") or 0,
                      reserved_job_id=opt_int("reserved_job_id") or 0,
                      reserved_serial=opt_int("reserved_serial") or 0,
                      contact_age=_opt_float(data.get("contact_age")))


def _opt_float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


@dataclass(frozen=True)
class Decision:
    """The outcome of :func:`decide`.

    ``ok``: the takeover may go ahead.  ``retry``: it was refused only
    because too few nodes answered (worth asking again while a cluster
    boots), or because the newer data is a pre-empted rival taker's (worth
    asking again while it puts its configuration back).  ``newer``: candidates with newer data than the taker.
    ``stale``: answering nodes that name another master or (candidates)
    hold an older config serial: the new master should push to them.
    ``queue_serial`` / ``config_serial`` / ``epoch``: what the new master
    sets (the next job id is ``queue_serial + 1``).  ``message``: the
    reason, then the answers side by side.
    """

    ok: bool
    reason: str
    message: str
    retry: bool = False
    newer: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)
    stale: list[str] = field(default_factory=list)
    queue_serial: int = 0
    config_serial: int = 0
    epoch: int = 0


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)


def format_answers(taker: NodeAnswer, nodes: Sequence[str],
                   answers: Mapping[str, NodeAnswer | str]) -> str:
    """The answers as a table, one node a line, the taker first."""
    header = ("node", "answer", "master", "config serial", "job id", "queue serial", "epoch")
    rows = [header]
    for name in [taker.node] + [n for n in nodes if n != taker.node]:
        ans = taker if name == taker.node else answers.get(name, "no answer")
        if isinstance(ans, str):
            rows.append((name, f"no answer: {ans}", "", "", "", "", ""))
            continue
        what = "(this node)" if name == taker.node else (
            "candidate" if ans.candidate else "not candidate")
        rows.append((name, what, ans.master or "-", _num(ans.config_serial),
                     _num(ans.job_id), _num(ans.queue_serial), str(ans.epoch)))
    widths = [max(len(r[i]) for r in rows if i == 0 or not r[1].startswith("no answer"))
              for i in range(len(header))]
    lines = []
    for row in rows:
        if row[1].startswith("no answer"):
            lines.append(f"  {row[0].ljust(widths[0])}  {row[1]}")
        else:
            lines.append("  " + "  ".join(cell.ljust(widths[i])
                                          for i, cell in enumerate(row)).rstrip())
    return "\n".join(lines)


def _newer_parts(ans: NodeAnswer, taker: NodeAnswer) -> list[str]:
    # the taker never reuses an id up to its queue serial: a job id is newer
    # only above both
    jobs = max(taker.job_id or 0, taker.queue_serial or 0)
    parts = []
    for label, theirs, ours in (("config serial", ans.config_serial, taker.config_serial),
                                ("job id", ans.job_id, jobs),
                                ("queue serial", ans.queue_serial, jobs)):
        if theirs is not None and theirs > (ours or 0):
            parts.append(f"{label} {theirs} there, {ours or 0} here")
    return parts


def decide(taker: NodeAnswer, nodes: Sequence[str], answers: Mapping[str, NodeAnswer | str],
           *, mode: str = MODE_FAILOVER, no_voting: bool = False,
           local_epoch: int = 0, claimed: int = 0) -> Decision:
    """Whether ``taker`` may take the master role (see the module docstring).

    ``nodes`` are the names of every node in the taker's configuration
    (the taker included); ``answers`` maps the other nodes to their
    :class:`NodeAnswer` or to the reason they gave none.  Answers from
    nodes not in ``nodes`` are ignored.  ``taker.epoch`` is the epoch of
    the taker's configuration; ``local_epoch`` the one its own node daemon
    accepted (it counts like another node's).  ``claimed``: the epoch the
    taker holds a majority's claim of (0: none yet).
    """
    if mode not in (MODE_STARTUP, MODE_FAILOVER):
        raise ValueError(f"Unknown vote mode {mode!r}")
    names = list(dict.fromkeys(nodes))
    if taker.node not in names:
        names.append(taker.node)
    got = {taker.node: taker}
    missing: dict[str, str] = {}
    for name in names:
        if name == taker.node:
            continue
        ans = answers.get(name, "no answer")
        if isinstance(ans, NodeAnswer):
            got[name] = ans
        else:
            missing[name] = ans
    seen = list(got.values())
    queue_serial = max(a.highest_job_id for a in seen)
    config_serial = max(max(a.config_serial or 0, a.reserved_serial) for a in seen) + 1
    epoch = max(max(a.epoch for a in seen), local_epoch) + 1
    table = format_answers(taker, names, answers)
    need = len(names) // 2 + 1
    stale = sorted(a.node for a in seen if a is not taker and (
        a.master != taker.node or (a.candidate and (a.config_serial or 0)
                                   < (taker.config_serial or 0))))

    def result(ok: bool, reason: str, *, retry: bool = False,
               newer: list[str] | None = None) -> Decision:
        return Decision(ok, reason, f"{reason}\n{table}", retry, newer or [], missing, stale,
                        queue_serial, config_serial, epoch)

    if no_voting:
        return result(True, f"Vote skipped (--no-voting): {len(got)} of {len(names)} nodes"
                      f" answered; {taker.node} takes the master role with its own data")
    if len(got) < need:
        down = ", ".join(sorted(missing)) or "none"
        return result(False, f"Only {len(got)} of {len(names)} nodes answered, a strict majority"
                      f" ({need}) is needed; not answering: {down}. If those nodes are really"
                      " down, use --no-voting --yes-do-it", retry=True)
    if mode == MODE_STARTUP:
        fenced = [a for a in seen if a.epoch > taker.epoch]
        if local_epoch > taker.epoch:
            fenced.append(NodeAnswer(taker.node, "another master", epoch=local_epoch))
        if fenced:
            first = max(fenced, key=lambda a: a.epoch)
            return result(False, f"{taker.node} is no longer the master: {first.node} accepted"
                          f" master epoch {first.epoch}, newer than this node's {taker.epoch}"
                          f" (its master is {first.master or 'unknown'})")
    newer = []
    details = []
    behind = []
    for ans in seen:
        if ans is taker or not ans.candidate:
            continue
        parts = _newer_parts(ans, taker)
        if parts and ans.master == ans.node and 0 < ans.epoch < claimed:
            behind.append(f"{ans.node} (epoch {ans.epoch}, {', '.join(parts)})")
        elif parts:
            newer.append(ans.node)
            details.append(f"{ans.node} ({', '.join(parts)})")
    if behind and not newer:
        return result(False, f"Newer data only on rival takers of older master epochs than"
                      f" {claimed}, claimed by {taker.node}: {'; '.join(behind)}; waiting for"
                      " them to put their configuration back", retry=True,
                      newer=[b.split(" ", 1)[0] for b in behind])
    newer += [b.split(" ", 1)[0] for b in behind]
    details += behind
    if newer:
        return result(False, f"{taker.node} has stale data: newer on {'; '.join(details)}."
                      f" Fail over to {newer[0]} instead, or use --no-voting --yes-do-it to"
                      " force this node's data", newer=newer)
    if mode == MODE_STARTUP:
        votes = [a.node for a in seen if a.master == taker.node]
        if len(votes) < need:
            others = sorted({a.master or "none" for a in seen if a.master != taker.node})
            return result(False, f"Only {len(votes)} of {len(names)} nodes name {taker.node} as"
                          f" the master (a strict majority, {need}, is needed); the others"
                          f" name {', '.join(others)}")
    return result(True, f"{len(got)} of {len(names)} nodes answered and confirm {taker.node}"
                  f" ({'startup' if mode == MODE_STARTUP else 'failover'})")
