"""ganeti.client.console: where an instance's console command runs, and how it is shown."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from ganeti import constants, errors
from ganeti.client import console

SOCAT = ["socat", "STDIO,raw,echo=0,escape=0x1d", "UNIX-CONNECT:/run/x/serial.sock"]
INFO = {"instance": "inst1", "kind": "ssh", "host": "node2.example.com", "user": "root",
        "port": None, "message": None, "command": SOCAT}
TARGETS = {"node2.example.com": ("192.0.2.2", 2222)}


def test_on_the_primary_the_command_runs_here() -> None:
    plan = console.plan_console("inst1", INFO, "node2.example.com", TARGETS)
    assert not plan.remote and plan.command == SOCAT
    assert plan.command_text == shlex.join(SOCAT)


def test_node_names_compare_without_case() -> None:
    assert not console.plan_console("inst1", INFO, "NODE2.example.com", {}).remote


def test_elsewhere_it_runs_on_the_primary_over_ssh() -> None:
    plan = console.plan_console("inst1", INFO, "node1.example.com", TARGETS)
    assert plan.remote
    assert (plan.host, plan.address, plan.port, plan.user) == \
        ("node2.example.com", "192.0.2.2", 2222, "root")


def test_a_string_command_goes_through_the_shell() -> None:
    plan = console.plan_console("inst1", {**INFO, "command": "xm console x"},
                                "node2.example.com", {})
    assert plan.command == ["sh", "-c", "xm console x"]


def test_an_unknown_primary_is_a_prereq_error() -> None:
    with pytest.raises(errors.OpPrereqError, match="node2.example.com.*ssconf"):
        console.plan_console("inst1", INFO, "node1.example.com", {})


@pytest.fixture
def elsewhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> str:
    """This process is node1; ssconf says node2 is at 192.0.2.2, SSH port 2222."""
    from ganeti.client import cluster_common
    monkeypatch.setenv(constants.ENV_HOSTNAME, "node1.example.com")
    monkeypatch.setenv(constants.ENV_ROOTDIR, str(tmp_path))
    monkeypatch.setattr(cluster_common, "node_ssh_targets",
                        lambda paths, names: [("node2.example.com", "192.0.2.2", 2222)])
    return str(tmp_path)


def test_show_cmd_elsewhere_prints_the_ssh_command_line(elsewhere: str) -> None:
    out: list[str] = []
    assert console.run_console("inst1", INFO, show_command=True, out=out.append,
                               err=out.append) == 0
    argv = shlex.split(out[0])
    assert argv[0] == "ssh" and argv[-2:] == ["192.0.2.2", shlex.join(SOCAT)]
    assert "-t" in argv and "-p2222" in argv and "-lroot" in argv
    assert "-oStrictHostKeyChecking=yes" in argv and "-oBatchMode=yes" in argv
    assert "-oEscapeChar=none" in argv
    key = argv[argv.index("-i") + 1]
    assert key.startswith(elsewhere) and key.endswith("id_cluster")
    assert f"-oUserKnownHostsFile={elsewhere}" in " ".join(argv)


def test_show_cmd_on_the_primary_prints_the_local_command(elsewhere: str,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setenv(constants.ENV_HOSTNAME, "node2.example.com")
    out: list[str] = []
    assert console.run_console("inst1", INFO, show_command=True, out=out.append,
                               err=out.append) == 0
    assert out == [shlex.join(SOCAT)]


def test_unreachable_primary_is_a_clear_error(elsewhere: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from ganeti import ssh

    def refuse(self: Any, host: str, command: Any, **kwargs: Any) -> int:
        raise errors.CommandError(f"SSH to {host}:{self.port} failed: cannot connect")

    monkeypatch.setattr(ssh.SshRunner, "interactive", refuse)
    err: list[str] = []
    assert console.run_console("inst1", INFO, show_command=False, out=err.append,
                               err=err.append) == 1
    assert err == ["Cannot attach to the console of inst1 on its primary node"
                   " node2.example.com over SSH: SSH to 192.0.2.2:2222 failed: cannot connect"]


def test_the_remote_exit_status_is_ours(elsewhere: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from ganeti import ssh
    calls: list[tuple[str, Any, int, str, bool]] = []

    def fake(self: Any, host: str, command: Any, **kwargs: Any) -> int:
        calls.append((host, command, self.port, self.user, self.known_hosts.accept_new))
        return 7

    monkeypatch.setattr(ssh.SshRunner, "interactive", fake)
    assert console.run_console("inst1", INFO, show_command=False, out=print, err=print) == 7
    assert calls == [("192.0.2.2", SOCAT, 2222, "root", False)]
