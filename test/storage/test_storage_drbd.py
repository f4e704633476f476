"""Tests for ganeti.storage.drbd: the /proc/drbd parser on real DRBD 8.4 samples,
the side lookup, and the device against a recording command runner (no DRBD needed)."""

from __future__ import annotations

import pytest

from fakes.cmdrunner import RecordingRunner

from ganeti import constants, errors, pathutils, storage
from ganeti.storage import base, drbd, tree

# taken from a DRBD 8.4.11 guest: connected, a resync running, a secondary during a
# sync (with "want:"), a standalone primary, an unconfigured minor
PROC = """\
version: 8.4.11 (api:1/proto:86-101)
srcversion: F73C670A7EC572DB9CF3E5B
 0: cs:Connected ro:Primary/Secondary ds:UpToDate/UpToDate C r-----
    ns:65536 nr:0 dw:0 dr:65536 al:8 bm:0 lo:0 pe:0 ua:0 ap:0 ep:1 wo:f oos:0
 1: cs:SyncSource ro:Primary/Secondary ds:UpToDate/Inconsistent C r-----
    ns:69904 nr:0 dw:0 dr:69904 al:8 bm:0 lo:0 pe:0 ua:0 ap:0 ep:1 wo:f oos:61168
\t[==>.................] sync'ed: 17.7% (61168/65536)K
\tfinish: 0:00:27 speed: 2,184 (2,184) K/sec
 2: cs:SyncTarget ro:Secondary/Primary ds:Inconsistent/UpToDate C r-----
    ns:0 nr:76560 dw:76560 dr:0 al:8 bm:0 lo:0 pe:0 ua:0 ap:0 ep:1 wo:f oos:54512
\t[===>................] sync'ed: 23.6% (54512/65536)K
\tfinish: 1:02:03 speed: 2,204 (2,204) want: 2,048 K/sec
 3: cs:StandAlone ro:Primary/Unknown ds:UpToDate/DUnknown   r-----
    ns:0 nr:0 dw:0 dr:0 al:8 bm:0 lo:0 pe:0 ua:0 ap:0 ep:1 wo:f oos:65536
 4: cs:Unconfigured
 5: cs:WFConnection ro:Secondary/Unknown ds:Diskless/DUnknown C r-----
"""
SECRET = "0123456789abcdef0123456789abcdef01234567"
NODE_A, NODE_B = "uuid-a", "uuid-b"


def _spec(minors=(3, 7), nodes=(("node1", "10.0.0.1"), ("node2", "10.0.0.2")), **kw):
    children = (
        base.DiskSpec(uuid="c-data", size=1024, logical_id=("xenvg", "d.disk0_data"),
                      dev_type=constants.DT_PLAIN),
        base.DiskSpec(uuid="c-meta", size=128, logical_id=("xenvg", "d.disk0_meta"),
                      dev_type=constants.DT_PLAIN))
    args = dict(uuid="d", size=1024, dev_type=constants.DT_DRBD8,
                logical_id=(NODE_A, NODE_B, 11005, minors[0], minors[1], SECRET),
                children=children,
                dynamic={"drbd_nodes": [list(n) for n in nodes]} if nodes else {})
    args.update(kw)
    return base.DiskSpec(**args)


def _device(runner, proc="", hostname="node1"):
    return drbd.DrbdDevice(pathutils.Paths("/"), hostname=hostname, runner=runner,
                           read_status=lambda: proc)


def test_parse_proc_drbd_every_state():
    found = drbd.parse_proc_drbd(PROC)
    assert sorted(found) == [0, 1, 2, 3, 4, 5]
    ok = found[0]
    assert (ok.cstate, ok.role, ok.peer_role, ok.disk, ok.peer_disk) == \
        ("Connected", "Primary", "Secondary", "UpToDate", "UpToDate")
    assert ok.sync_percent is None and not ok.is_degraded and ok.ldisk_status == "ok"
    src = found[1]
    assert src.in_resync and src.connected and src.is_degraded
    assert (src.sync_percent, src.est_time, src.out_of_sync, src.speed) == \
        (17.7, 27, 61168, 2184)
    assert src.ldisk_status == constants.LDS_OKAY          # the source's own data is fine
    tgt = found[2]
    assert (tgt.sync_percent, tgt.est_time, tgt.speed) == (23.6, 3723, 2204)
    assert ok.speed is None
    assert tgt.ldisk_status == constants.LDS_UNKNOWN and tgt.is_degraded
    alone = found[3]
    assert not alone.connected and alone.is_degraded and alone.sync_percent is None
    assert not found[4].configured
    assert found[5].ldisk_status == constants.LDS_FAULTY


