"""``ganeti-iallocator INPUT_FILE``: prints the answer like hail, run as a program."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from fakes.allocdocs import scenario

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "ganeti-iallocator"


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


def test_prints_the_answer_like_hail(tmp_path):
    path = tmp_path / "alloc.json"
    path.write_text(json.dumps(scenario("alloc-mirrored")))
    res = _run(str(path))
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)
    assert answer["success"] is True and answer["result"] == ["node2", "node1"]


def test_reads_stdin_and_takes_hails_options():
    text = json.dumps(scenario("tags-everywhere"))
    assert json.loads(_run("-", stdin=text).stdout)["success"] is False
    res = _run("--ignore-soft-errors", "--unknown=1", "-", stdin=text)
    assert json.loads(res.stdout)["success"] is True


def test_invalid_input_fails_with_a_message(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    res = _run(str(bad))
    assert res.returncode == 1 and "request" in res.stderr and res.stdout == ""
    assert _run().returncode == 2
