"""The pure checker of the master-role fault-injection suite (test/integration/master_history.py).

Each test feeds a hand-made history showing one kind of violation and
checks that exactly that kind is found; a clean history has none.
"""

from __future__ import annotations

import pytest
from master_history import KINDS, Ack, History, Violation, check, count_by_kind


def ack(job_id: int, marker: str | None = None, *, node: str = "n1", epoch: int | None = 0,
        named_master: bool = True, sent: float | None = None,
        acked: float | None = None) -> Ack:
    """An ack of job ``job_id`` sent at ``job_id`` seconds, answered 0.1 s later."""
    start = float(job_id) if sent is None else sent
    return Ack(marker=marker or f"m{job_id}", job_id=job_id, node=node, epoch=epoch,
               named_master=named_master, sent=start,
               acked=start + 0.1 if acked is None else acked)


def clean(acks: list[Ack], **kwargs) -> History:
    """A history whose master's disk holds exactly the acknowledged jobs."""
    return History(acks=acks, jobs={a.job_id: a.marker for a in acks}, recovered_after=1.0,
                   **kwargs)


def kinds(history: History) -> list[str]:
    return sorted({v.kind for v in check(history)})


def test_a_clean_history_across_two_epochs_has_no_violation() -> None:
    acks = [ack(1), ack(2), ack(1014, node="n2", epoch=1, sent=3.0),
            ack(1015, node="n2", epoch=1, sent=4.0)]
    assert check(clean(acks)) == []


def test_acks_of_unknown_epoch_are_left_out_of_the_epoch_checks() -> None:
    acks = [ack(1), ack(1014, node="n2", epoch=1, sent=2.0),
            ack(2, node="n1", epoch=None, sent=3.0)]
    assert check(clean(acks)) == []


def test_lost() -> None:
    history = clean([ack(1), ack(2)])
    del history.jobs[2]
    assert kinds(history) == ["lost"]
    assert "job 2 " in str(check(history)[0])


def test_changed() -> None:
    history = clean([ack(1), ack(2)])
    history.jobs[2] = "someone-else"
    assert kinds(history) == ["changed"]


def test_duplicated() -> None:
    history = clean([ack(1), ack(2)])
    history.jobs[3] = "m2"
    assert kinds(history) == ["duplicated"]
    assert "[2, 3]" in str(check(history)[0])


def test_id_reused_within_the_round() -> None:
    acks = [ack(1), ack(2, "a"), ack(2, "b", sent=3.0)]
    history = History(acks=acks, jobs={1: "m1", 2: "a"}, recovered_after=1.0)
    # the second ack's marker is not on disk: also "changed"
    assert kinds(history) == ["changed", "id_reused"]


def test_id_reused_from_an_earlier_round() -> None:
    history = clean([ack(5, "new")], earlier={5: "old"})
    assert kinds(history) == ["id_reused"]


def test_ids_not_increasing_across_epochs() -> None:
    acks = [ack(10), ack(5, node="n2", epoch=1, sent=20.0)]
    assert kinds(clean(acks)) == ["ids_not_increasing"]


def test_two_nodes_in_one_epoch_are_two_masters() -> None:
    acks = [ack(1), ack(2, node="n2", epoch=0)]
    assert kinds(clean(acks)) == ["two_masters"]


def test_an_older_epoch_acknowledging_after_a_newer_one_is_two_masters() -> None:
    acks = [ack(1014, node="n2", epoch=1, sent=1.0, acked=1.1),
            ack(3, node="n1", epoch=0, sent=2.0, acked=2.1)]
    found = check(clean(acks))
    assert {v.kind for v in found} == {"two_masters"}   # ids still grow with the epoch
    assert any("n1 (epoch 0) acknowledged job 3 sent after n2 (epoch 1)" in v.detail
               for v in found)


def test_overlapping_calls_of_two_epochs_are_not_two_masters() -> None:
    # the old master's call was sent before the new master's first answer
    acks = [ack(1014, node="n2", epoch=1, sent=1.0, acked=1.5),
            ack(1010, node="n1", epoch=0, sent=1.4, acked=3.0)]
    assert check(clean(acks)) == []


def test_stale_master() -> None:
    acks = [ack(1), ack(2, node="n1", epoch=1, named_master=False)]
    assert kinds(clean(acks)) == ["stale_master"]


@pytest.mark.parametrize("after", [None, 46.0], ids=["never", "too-late"])
def test_no_master(after: float | None) -> None:
    history = clean([ack(1)])
    history.recovered_after = after
    history.recovery_limit = 45.0
    assert kinds(history) == ["no_master"]


def test_count_by_kind_names_every_kind() -> None:
    counts = count_by_kind([Violation("lost", "a"), Violation("lost", "b"),
                            Violation("no_master", "c")])
    assert list(counts) == list(KINDS)
    assert counts["lost"] == 2 and counts["no_master"] == 1 and counts["changed"] == 0