def test_parse_proc_drbd_without_module_or_minors():
    assert drbd.parse_proc_drbd("") == {}
    assert drbd.parse_proc_drbd("version: 8.4.11 (api:1/proto:86-101)\n") == {}


def test_local_side_finds_each_end():
    a = drbd.local_side(_spec(), "node1")
    b = drbd.local_side(_spec(), "node2")
    assert (a.minor, a.address, a.peer_minor, a.peer_address, a.port) == \
        (3, "10.0.0.1", 7, "10.0.0.2", 11005)
    assert (b.minor, b.address, b.peer_minor, b.peer_address) == (7, "10.0.0.2", 3, "10.0.0.1")
    assert SECRET not in repr(a)


@pytest.mark.parametrize("spec, match", [
    (_spec(nodes=None), "did not send"),
    (_spec(logical_id=(NODE_A, NODE_B, 1)), "6 fields"),
    (_spec(logical_id=(NODE_A, NODE_B, "x", 1, 2, SECRET)), "port"),
    (_spec(logical_id=(NODE_A, NODE_B, 11000, -1, 2, SECRET)), "minor"),
    (_spec(logical_id=(NODE_A, NODE_B, 11000, 1, 2, "")), "secret"),
    (_spec(nodes=(("node8", "10.0.0.8"), ("node9", "10.0.0.9"))), "not one of"),
], ids=["no-nodes", "short", "port", "minor", "secret", "stranger"])
def test_local_side_refuses_bad_descriptions(spec, match):
    with pytest.raises(errors.StorageError, match=match) as exc:
        drbd.local_side(spec, "node1")
    assert SECRET not in str(exc.value)


def test_create_writes_metadata_on_a_free_minor():
    runner = RecordingRunner()
    dev = _device(runner, proc="version: 8.4.11\n")
    assert dev.create(_spec()) == "/dev/drbd3"
    assert runner.calls == [["drbdmeta", "--force", "/dev/drbd3", "v08",
                             "/dev/xenvg/d.disk0_meta", "0", "create-md"]]


def test_create_refuses_a_minor_in_use():
    runner = RecordingRunner()
    with pytest.raises(errors.StorageError, match="minor 3 is already in use"):
        _device(runner, proc=PROC).create(_spec())
    assert runner.calls == []


def test_activate_new_on_the_primary_forces_it_primary_before_it_connects():
    """The initial full sync starts with the first handshake: the primary's new data
    generation exists before the sides meet (forced after the connect, it could cross
    their handshake and leave them Connected with no resync)."""
    runner = RecordingRunner()
    _device(runner).activate_new(_spec(minors=(9, 7)), on_primary=True)
    s = "/lib/drbd/drbdsetup-84"
    assert runner.calls == [
        [s, "new-resource", "resource9"],
        [s, "new-minor", "resource9", "9", "0"],
        ["drbdmeta", "/dev/drbd9", "v08", "/dev/xenvg/d.disk0_meta", "0", "apply-al"],
        [s, "attach", "9", "/dev/xenvg/d.disk0_data", "/dev/xenvg/d.disk0_meta", "0",
         "--on-io-error=detach", f"--resync-rate={drbd.DEFAULT_RESYNC_RATE}k"],
        [s, "primary", "9", "--force"],
        [s, "connect", "resource9", "ipv4:10.0.0.1:11005", "ipv4:10.0.0.2:11005",
         "--protocol=C", "--cram-hmac-alg=md5", f"--shared-secret={SECRET}",
         "--after-sb-0pri=discard-zero-changes", "--after-sb-1pri=consensus",
         "--after-sb-2pri=disconnect"]]


