"""Pure parts of the guest cluster (tools/harness/guest*.py; doc/vcluster.md, "Guest clusters")."""

from __future__ import annotations

import ipaddress
import os
import stat
import sys
import threading
import time

import pytest

from ganeti import errors
from tools.harness import guestcluster, guestimage, guestinit, guestvm, tinylinux

DIR = "/srv/clusters/demo"


def _cluster(nodes: int = 3, vg: str = "xenvg") -> guestcluster.GuestCluster:
    subnet = ipaddress.IPv4Network("10.213.7.0/24")
    bridge = guestvm.bridge_name(DIR)
    gc = guestcluster.GuestCluster(
        directory=DIR, bridge=bridge, subnet=str(subnet), image_dir="/img", accel="tcg",
        python="/repo/.venv/bin/python", repo="/repo", vg_name=vg)
    gc.nodes = [guestcluster.GuestNode(name=f"node{k}.vcluster", index=k,
                                       ip=guestvm.node_address(subnet, k),
                                       tap=guestvm.tap_name(bridge, k),
                                       mac=guestvm.mac_address(DIR, k))
                for k in range(1, nodes + 1)]
    return gc


# --- names and addresses ----------------------------------------------------------------

def test_bridge_name_is_short_stable_and_per_directory() -> None:
    name = guestvm.bridge_name(DIR)
    assert name == guestvm.bridge_name(DIR + "/")
    assert name != guestvm.bridge_name(DIR + "2")
    assert name.startswith("vcg") and len(name) <= 15


def test_tap_names_fit_the_kernel_limit() -> None:
    bridge = guestvm.bridge_name(DIR)
    assert guestvm.tap_name(bridge, 1) == bridge + "t1"
    assert len(guestvm.tap_name(bridge, 199)) <= 15
    with pytest.raises(errors.ParameterError):
        guestvm.tap_name(bridge, 1000)


def test_mac_addresses_are_local_and_distinct() -> None:
    macs = {guestvm.mac_address(DIR, k) for k in range(1, 300)}
    assert len(macs) == 299
    first = int(guestvm.mac_address(DIR, 1).split(":")[0], 16)
    assert first & 0x02 and not first & 0x01     # locally administered, unicast


def test_pick_subnet_skips_networks_in_use() -> None:
    first = guestvm.pick_subnet([], "seed")
    assert first.prefixlen == 24 and first.subnet_of(guestvm.SUBNET_POOL)
    assert guestvm.pick_subnet([], "seed") == first          # the seed decides the start
    second = guestvm.pick_subnet([first], "seed")
    assert second != first
    # a wider network in use covers many candidates
    assert not guestvm.pick_subnet([ipaddress.IPv4Network("10.213.0.0/17")], "seed") \
        .overlaps(ipaddress.IPv4Network("10.213.0.0/17"))


def test_pick_subnet_refuses_a_full_pool() -> None:
    with pytest.raises(errors.CommandError, match="No free /24"):
        guestvm.pick_subnet([guestvm.SUBNET_POOL], "seed")


def test_node_and_host_addresses() -> None:
    subnet = ipaddress.IPv4Network("10.213.7.0/24")
    assert guestvm.node_address(subnet, 1) == "10.213.7.1"
    assert guestvm.host_address(subnet) == "10.213.7.254"
    with pytest.raises(errors.ParameterError):
        guestvm.node_address(subnet, guestvm.HOST_SUFFIX)


def test_network_support_names_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guestvm.os, "geteuid", lambda: 1000)
    assert "root" in (guestvm.network_support() or "")


# --- command lines ----------------------------------------------------------------------

