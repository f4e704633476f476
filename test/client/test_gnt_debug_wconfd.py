"""gnt-debug wconfd and test-osparams against a fake LUXI client (no daemon)."""

from __future__ import annotations

import pytest

from fakes import FakeLuxi

from ganeti import cli
from ganeti.client import gnt_debug


def run(argv: list[str], cl: FakeLuxi) -> int:
    return cli.generic_main(gnt_debug.commands, argv, "gnt-debug", client_factory=lambda: cl)


@pytest.mark.parametrize("argv, answers, out", [
    (["echo", "hi there"], {"Echo": "hi there"}, "Answer: hi there\n"),
    (["listlocks", "7"], {"ListLocks": [["cluster/BGL", "shared"]]},
     "Answer: [['cluster/BGL', 'shared']]\n"),
    (["listalllocks"], {"ListAllLocks": ["cluster/BGL"]}, "Answer: ['cluster/BGL']\n"),
    (["listalllocksowners"], {"ListAllLocksOwners": [["cluster/BGL", [[7, "shared"]]]]},
     "Answer: [['cluster/BGL', [[7, 'shared']]]]\n"),
    (["cleanuplocks"], {"CleanupLocks": []}, "Stale locks cleaned up.\n"),
    (["cleanuplocks"], {"CleanupLocks": [["node/n1", "job/4"]]},
     "Released node/n1 (held by job/4, which has ended)\nStale locks cleaned up.\n"),
    (["flushconfig"], {"FlushConfig": 12}, "Configuration flushed.\n"),
], ids=["echo", "listlocks", "listalllocks", "listalllocksowners", "cleanuplocks",
        "cleanuplocks-released", "flushconfig"])
def test_wconfd_prints_as_ganeti(argv: list[str], answers: dict, out: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    cl = FakeLuxi(answers)
    assert run(["wconfd", *argv], cl) == 0
    assert capsys.readouterr().out == out
    assert [method for method, _ in cl.calls] == list(answers)


@pytest.mark.parametrize("argv", [["nosuch"], ["echo"], ["flushconfig", "x"], ["listlocks"]],
                         ids=["unknown", "echo-no-arg", "flush-arg", "listlocks-no-arg"])
def test_wconfd_wrong_commands_exit_1(argv: list[str]) -> None:
    cl = FakeLuxi()
    assert run(["wconfd", *argv], cl) == 1
    assert cl.calls == []


def test_test_osparams_sends_the_secret_values_to_the_master() -> None:
    cl = FakeLuxi()
    assert run(["test-osparams", "--os-parameters-secret", "param1=secret1,param2=secret2",
                "--submit"], cl) == 0
    [[op]] = cl.submitted
    assert op["OP_ID"] == "OP_TEST_OS_PARAMS"
    assert op["osparams_secret"] == {"param1": "secret1", "param2": "secret2"}