def test_a_dual_primary_connection_waits_five_seconds_for_a_ping_answer():
    # DRBD's own half second made a stalled (loaded, virtual) peer drop a healthy
    # connection; with two primaries (a live migration) that ends in a split brain.
    # Its socket check stays at the half second every single-primary connection
    # waits (DRBD's default is one ping timeout: 5 s more per migration).  One
    # primary keeps DRBD's defaults (doc/storage.md, "DRBD figures")
    side = drbd.local_side(_spec(minors=(9, 7)), "node1")
    dual = drbd.Drbd84().connect(side, dual_primary=True)
    assert dual[-3:] == ["--allow-two-primaries=yes", "--ping-timeout=50",
                         "--socket-check-timeout=5"]
    single = drbd.Drbd84().connect(side)
    assert single == dual[:-3]
    assert not any(a.startswith(("--ping-timeout", "--allow-two", "--socket-check"))
                   for a in single)


@pytest.mark.parametrize("custom, added", [
    ([], ["--ping-timeout=50", "--socket-check-timeout=5"]),
    (["--ping-int=5"], ["--ping-timeout=50", "--socket-check-timeout=5"]),
    # the operator's socket check wins (0: DRBD's own, one ping timeout)
    (["--socket-check-timeout=0"], ["--ping-timeout=50"]),
    # the operator's ping timeout wins, and with it DRBD's socket check
    (["--ping-timeout=100"], []),
    (["--ping-timeout=100", "--socket-check-timeout=3"], [])])
def test_the_dual_primary_timeouts_give_way_to_the_operators(custom, added):
    assert drbd.dual_primary_timeouts(custom) == added


def test_the_operators_custom_options_go_to_connect_and_attach():
    # doc/storage.md, "DRBD parameters": net-custom / disk-custom; a custom
    # --ping-timeout replaces the default one
    spec = _spec(minors=(9, 7), dynamic={
        "drbd_nodes": [["node1", "10.0.0.1"], ["node2", "10.0.0.2"]],
        "net_custom": ["--ping-timeout=100", "--ping-int=5"],
        "disk_custom": ["--al-extents=3389"]})
    runner = RecordingRunner()
    _device(runner).activate_new(spec, on_primary=False)
    attach = next(c for c in runner.calls if c[1] == "attach")
    connect = next(c for c in runner.calls if c[1] == "connect")
    assert attach[-1] == "--al-extents=3389"
    assert connect[-2:] == ["--ping-timeout=100", "--ping-int=5"]
    dual = drbd.Drbd84().connect(drbd.local_side(spec, "node1"), dual_primary=True)
    assert dual[-3:] == ["--ping-timeout=100", "--ping-int=5", "--allow-two-primaries=yes"]
    assert "--ping-timeout=50" not in dual                # the operator's, not the default
    assert not any(a.startswith("--socket-check") for a in dual)


@pytest.mark.parametrize("key, words", [
    ("net_custom", ["--shared-secret=x"]), ("net_custom", ["--after-sb-2pri=discard"]),
    ("disk_custom", ["--on-io-error=pass_on"]), ("disk_custom", ["al-extents"]),
    ("net_custom", ["--ping-int=5;reboot"]), ("net_custom", "--ping-int=5")])
def test_a_node_refuses_custom_options_it_does_not_accept(key, words):
    spec = _spec(dynamic={"drbd_nodes": [["node1", "10.0.0.1"], ["node2", "10.0.0.2"]],
                          key: words})
    runner = RecordingRunner()
    with pytest.raises(errors.StorageError, match=f"DRBD {key}|invalid DRBD {key}"):
        _device(runner).activate_new(spec, on_primary=False)
    assert runner.calls == [] or all(c[1] != "connect" for c in runner.calls)


def test_activate_new_on_the_secondary_never_becomes_primary():
    runner = RecordingRunner()
    _device(runner, hostname="node2").activate_new(_spec(minors=(9, 8)), on_primary=False)
    assert [c[1] for c in runner.calls] == ["new-resource", "new-minor", "/dev/drbd8",
                                            "attach", "connect"]
    assert runner.calls[-1][3:5] == ["ipv4:10.0.0.2:11005", "ipv4:10.0.0.1:11005"]


def _changes(runner):
    """The recorded commands other than ``drbdsetup show`` (which only reads)."""
    return [c for c in runner.calls if c[1:2] != ["show"]]


