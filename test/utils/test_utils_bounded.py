"""ganeti.utils.bounded: reads sized by the file, still bounded."""

from __future__ import annotations

import io
import os

import pytest

from ganeti.utils import bounded


class RecordingReader(io.BufferedReader):
    """A file whose reads remember how many bytes each asked for."""

    def __init__(self, raw: io.RawIOBase) -> None:
        super().__init__(raw)
        self.asked: list[int] = []

    def read(self, size: int | None = -1, /) -> bytes:
        self.asked.append(-1 if size is None else size)
        return super().read(size)


def _open(path: str) -> RecordingReader:
    return RecordingReader(io.FileIO(path, "rb"))


def test_a_regular_file_is_read_at_its_size_not_the_limit(tmp_path) -> None:
    path = str(tmp_path / "f")
    with open(path, "wb") as fh:
        fh.write(b"x" * 1000)
    with _open(path) as fh:
        assert bounded.read_limited(fh, 64 * 1024 * 1024) == b"x" * 1000
    # never a 64 MiB buffer: one read of the size plus one, whose short answer is the end
    assert fh.asked == [1001]


@pytest.mark.parametrize("size,limit,expected", [
    (0, 10, 0), (10, 10, 10), (11, 10, 11), (500, 10, 11), (10, 0, 1)])
def test_at_most_the_limit_plus_one_byte(tmp_path, size, limit, expected) -> None:
    path = str(tmp_path / "f")
    with open(path, "wb") as fh:
        fh.write(bytes(i % 251 for i in range(size)))
    with open(path, "rb") as fh:
        data = bounded.read_limited(fh, limit)
    assert data == bytes(i % 251 for i in range(expected))


def test_a_file_without_a_size_is_read_in_chunks_to_its_end() -> None:
    # /proc files say 0 bytes; a pipe has no size either
    rfd, wfd = os.pipe()
    payload = b"y" * (bounded.READ_CHUNK * 2 + 5)
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        os.write(wfd, payload)
        os._exit(0)
    os.close(wfd)
    with open(rfd, "rb") as fh:
        assert bounded.read_limited(fh, 10 * bounded.READ_CHUNK) == payload
    os.waitpid(pid, 0)
    with open("/proc/self/status", "rb") as fh:
        assert b"Name:" in bounded.read_limited(fh, 1 << 20)


def test_a_file_that_grows_after_its_size_was_taken_is_read_to_its_new_end(tmp_path) -> None:
    path = str(tmp_path / "f")
    with open(path, "wb") as fh:
        fh.write(b"a" * 10)

    class Growing(RecordingReader):
        def read(self, size: int | None = -1, /) -> bytes:
            if not self.asked:     # a writer appends between fstat and the first read
                with open(path, "ab") as grow:
                    grow.write(b"b" * 100)
            return super().read(size)

    with Growing(io.FileIO(path, "rb")) as fh:
        assert bounded.read_limited(fh, 1000) == b"a" * 10 + b"b" * 100
        assert fh.asked[0] == 11
    with Growing(io.FileIO(path, "rb")) as fh:   # 110 bytes, growing to 210, limit 150
        assert bounded.read_limited(fh, 150) == (b"a" * 10 + b"b" * 200)[:151]
