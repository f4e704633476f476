"""Node side of ``gnt-node volumes``: the disk files below the storage directories."""

from __future__ import annotations

import os

import pytest

from ganeti import errors
from ganeti.backend import storageunits


def test_volume_list_gives_the_regular_files_below_each_directory(ctx) -> None:
    local = ctx.local_path("/srv/ganeti/file-storage")
    os.makedirs(os.path.join(local, "inst1"))
    with open(os.path.join(local, "inst1", "disk0"), "wb") as fh:
        fh.truncate(3 << 20)
    with open(os.path.join(local, "orphan.img"), "wb") as fh:
        fh.write(b"x")
    os.symlink("/etc/passwd", os.path.join(local, "inst1", "link"))
    rows = storageunits.volume_list(ctx, [["file", "/srv/ganeti/file-storage/"],
                                          ["sharedfile", "/srv/ganeti/not-created"]])
    assert sorted(rows) == [["/srv/ganeti/file-storage", "inst1/disk0", 3 << 20],
                            ["/srv/ganeti/file-storage", "orphan.img", 1]]


@pytest.mark.parametrize("unit", [["lvm-vg", "/x"], ["file", "relative"], ["file"], "file"])
def test_volume_list_refuses_bad_units(ctx, unit) -> None:
    with pytest.raises(errors.StorageError, match="Invalid storage unit"):
        storageunits.volume_list(ctx, [unit])