def test_activate_new_on_the_primary_still_forces_a_side_already_connected():
    """A retried activation of a side that is connected already (minor 0 of PROC)
    has no connect to precede: it is still made primary with force."""
    runner = RecordingRunner()
    _device(runner, proc=PROC).activate_new(_spec(minors=(0, 1)), on_primary=True)
    assert _changes(runner) == [["/lib/drbd/drbdsetup-84", "primary", "0", "--force"]]


def test_assemble_only_does_what_is_missing():
    # minor 3 is configured and standalone: only the connection is made again
    runner = RecordingRunner()
    assert _device(runner, proc=PROC).assemble(_spec()) == "/dev/drbd3"
    assert [c[1] for c in _changes(runner)] == ["connect"]
    assert runner.calls[0] == ["/lib/drbd/drbdsetup-84", "show", "3"]   # its setup is read
    # minor 0 is connected: nothing at all
    runner = RecordingRunner()
    _device(runner, proc=PROC).assemble(_spec(minors=(0, 1)))
    assert _changes(runner) == []
    # minor 5 lost its disk: attach (after the activity log), no new connection
    runner = RecordingRunner()
    _device(runner, proc=PROC).assemble(_spec(minors=(5, 1)))
    assert [c[-1] if c[0] == "drbdmeta" else c[1] for c in _changes(runner)] == \
        ["apply-al", "attach"]


def _show(remote="10.0.0.2:11005", local="10.0.0.1:11005",
          disk="/dev/xenvg/d.disk0_data", meta="/dev/xenvg/d.disk0_meta"):
    """``drbdsetup show`` of a DRBD 8.4.11 guest's connected device (the secret cut)."""
    return f"""\
resource resource0 {{
    options {{
    }}
    net {{
        cram-hmac-alg     \t"md5";
        shared-secret     \t"<cut>";
        after-sb-0pri     \tdiscard-zero-changes;
    }}
    _remote_host {{
        address\t\t\tipv4 {remote};
    }}
    _this_host {{
        address\t\t\tipv4 {local};
        volume 0 {{
            device\t\t\tminor 0;
            disk\t\t\t"{disk}";
            meta-disk\t\t\t"{meta}" [ 0 ];
            disk {{
                on-io-error     \tdetach;
            }}
        }}
    }}
}}
"""


def test_parse_show_and_mismatch():
    from ganeti.storage import drbd_show
    shown = drbd_show.parse_show(_show())
    assert shown == drbd_show.DrbdShow(local="10.0.0.1:11005", remote="10.0.0.2:11005",
                                       disk="/dev/xenvg/d.disk0_data",
                                       meta="/dev/xenvg/d.disk0_meta")
    want = dict(local="10.0.0.1:11005", remote="10.0.0.2:11005",
                disk="/dev/xenvg/d.disk0_data", meta="/dev/xenvg/d.disk0_meta")
    assert drbd_show.mismatch(shown, **want) is None
    wrong = drbd_show.parse_show(_show(remote="10.0.0.9:11005"))
    assert drbd_show.mismatch(wrong, **want) == \
        "is connected to the wrong peer 10.0.0.9:11005 (configured: 10.0.0.2:11005)"
    other = drbd_show.parse_show(_show(disk="/dev/xenvg/x.disk0_data"))
    assert "wrong data volume /dev/xenvg/x.disk0_data" in drbd_show.mismatch(other, **want)
    # a standalone, diskless device shows no addresses nor volumes: nothing to compare
    bare = drbd_show.parse_show("resource resource0 {\n    options {\n    }\n}\n")
    assert bare == drbd_show.DrbdShow() and drbd_show.mismatch(bare, **want) is None


def test_assemble_connects_a_device_on_the_wrong_peer_to_the_right_one():
    runner = RecordingRunner().on("/lib/drbd/drbdsetup-84", "show",
                                  stdout=_show(remote="10.0.0.9:11005"))
    dev = _device(runner, proc=PROC)
    assert dev.setup_mismatch(_spec(minors=(0, 1))) == \
        "is connected to the wrong peer 10.0.0.9:11005 (configured: 10.0.0.2:11005)"
    runner.calls.clear()
    dev.assemble(_spec(minors=(0, 1)))
    assert _changes(runner)[0] == ["/lib/drbd/drbdsetup-84", "disconnect",
                                   "ipv4:10.0.0.1:11005", "ipv4:10.0.0.9:11005"]


