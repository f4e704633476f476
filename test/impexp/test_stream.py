"""Disk stream frames and progress text."""

from __future__ import annotations

import pytest

from ganeti import errors
from ganeti.impexp import stream as diskstream


def test_frames_decode_from_any_split() -> None:
    data = (diskstream.encode_json(diskstream.HEADER, {"dest": {"kind": "x"}, "total": 3})
            + diskstream.encode(diskstream.DATA, b"abc")
            + diskstream.encode_json(diskstream.END, {"size": 3, "sha256": "h"}))
    for step in (1, 5, len(data)):
        reader = diskstream.FrameReader()
        frames = []
        for i in range(0, len(data), step):
            reader.feed(data[i:i + step])
            frames += list(reader.frames())
        assert [k for k, _ in frames] == [b"H", b"D", b"E"]
        assert frames[1][1] == b"abc" and reader.buffered == 0


@pytest.mark.parametrize("raw, message", [
    (b"Z\0\0\0\0", "unknown frame type"),
    (b"D" + (diskstream.MAX_DATA + 1).to_bytes(4, "big"), "frame of"),
    (b"E" + (10 ** 6).to_bytes(4, "big"), "frame of"),
], ids=["type", "data-too-big", "json-too-big"])
def test_bad_frames_are_refused(raw: bytes, message: str) -> None:
    reader = diskstream.FrameReader()
    reader.feed(raw)
    with pytest.raises(errors.HttpError, match=message):
        list(reader.frames())


def test_progress_text() -> None:
    assert diskstream.format_progress(12 << 20, 64 << 20, 0.5) == \
        "12.0 MiB of 64.0 MiB (18%), 24.0 MiB/s"
    assert diskstream.format_progress(100, None, 0) == "100 B, 0 B/s"