def test_qemu_command_line() -> None:
    gc = _cluster()
    spec = gc.spec(gc.nodes[1])
    argv = guestvm.qemu_argv(spec)
    line = " ".join(argv)
    assert argv[0] == guestvm.QEMU
    assert "q35,accel=tcg" in argv and argv[argv.index("-cpu") + 1] == "max"
    assert "memory-backend-memfd,id=mem,size=640M,share=on" in argv
    assert f"socket,id=vfs,path={DIR}/node2/vfs.sock" in argv
    assert "vhost-user-fs-pci,chardev=vfs,tag=hostroot" in argv
    # the state disk first (/dev/vda), then the LVM disks
    drives = [argv[i + 1] for i, a in enumerate(argv) if a == "-drive"]
    assert drives[0].startswith(f"file={DIR}/node2/state.img,")
    assert drives[1].startswith(f"file={DIR}/node2/disk0.img,")
    assert f"tap,id=net0,ifname={gc.nodes[1].tap},script=no,downscript=no" in argv
    assert f"mac={gc.nodes[1].mac}" in line
    assert "-daemonize" in argv and "-no-reboot" in argv
    assert argv[argv.index("-append") + 1] == spec.cmdline
    assert "vcg.ip=10.213.7.2" in spec.cmdline and "vcg.host=node2.vcluster" in spec.cmdline


def test_qemu_command_line_with_kvm_uses_the_host_cpu() -> None:
    gc = _cluster()
    gc.accel = "kvm"
    argv = guestvm.qemu_argv(gc.spec(gc.nodes[0]))
    assert "q35,accel=kvm" in argv and argv[argv.index("-cpu") + 1] == "host"


def test_virtiofsd_command_line() -> None:
    argv = guestvm.virtiofsd_argv("/x/vfs.sock")
    assert argv == [guestvm.VIRTIOFSD, "--socket-path=/x/vfs.sock", "-o", "source=/",
                    "-o", "cache=always", "-o", "sandbox=chroot"]


def test_kernel_cmdline_refuses_white_space() -> None:
    line = guestimage.kernel_cmdline(hostname="n1", address="10.0.0.1", prefix=24,
                                     python="/p/python", repo="/r")
    assert "console=ttyS0" in line and "vcg.repo=/r" in line and "vcg.probe" not in line
    # fixed mappings: TCG reuses one process's translated code in the next
    assert "norandmaps" in line.split()
    with pytest.raises(errors.ParameterError):
        guestimage.kernel_cmdline(hostname="n1", address="10.0.0.1", prefix=24,
                                  python="/p/my python", repo="/r")


def test_choose_accel_takes_an_explicit_choice_and_refuses_others() -> None:
    image = guestimage.Image("/nonexistent", "k", "1", "r", ())
    assert guestvm.choose_accel(image, "tcg") == "tcg"
    assert guestvm.choose_accel(image, "kvm") == "kvm"
    with pytest.raises(errors.ParameterError):
        guestvm.choose_accel(image, "xen")



