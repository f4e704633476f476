"""server/tuning.py: the daemon runner applies a daemon's process tuning around its
prepare step (no collections while it loads, then what it loaded frozen)."""

from __future__ import annotations

import gc
from typing import Any

from ganeti.pathutils import Paths
from ganeti.server import daemon, tuning


def test_the_runner_freezes_what_prepare_loaded(tmp_path: Any) -> None:
    seen: dict[str, Any] = {}

    def prepare(runtime: daemon.DaemonRuntime) -> list[object]:
        seen["enabled_while_preparing"] = gc.isenabled()
        return [object() for _ in range(100)]

    def serve(runtime: daemon.DaemonRuntime, state: list[object]) -> None:
        seen["enabled_while_serving"] = gc.isenabled()
        seen["frozen"] = gc.get_freeze_count()

    gc.unfreeze()
    try:
        code = daemon.run_daemon("ganeti-testd", prepare_fn=prepare, exec_fn=serve, argv=["-f"],
                                 paths=Paths(root=str(tmp_path)),
                                 tuning=tuning.Tuning(freeze_after_prepare=True))
    finally:
        gc.unfreeze()
        gc.enable()
    assert code == 0
    assert seen["enabled_while_preparing"] is False and seen["enabled_while_serving"] is True
    assert seen["frozen"] >= 100


def test_without_tuning_nothing_is_frozen(tmp_path: Any) -> None:
    seen: dict[str, Any] = {}

    def serve(runtime: daemon.DaemonRuntime, state: Any) -> None:
        seen["frozen"] = gc.get_freeze_count()
        seen["enabled"] = gc.isenabled()

    gc.unfreeze()
    assert daemon.run_daemon("ganeti-testd", exec_fn=serve, argv=["-f"],
                             paths=Paths(root=str(tmp_path))) == 0
    assert seen == {"frozen": 0, "enabled": True}


def test_the_masterd_and_rapi_tunings() -> None:
    assert tuning.MASTERD == tuning.Tuning(malloc_arenas=2, fixed_mmap_threshold=True,
                                           freeze_after_prepare=True)
    assert tuning.RAPI == tuning.Tuning(malloc_arenas=2, fixed_mmap_threshold=True,
                                        freeze_after_prepare=True)
