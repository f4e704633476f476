"""Output of the gnt-* tools (ganeti/cli/output.py): stored data never crashes it."""

from __future__ import annotations

import io

import pytest

from ganeti.cli import output


@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_lines_with_unencodable_text_are_written_escaped(monkeypatch, encoding: str) -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding, errors="strict")
    monkeypatch.setattr("sys.stdout", stream)
    output.to_stdout("job 1 comment x\ud800 caf\u00e9")
    output.to_stdout("next")
    text = raw.getvalue().decode(encoding)
    assert text.startswith("job 1 comment x\\ud800 caf")
    assert text.endswith("\nnext\n") and text.count("\n") == 2