def test_auto_accel_probes_once_when_two_workers_ask_at_once(tmp_path, monkeypatch) -> None:
    image = guestimage.Image(str(tmp_path), "k", "1", "r", ())
    probes: list[int] = []

    def probe(img, scratch) -> bool:
        probes.append(1)
        time.sleep(0.3)          # the second caller arrives during the probe
        return False
    monkeypatch.setattr(guestvm, "_kvm_usable", lambda: True)
    monkeypatch.setattr(guestvm, "_probe_kvm", probe)
    answers: list[str] = []
    threads = [threading.Thread(target=lambda: answers.append(guestvm.choose_accel(image)))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert answers == ["tcg", "tcg"] and probes == [1]
    assert sorted(os.listdir(tmp_path)) == [".accel.lock", "accel.json"]

def test_probe_verdict_yes_on_the_line_no_on_exit_cpu_budget_or_timeout() -> None:
    line = guestimage.PROBE_LINE
    assert guestvm.probe_verdict(f"noise\n{line}\n", 9.0, 30.0, True) is True
    assert guestvm.probe_verdict("", 0.2, 1.0, False) is None
    assert guestvm.probe_verdict("half a li", 0.2, 1.0, True) is False
    assert guestvm.probe_verdict("", 5.0, 6.0, False, cpu_budget=5.0) is False
    assert guestvm.probe_verdict("", 4.9, 6.0, False, cpu_budget=5.0) is None
    assert guestvm.probe_verdict("", 0.1, 20.0, False, timeout=20.0) is False


#: a stand-in for qemu: writes ``$PROBE_OUT`` to the file of ``-serial file:PATH``, then
#: spins the CPU (``spin``) or sleeps, until it is killed
_FAKE_QEMU = """#!{python}
import os, sys, time
path = sys.argv[sys.argv.index("-serial") + 1][len("file:"):]
with open(path, "w") as fh:
    fh.write(os.environ["PROBE_OUT"])
while True:
    if os.environ["PROBE_MODE"] != "spin":
        time.sleep(0.05)
"""


@pytest.mark.parametrize("out,mode,boots", [(guestimage.PROBE_LINE + "\n", "sleep", True),
                                            ("", "spin", False)], ids=["boots", "hangs"])
def test_probe_stops_qemu_once_it_knows(tmp_path, monkeypatch, out, mode, boots) -> None:
    fake = tmp_path / "qemu"
    fake.write_text(_FAKE_QEMU.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setattr(guestvm, "QEMU", str(fake))
    monkeypatch.setattr(guestvm, "_PROBE_CPU_BUDGET", 0.3)
    # never reached: a hang is told by the CPU budget (the test's own timeout fails it)
    monkeypatch.setattr(guestvm, "_PROBE_TIMEOUT", 3600.0)
    monkeypatch.setenv("PROBE_OUT", out)
    monkeypatch.setenv("PROBE_MODE", mode)
    image = guestimage.Image(str(tmp_path), "k", "1", "r", ())
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert guestvm._probe_kvm(image, str(scratch)) is boots
    # the stand-in never ends by itself: it was killed (and reaped) once decided
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit()
                and str(fake) in _cmdline(int(pid))]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""

# --- the initramfs ----------------------------------------------------------------------

def test_init_script_mounts_the_host_root_read_only_and_overlays() -> None:
    text = guestimage.init_script()
    assert text.startswith("#!/bin/busybox sh\n")
    assert "mount -t virtiofs -o ro hostroot /newroot" in text
    assert "mount -t ext4 /dev/vda /state" in text
    for d in guestimage.OVERLAY_DIRS:
        assert d in text.split("for d in ", 1)[1].split(";", 1)[0]
    assert "upperdir=/state/$d/upper" in text
    assert "mount -t tmpfs -o mode=0755 tmpfs /newroot/run" in text
    assert "mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp" in text
    assert 'ip addr add "$vcg_ip/$vcg_prefix" dev eth0' in text
    assert guestimage.PROBE_LINE in text
    assert text.rstrip().endswith('"$vcg_python" -m tools.harness.guestinit')


def test_init_script_shows_a_repository_the_guests_tmpfs_would_hide() -> None:
    """A clone in /tmp (its venv too) is bind-mounted from the host's root, kept at
    /run/hostroot, after the guest's own tmpfs went on /tmp and /run."""
    text = guestimage.init_script()
    view = text.index("mount --bind /newroot /hostview")
    assert view < text.index("for d in ")           # before the overlays cover it
    moved = text.index("mount --move /hostview /newroot/run/hostroot")
    assert moved > text.index("tmpfs /newroot/tmp")
    loop = text[moved:]
    assert 'for p in "$vcg_repo" "${vcg_python%/bin/*}"; do' in loop
    assert "/tmp/?*|/run/?*) " in loop
    assert 'mount --bind "/newroot/run/hostroot$p" "/newroot$p"' in loop
    assert loop.index("/newroot/run/hostroot$p") < loop.index("switch_root")


def test_initramfs_entries_hold_busybox_modules_and_init() -> None:
    entries = guestimage.initramfs_entries(b"BB", [("dm_mod", b"M1"), ("drbd", b"M2")])
    names = [name for name, _, _ in entries]
    by_name = {name: (mode, data) for name, mode, data in entries}
    assert by_name["bin/busybox"] == (stat.S_IFREG | 0o755, b"BB")
    assert by_name["lib/modules/drbd.ko"][1] == b"M2"
    assert by_name["etc/modules"][1] == b"dm_mod\ndrbd\n"
    assert by_name["init"][1] == guestimage.init_script().encode()
    for name in names:          # directories come before their contents
        parent = name.rsplit("/", 1)[0]
        if "/" in name:
            assert names.index(parent) < names.index(name)
    tinylinux.newc_archive(entries)     # a valid archive


def test_wanted_modules_cover_storage_and_network() -> None:
    for name in ("virtiofs", "overlay", "dm_mod", "dm_snapshot", "drbd", "virtio_net"):
        assert name in guestimage.WANTED_MODULES


# --- what each node starts with ---------------------------------------------------------

def test_hosts_list_every_node_and_the_cluster() -> None:
    text = guestcluster.hosts_text(_cluster())
    assert "10.213.7.1 cluster.vcluster\n" in text
    assert "10.213.7.3 node3.vcluster node3\n" in text
    assert text.startswith("127.0.0.1 localhost\n")


def test_seed_files_give_the_private_key_to_node1_only() -> None:
    gc = _cluster()
    one = guestcluster.seed_files(gc, gc.nodes[0], "ssh-ed25519 AAA c", "PRIVATE")
    two = guestcluster.seed_files(gc, gc.nodes[1], "ssh-ed25519 AAA c", None)
    assert one["var/upper/lib/ganeti/id_cluster"] == (0o600, "PRIVATE")
    assert not any("id_cluster" in path for path in two)
    assert two["root/upper/.ssh/authorized_keys"] == (0o600, "ssh-ed25519 AAA c\n")
    assert two["etc/upper/hostname"][1] == "node2.vcluster\n"
    assert '"vg_name": "xenvg"' in two["etc/upper/vcluster-guest/guest.json"][1]
    assert "udev_sync = 0" in two["etc/upper/lvm/lvm.conf"][1]
    assert "ListenAddress 10.213.7.2" in two["etc/upper/vcluster-guest/sshd_config"][1]
    assert two["srv/upper/ganeti/os/tinyos/create"][0] == 0o755
    assert two["srv/upper/ganeti/os/tinyos/create"][1].startswith("#!/bin/sh")
    assert all(path.split("/", 1)[0] in guestimage.OVERLAY_DIRS and
               path.split("/")[1] == "upper" for path in two)


def test_guest_environment_runs_the_repository() -> None:
    gc = _cluster()
    env = guestinit.read_env_file(guestcluster.env_text(gc))
    assert env["PYTHONPATH"] == "/repo"
    assert env["PATH"].split(":")[:2] == ["/repo/scripts", "/repo/.venv/bin"]
    assert env["DM_DISABLE_UDEV"] == "1"
    assert "GANETI_ROOTDIR" not in env      # the standard paths inside a guest
    assert "SetEnv PATH=/repo/scripts:" in guestcluster.sshd_config(gc, gc.nodes[0])


def test_read_env_file_skips_comments_and_blank_lines() -> None:
    assert guestinit.read_env_file("# x\n\nA=1\nB=x=y\n") == {"A": "1", "B": "x=y"}


@pytest.mark.parametrize("exists, expected", [
    (False, [["pvcreate", "-ff", "-y", "/dev/vdb", "/dev/vdc"],
             ["vgcreate", "xenvg", "/dev/vdb", "/dev/vdc"]]),
    (True, [["vgchange", "-ay", "xenvg"]]),
], ids=["first-boot", "reboot"])
def test_lvm_setup_commands(exists: bool, expected: list[list[str]]) -> None:
    assert guestinit.lvm_setup_commands("xenvg", ["/dev/vdb", "/dev/vdc"], exists) == expected


def test_lvm_setup_without_disks_does_nothing() -> None:
    assert guestinit.lvm_setup_commands("xenvg", [], False) == []


def test_init_argv_passes_the_vg_only_when_init_accepts_it() -> None:
    gc = _cluster()
    assert "--vg-name" not in guestcluster.init_argv(gc, accepts_vg_name=False)
    argv = guestcluster.init_argv(gc, accepts_vg_name=True)
    assert argv[argv.index("--vg-name") + 1] == "xenvg"
    assert argv[argv.index("--enabled-disk-templates") + 1].split(",")[0] == "plain"
    assert argv[:2] == ["gnt-cluster", "init"] and argv[-1] == "cluster.vcluster"


def test_init_accepts_the_vg_name_now() -> None:
    assert guestcluster.init_accepts_vg_name()


# --- the host's env -----------------------------------------------------------------------

def test_wrapper_script_runs_the_tool_on_the_guest_cluster() -> None:
    text = guestcluster.wrapper_script(_cluster(), "gnt-node")
    assert text.startswith("#!/bin/sh\n")
    assert text.rstrip().endswith(
        "PYTHONPATH=/repo exec /repo/.venv/bin/python -m tools.harness.guestcluster gnt"
        f" {DIR} gnt-node \"$@\"")


def test_env_lines_put_the_wrappers_first() -> None:
    lines = guestcluster.env_lines(_cluster(), "10.213.7.1")
    assert lines[0] == f'export PATH={DIR}/bin:"$PATH"'
    assert "export GANETI_RAPI_BIND=10.213.7.1" in lines


def test_cluster_data_round_trips(tmp_path) -> None:  # type: ignore[no-untyped-def]
    gc = _cluster()
    gc.directory = str(tmp_path)
    gc.save()
    assert guestcluster.is_guest_cluster(str(tmp_path))
    assert guestcluster.load(str(tmp_path)) == gc


def test_create_refuses_bad_arguments_before_making_anything(tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "c"
    with pytest.raises(errors.ParameterError):
        guestcluster.create(str(target), 0)
    with pytest.raises(errors.ParameterError):
        guestcluster.create(str(target), 3, memory_mib=64)
    assert not target.exists()


# --- boot --------------------------------------------------------------------------------

class _FakeGuests:
    """Guests whose qemu dies in early boot ``deaths`` times, then boot and answer SSH."""

    def __init__(self, gc: guestcluster.GuestCluster, deaths: int, *,
                 dies_after_ready: bool = False) -> None:
        self.gc = gc
        self.deaths = deaths
        self.dies_after_ready = dies_after_ready
        self.starts = 0
        self.running = True

    def guest_running(self, spec: guestvm.GuestSpec) -> bool:
        if self.running and self.deaths > 0:
            self.deaths -= 1
            self.running = False
            text = "Kernel panic - not syncing: fake\n"
            if self.dies_after_ready:
                text = f"{guestimage.READY_LINE} {spec.name} x uptime 9\n"
            with open(spec.console_log, "w") as fh:
                fh.write(text)
        return self.running

    def start_guest(self, spec: guestvm.GuestSpec) -> None:
        self.starts += 1
        self.running = True
        with open(spec.console_log, "w") as fh:
            fh.write(f"{guestimage.READY_LINE} {spec.name} x uptime 9\n")


def _boot_fakes(tmp_path, monkeypatch, fakes_args):  # type: ignore[no-untyped-def]
    gc = _cluster(1)
    gc.directory = str(tmp_path)
    os.makedirs(gc.spec(gc.nodes[0]).directory, exist_ok=True)
    fake = _FakeGuests(gc, **fakes_args)
    monkeypatch.setattr(guestvm, "guest_running", fake.guest_running)
    monkeypatch.setattr(guestvm, "start_guest", fake.start_guest)
    ok = guestcluster.RunResult(("true",), 0, None, "", "")
    monkeypatch.setattr(guestcluster, "run_on", lambda *a, **k: ok)
    return gc, fake


def test_a_guest_that_dies_before_its_init_is_powered_on_once_more(
        tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    gc, fake = _boot_fakes(tmp_path, monkeypatch, {"deaths": 1})
    guestcluster.wait_ready(gc, gc.nodes, timeout=5)
    assert fake.starts == 1
    err = capsys.readouterr().err
    assert "node1.vcluster stopped while booting; powering it on again" in err
    assert "Kernel panic - not syncing: fake" in err


def test_a_guest_that_dies_twice_fails_with_its_console(tmp_path, monkeypatch
                                                        ) -> None:  # type: ignore[no-untyped-def]
    gc, fake = _boot_fakes(tmp_path, monkeypatch, {"deaths": 2})
    monkeypatch.setattr(guestvm, "start_guest", lambda spec: setattr(fake, "running", True))
    with pytest.raises(errors.CommandError, match="(?s)stopped while booting.*Kernel panic"):
        guestcluster.wait_ready(gc, gc.nodes, timeout=5)


def test_a_guest_that_dies_after_its_init_ran_is_not_powered_on_again(
        tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    gc, fake = _boot_fakes(tmp_path, monkeypatch, {"deaths": 1, "dies_after_ready": True})
    monkeypatch.setattr(guestcluster, "run_on", lambda *a, **k: guestcluster.RunResult(
        ("true",), 255, None, "", "unreachable"))
    with pytest.raises(errors.CommandError, match="stopped while booting"):
        guestcluster.wait_ready(gc, gc.nodes, timeout=5)
    assert fake.starts == 0