def test_assemble_refuses_a_minor_set_up_on_other_volumes():
    runner = RecordingRunner().on("/lib/drbd/drbdsetup-84", "show",
                                  stdout=_show(disk="/dev/xenvg/other.disk0_data"))
    with pytest.raises(errors.StorageError, match="not this disk's device"):
        _device(runner, proc=PROC).assemble(_spec(minors=(0, 1)))
    assert _changes(runner) == []


def test_failures_name_the_disk_and_hide_the_secret():
    runner = RecordingRunner().on("/lib/drbd/drbdsetup-84", "connect", rc=10,
                                  stderr="Failure: (102) Local address(port) already in use.")
    with pytest.raises(errors.StorageError) as exc:
        _device(runner).assemble(_spec())
    text = str(exc.value)
    assert "minor 3 of disk d (connect)" in text and "already in use" in text
    assert SECRET not in text


def test_shutdown_and_remove_are_idempotent():
    runner = RecordingRunner()
    dev = _device(runner, proc=PROC)
    dev.shutdown(_spec())
    assert runner.calls == [["/lib/drbd/drbdsetup-84", "down", "resource3"]]
    runner = RecordingRunner()
    _device(runner, proc=PROC).remove(_spec(minors=(4, 1)))   # unconfigured: nothing to do
    assert runner.calls == []


def test_open_and_close():
    runner = RecordingRunner()
    dev = _device(runner, proc=PROC)
    dev.open(_spec())
    dev.close(_spec())
    assert runner.calls == [["/lib/drbd/drbdsetup-84", "primary", "3"],
                            ["/lib/drbd/drbdsetup-84", "secondary", "3"]]


def test_mirror_status_of_this_side():
    dev = _device(RecordingRunner(), proc=PROC, hostname="node2")
    status = dev.mirror_status(_spec(minors=(9, 1)))
    assert status is not None and status.in_resync and status.role == "Primary"
    assert dev.mirror_status(_spec(minors=(9, 4))) is None


def test_registered_and_built_with_the_node_name():
    dev = storage.get_storage(constants.DT_DRBD8, pathutils.Paths("/"), hostname="node2")
    assert isinstance(dev, drbd.DrbdDevice) and dev.hostname == "node2"


def test_tree_creates_volumes_first_then_the_metadata():
    runner = RecordingRunner().on("vgs", stdout="  xenvg|4092.00|4092.00|1\n")
    factory = storage.device_factory(pathutils.Paths("/"), runner=runner, hostname="node1")
    device = factory(constants.DT_DRBD8)
    assert isinstance(device, drbd.DrbdDevice)
    device.read_status = lambda: ""
    assert tree.create_tree(factory, _spec()) == "/dev/drbd3"
    made = [c for c in runner.calls if c[0] in ("lvcreate", "drbdmeta")]
    assert [c[0] for c in made] == ["lvcreate", "lvcreate", "drbdmeta"]
    assert "d.disk0_data" in made[0] and "d.disk0_meta" in made[1]


def test_the_resync_rate_from_the_master_is_used():
    runner = RecordingRunner()
    spec = _spec(minors=(9, 7))
    spec = base.DiskSpec(**{**spec.__dict__, "dynamic": {**spec.dynamic, "resync_rate": 2048}})
    _device(runner).assemble(spec)
    attach = [c for c in runner.calls if c[1:2] == ["attach"]]
    assert attach and attach[0][-1] == "--resync-rate=2048k"
    # the resync controller's options follow; anything else the master sent is left out
    runner = RecordingRunner()
    control = {"c-plan-ahead": "20", "c-max-rate": "30720k", "c-min-rate": "4096k",
               "shared-secret": "x", "c-fill-target": "1; rm"}
    spec = base.DiskSpec(**{**spec.__dict__, "dynamic": {**spec.dynamic,
                                                         "resync_control": control}})
    _device(runner).assemble(spec)
    attach = [c for c in runner.calls if c[1:2] == ["attach"]][0]
    assert attach[attach.index("--resync-rate=2048k") + 1:] == [
        "--c-max-rate=30720k", "--c-min-rate=4096k", "--c-plan-ahead=20"]
