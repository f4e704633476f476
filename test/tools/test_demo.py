"""tools/demo (``make demo``): its options are checked before anything is done."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parents[2] / "tools" / "demo"


def _demo(*args: str, directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(DEMO), *args], capture_output=True, text=True,
                          timeout=60, check=False,
                          env={**os.environ, "GANETI_DEMO_DIR": str(directory)})


def _earlier_run(tmp_path: Path) -> Path:
    """A demo directory as an earlier run leaves it (here: one file of it)."""
    directory = tmp_path / "demo-cluster"
    directory.mkdir()
    (directory / "vcluster.json").write_text("{}")
    return directory


def test_help_explains_the_options_and_leaves_an_earlier_cluster(tmp_path) -> None:
    directory = _earlier_run(tmp_path)
    res = _demo("--help", directory=directory)
    assert res.returncode == 0, res.stderr
    for option in ("--kvm", "--storage", "--no-cloud-init", "GANETI_DEMO_DIR"):
        assert option in res.stdout
    assert (directory / "vcluster.json").read_text() == "{}"


def test_a_wrong_option_is_refused_before_anything_is_done(tmp_path) -> None:
    directory = _earlier_run(tmp_path)
    for args, message in ((["--kvn"], "unrecognized arguments: --kvn"),
                          (["--kvm", "--storage"], "not allowed with argument"),
                          (["--no-cloud-init"], "--no-cloud-init goes with --kvm")):
        res = _demo(*args, directory=directory)
        assert res.returncode == 2, res.stdout + res.stderr
        assert message in res.stderr
        assert "Creating" not in res.stdout
        assert (directory / "vcluster.json").read_text() == "{}"
