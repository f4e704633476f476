"""ganeti.luxi: the codec and the Client against a fake threaded LUXI server."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from ganeti import constants, errors, luxi

# --- a small fake master ------------------------------------------------------

Handler = Callable[[str, list[Any]], Any]


class FakeMaster:
    """A threaded UNIX-socket LUXI server driven by a handler function.

    The handler returns the result, or raises a GanetiError (sent back as an
    encoded failure).  ``chunk`` splits every response into pieces of that
    many bytes, sent with small pauses, to exercise partial reads.
    ``close_after`` closes each connection after that many answers.
    """

    def __init__(self, path: str, handler: Handler, *, chunk: int = 0,
                 close_after: int | None = None, newline: bool = False) -> None:
        self.path = path
        self.handler = handler
        self.chunk = chunk
        self.close_after = close_after
        self.newline = newline
        self.connections = 0
        self.requests: list[tuple[str, list[Any], dict[str, Any]]] = []
        self.raw: list[bytes] = []
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(path)
        self._sock.listen(8)
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn: socket.socket) -> None:
        buf = luxi.FrameBuffer()
        answered = 0
        conn.settimeout(10)
        with conn:
            while not self._stop.is_set():
                try:
                    data = conn.recv(4096)
                except OSError:
                    return
                if not data:
                    return
                for frame in buf.feed(data):
                    self.raw.append(frame)
                    msg = json.loads(frame)
                    self.requests.append((msg["method"], msg["args"], msg))
                    try:
                        reply = luxi.encode_response(True, self.handler(msg["method"], msg["args"]))
                    except errors.GanetiError as exc:
                        reply = luxi.encode_response(False, exc)
                    if self.newline:
                        reply = reply[:-1] + b"\n" + luxi.ETX
                    self._send(conn, reply)
                    answered += 1
                    if self.close_after is not None and answered >= self.close_after:
                        return

    def _send(self, conn: socket.socket, reply: bytes) -> None:
        if not self.chunk:
            conn.sendall(reply)
            return
        for i in range(0, len(reply), self.chunk):
            conn.sendall(reply[i:i + self.chunk])
            time.sleep(0.002)

    def stop(self) -> None:
        self._stop.set()
        self._sock.close()
        self._thread.join(timeout=5)


@pytest.fixture
def sock_path(tmp_path: Any) -> str:
    return str(tmp_path / "ganeti-master")


@pytest.fixture
def make_master(sock_path: str):
    masters: list[FakeMaster] = []

    def make(handler: Handler, **kwargs: Any) -> FakeMaster:
        m = FakeMaster(sock_path, handler, **kwargs)
        masters.append(m)
        return m

    yield make
    for m in masters:
        m.stop()


def echo(method: str, args: list[Any]) -> Any:
    return {"method": method, "args": args}


# --- codec --------------------------------------------------------------------

def test_framebuffer_splits_partial_and_joined_frames() -> None:
    buf = luxi.FrameBuffer()
    assert buf.feed(b'{"a":') == []
    assert buf.pending == 5
    assert buf.feed(b'1}\x03{"b":2}\x03{"c"') == [b'{"a":1}', b'{"b":2}']
    assert buf.pending == 4


def test_framebuffer_rejects_oversized_frame() -> None:
    buf = luxi.FrameBuffer(max_size=10)
    with pytest.raises(errors.ProtocolError):
        buf.feed(b"x" * 11)


def test_non_finite_numbers_never_cross_luxi() -> None:
    # strict JSON both ways: a client cannot send NaN, a server refuses it
    with pytest.raises(errors.SerializationError):
        luxi.encode_request("SubmitJob", [[{"OP_ID": "OP_TEST_DELAY", "duration": float("nan")}]])
    with pytest.raises(errors.ProtocolError, match="NaN"):
        luxi.parse_request(b'{"method": "SubmitJob", "args": [[{"duration": NaN}]]}')
    with pytest.raises(errors.ProtocolError, match="Infinity"):
        luxi.parse_response(b'{"success": true, "result": Infinity}')


def test_request_roundtrip_and_immutability() -> None:
    frame = luxi.encode_request("QueryJobs", [[1], ["id"]])
    assert frame.endswith(luxi.ETX)
    req = luxi.parse_request(frame[:-1])
    assert req == luxi.Request("QueryJobs", [[1], ["id"]], None)
    assert req.method == "QueryJobs" and req.args == [[1], ["id"]]
    with pytest.raises(AttributeError):
        req.method = "x"  # type: ignore[misc]


def test_parse_response_raises_encoded_error() -> None:
    frame = luxi.encode_response(False, errors.OpPrereqError("bad", errors.ECODE_NOENT))
    with pytest.raises(errors.OpPrereqError) as info:
        luxi.parse_response(frame[:-1])
    assert info.value.ecode == errors.ECODE_NOENT
    assert str(info.value) == "bad"


def test_parse_response_plain_text_failure_is_luxi_error() -> None:
    with pytest.raises(errors.LuxiError, match="no such method"):
        luxi.parse_response(b'{"success": false, "result": "no such method"}')


# --- client -------------------------------------------------------------------

def test_client_reuses_one_connection(make_master, sock_path: str) -> None:
    master = make_master(echo)
    with luxi.Client(sock_path) as cl:
        for i in range(1, 6):   # (job ids are positive: the client checks them too)
            assert cl.QueryJobs([i], ["id"]) == {"method": "QueryJobs", "args": [[i], ["id"]]}
    assert master.connections == 1
    assert len(master.requests) == 5


def test_client_reads_frames_across_partial_reads(make_master, sock_path: str) -> None:
    big = ["x" * 50] * 20
    make_master(lambda m, a: big, chunk=7, newline=True)
    cl = luxi.Client(sock_path)
    assert cl.QueryTags("cluster", "") == big
    assert cl.QueryTags("cluster", "") == big
    cl.close()


def test_client_positional_args_match_protocol(make_master, sock_path: str) -> None:
    master = make_master(lambda m, a: None)
    cl = luxi.Client(sock_path)
    op = {"OP_ID": "OP_TEST_DELAY", "duration": 0}
    cl.SubmitJob([op])
    cl.SubmitManyJobs([[op], [op]])
    cl.CancelJob(3)
    cl.CancelJob(4, kill=True)
    cl.ChangeJobPriority(5, -10)
    cl.AutoArchiveJobs(3600, 10)
    cl.Query("job", ["id"], ["==", "id", 1])
    cl.QueryFields("lock", None)
    cl.QueryInstances(["a"], ["name"], False)
    cl.QueryConfigValues(["drain_flag"])
    cl.QueryClusterInfo()
    cl.SetDrainFlag(True)
    cl.SetWatcherPause(None)
    cl.call("ArchiveJob", [9])
    got = [(m, a) for m, a, _ in master.requests]
    assert got == [
        ("SubmitJob", [[op]]),
        ("SubmitManyJobs", [[[op], [op]]]),
        ("CancelJob", [3, False]),
        ("CancelJob", [4, True]),
        ("ChangeJobPriority", [5, -10]),
        ("AutoArchiveJobs", [3600, 10]),
        ("Query", ["job", ["id"], ["==", "id", 1]]),
        ("QueryFields", ["lock", None]),
        ("QueryInstances", [["a"], ["name"], False]),
        ("QueryConfigValues", [["drain_flag"]]),
        ("QueryClusterInfo", []),
        ("SetDrainFlag", [True]),
        ("SetWatcherPause", [None]),
        ("ArchiveJob", [9]),
    ]
    assert all("version" not in msg for _, _, msg in master.requests)


def test_client_sends_version_when_asked(make_master, sock_path: str) -> None:
    master = make_master(lambda m, a: 1)
    luxi.Client(sock_path, version=constants.PROTOCOL_VERSION).QueryClusterInfo()
    assert master.requests[0][2]["version"] == constants.PROTOCOL_VERSION


def test_client_converts_opcode_objects(make_master, sock_path: str) -> None:
    opcodes = pytest.importorskip("ganeti.opcodes")
    master = make_master(lambda m, a: 7)
    op = opcodes.OpTestDelay(duration=1.5, on_nodes=["n1"])
    assert luxi.Client(sock_path).SubmitJob([op]) == 7
    sent = master.requests[0][1][0][0]
    assert sent["OP_ID"] == "OP_TEST_DELAY"
    assert sent["duration"] == 1.5 and sent["on_nodes"] == ["n1"]


def test_client_raises_decoded_errors(make_master, sock_path: str) -> None:
    def handler(method: str, args: list[Any]) -> Any:
        if method == "SubmitJob":
            raise errors.JobQueueDrainError("queue drained")
        raise errors.OpPrereqError("no such job", errors.ECODE_NOENT)

    make_master(handler)
    cl = luxi.Client(sock_path)
    with pytest.raises(errors.JobQueueDrainError, match="queue drained"):
        cl.SubmitJob([{"OP_ID": "OP_TEST_DELAY"}])
    with pytest.raises(errors.OpPrereqError) as info:
        cl.ArchiveJob(1)
    assert info.value.ecode == errors.ECODE_NOENT
    # The connection survives an error answer.
    with pytest.raises(errors.OpPrereqError):
        cl.ArchiveJob(2)


def test_client_no_master_error_names_the_socket(sock_path: str) -> None:
    with pytest.raises(errors.NoMasterError) as info:
        luxi.Client(sock_path).QueryClusterInfo()
    assert sock_path in str(info.value)
    assert "Is it running" in str(info.value)


def test_client_no_master_error_when_refused(sock_path: str) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(sock_path)  # bound but not listening: connection refused
    try:
        with pytest.raises(errors.NoMasterError):
            luxi.Client(sock_path).QueryClusterInfo()
    finally:
        s.close()


@pytest.mark.parametrize("root", [None, "/", "rel/dir", "/tmp/x/../y"])
def test_default_address_matches_pathutils(root: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    from ganeti import pathutils
    if root is None:
        monkeypatch.delenv(constants.ENV_ROOTDIR, raising=False)
    else:
        monkeypatch.setenv(constants.ENV_ROOTDIR, root)
    assert luxi.Client().address == pathutils.get_paths().master_socket


def test_client_default_address_from_rootdir(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(constants.ENV_ROOTDIR, str(tmp_path))
    cl = luxi.Client()
    assert cl.address == os.path.join(str(tmp_path), "var/run/ganeti/socket/ganeti-master")


def test_wait_for_job_change_retries_on_nochange(make_master, sock_path: str) -> None:
    answers = iter([luxi.JOB_NOTCHANGED, luxi.JOB_NOTCHANGED, [["success"], []]])
    master = make_master(lambda m, a: next(answers))
    cl = luxi.Client(sock_path)
    assert cl.WaitForJobChange(4, ["status"], None, -1) == [["success"], []]
    assert [a for _, a, _ in master.requests] == [
        [4, ["status"], None, -1, constants.LUXI_WFJC_TIMEOUT]] * 3


def test_wait_for_job_change_once_returns_nochange(make_master, sock_path: str) -> None:
    make_master(lambda m, a: luxi.JOB_NOTCHANGED)
    assert luxi.Client(sock_path).WaitForJobChangeOnce(1, ["status"], None, -1, 1) == "nochange"


def test_wait_for_job_change_max_wait_gives_up(make_master, sock_path: str) -> None:
    now = [0.0]

    def handler(method: str, args: list[Any]) -> Any:
        now[0] += args[4]  # the server "waits" its whole timeout
        return luxi.JOB_NOTCHANGED

    master = make_master(handler)
    cl = luxi.Client(sock_path)
    result = cl.WaitForJobChange(1, ["status"], None, -1, max_wait=200, clock=lambda: now[0])
    assert result == luxi.JOB_NOTCHANGED
    timeouts = [a[4] for _, a, _ in master.requests]
    assert timeouts == [89, 89, 22]


def test_idempotent_call_reconnects_once(make_master, sock_path: str) -> None:
    master = make_master(echo, close_after=1)
    cl = luxi.Client(sock_path)
    assert cl.QueryJobs(None, ["id"])["method"] == "QueryJobs"
    time.sleep(0.05)  # the master has closed the connection by now
    assert cl.QueryJobs(None, ["id"])["method"] == "QueryJobs"
    assert master.connections == 2


def test_submit_on_stale_connection_reconnects_before_sending(make_master, sock_path: str) -> None:
    master = make_master(lambda m, a: 11, close_after=1)
    cl = luxi.Client(sock_path)
    cl.QueryClusterInfo()
    time.sleep(0.05)
    assert cl.SubmitJob([{"OP_ID": "OP_TEST_DELAY"}]) == 11
    assert [m for m, _, _ in master.requests] == ["QueryClusterInfo", "SubmitJob"]


def test_submit_is_not_resent_when_answer_is_lost(sock_path: str) -> None:
    # A master that reads the request and closes without answering.
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(4)
    seen: list[bytes] = []

    def serve() -> None:
        srv.settimeout(5)
        for _ in range(3):
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                seen.append(conn.recv(65536))

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        cl = luxi.Client(sock_path, rw_timeout=10)
        with pytest.raises(errors.ConnectionClosedError):
            cl.SubmitJob([{"OP_ID": "OP_TEST_DELAY"}])
        assert len(seen) == 1
        # An idempotent call is re-sent once (a second connection), then fails.
        with pytest.raises(errors.ConnectionClosedError):
            cl.QueryJobs(None, ["id"])
        assert len(seen) == 3
    finally:
        srv.close()
        t.join(timeout=5)


def test_read_timeout_raises_and_drops_connection(sock_path: str) -> None:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(1)
    try:
        cl = luxi.Client(sock_path, rw_timeout=0.2)
        with pytest.raises(errors.LuxiTimeoutError):
            cl.QueryClusterInfo()
        assert cl._sock is None
    finally:
        srv.close()


def test_garbage_response_is_protocol_error(sock_path: str) -> None:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(1)

    def serve() -> None:
        srv.settimeout(5)
        conn, _ = srv.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"not json\x03")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        with pytest.raises(errors.ProtocolError):
            luxi.Client(sock_path).QueryClusterInfo()
    finally:
        t.join(timeout=5)
        srv.close()


def test_ops_must_be_a_list() -> None:
    with pytest.raises(errors.ProgrammerError):
        luxi.Client("/nonexistent").SubmitJob({"OP_ID": "x"})  # type: ignore[arg-type]


def test_numbers_beyond_the_float_range_are_refused_at_the_input() -> None:
    with pytest.raises(errors.ProtocolError, match="out of range"):
        luxi.parse_request(b'{"method": "SubmitJob", "args": [[{"OP_ID": "OP_TEST_DELAY",'
                           b' "duration": 1e400}]]}')


def test_lone_surrogates_are_refused_in_requests() -> None:
    with pytest.raises(errors.ProtocolError, match="lone surrogate"):
        luxi.parse_request(b'{"method": "SubmitJob", "args": [[{"OP_ID": "OP_TEST_DELAY",'
                           b' "duration": 0, "comment": "x\\ud800"}]]}')
    # responses carry stored data: a client shows it rather than refusing it
    assert luxi.parse_response(b'{"success": true, "result": "x\\ud800"}') == "x\ud800"


@pytest.mark.parametrize("method,args,needle", [
    ("CancelJob", [{"a": 1}], "'job_id' must be a job id"),
    ("CancelJob", [1, "yes"], "'kill' must be a boolean"),
    ("QueryJobs", [[{"a": 1}], ["id"]], r"'job_ids\[0\]' must be a job id"),
    ("QueryJobs", [None, "id"], "'fields' must be a list of strings"),
    ("QueryJobs", [[2 ** 64], ["id"]], r"'job_ids\[0\]' must be a job id"),
    ("ArchiveJob", [0], "must be a job id"),
    ("SubmitJob", [{"OP_ID": "OP_TEST_DELAY"}], "'ops' must be a list of objects"),
    ("SubmitManyJobs", [[{"OP_ID": "OP_TEST_DELAY"}]], r"'jobs\[0\]' must be a list of objects"),
    ("WaitForJobChange", [1, ["status"], None, "x", 10], "'prev_log_serial'"),
    ("SetDrainFlag", [1], "'flag' must be a boolean"),
    ("SetWatcherPause", ["soon"], "'until' must be a number or null"),
    ("QueryTags", [["cluster"], None], "'kind' must be a string"),
    ("QueryClusterInfo", [1], "takes 0 argument"),
    ("CancelJob", [], "takes 1 to 2 argument"),
], ids=lambda v: v if isinstance(v, str) and " " not in v and "'" not in v else None)
def test_check_args_refuses_wrong_types(method: str, args: list[Any], needle: str) -> None:
    with pytest.raises(errors.ParameterError, match=needle) as info:
        luxi.check_args(method, args)
    assert info.value.args[1] == errors.ECODE_INVAL


@pytest.mark.parametrize("method,args", [
    ("CancelJob", [3]), ("CancelJob", ["3", True]), ("QueryJobs", [None, ["id", "status"]]),
    ("QueryJobs", [[1, "2"], []]), ("WaitForJobChange", [1, ["status"], None, None, 5.5]),
    ("Query", ["instance", ["name"], ["=", "name", "x"]]), ("QueryFields", ["node", None]),
    ("QueryNodes", [None, ["name"], False]), ("SetWatcherPause", [None]),
    ("QueryTags", ["cluster", None]), ("AutoArchiveJobs", [-1, 10.0]),
])
def test_check_args_accepts_what_clients_send(method: str, args: list[Any]) -> None:
    luxi.check_args(method, args)


def test_idempotent_methods_are_the_rows_marked_so() -> None:
    assert luxi.IDEMPOTENT_METHODS == {m.name for m in luxi.METHODS.values() if m.idempotent}
    assert not {"SubmitJob", "SubmitJobToDrainedQueue", "SubmitManyJobs",
                "PickupJob"} & luxi.IDEMPOTENT_METHODS
