"""A node's cache of store images (ganeti/backend/osimage.py, doc/images.md)."""

from __future__ import annotations

import base64
import os

import pytest

from ganeti import errors
from ganeti.backend import osimage

INST = "img1.example.com"
SHA = "cd" * 32


def _stage(ctx, data: bytes) -> None:
    osimage.os_image_put_chunk(ctx, INST, 0, base64.b64encode(data).decode())


def _staged(ctx) -> bytes:
    with open(os.path.join(ctx.paths.os_image_dir, f"{INST}.image"), "rb") as fh:
        return fh.read()


def test_keep_then_stage_from_the_cache(ctx):
    assert osimage.os_image_cache_stage(ctx, INST, SHA) is False
    _stage(ctx, b"image bytes")
    osimage.os_image_cache_keep(ctx, INST, SHA)
    osimage.os_image_remove(ctx, INST)
    assert osimage.os_image_cache_stage(ctx, INST, SHA) is True
    assert _staged(ctx) == b"image bytes"


def test_a_new_push_does_not_touch_the_cached_copy(ctx):
    _stage(ctx, b"cached")
    osimage.os_image_cache_keep(ctx, INST, SHA)
    _stage(ctx, b"another push")        # the staged file was a link to the cached copy
    with open(os.path.join(ctx.paths.os_image_cache_dir, SHA), "rb") as fh:
        assert fh.read() == b"cached"


def test_remove_and_bad_checksums(ctx):
    _stage(ctx, b"x")
    osimage.os_image_cache_keep(ctx, INST, SHA)
    osimage.os_image_cache_remove(ctx, SHA)
    osimage.os_image_cache_remove(ctx, SHA)
    assert os.listdir(ctx.paths.os_image_cache_dir) == []
    for bad in ("../etc", "AB" * 32, "a" * 63):
        with pytest.raises(errors.StorageError, match="Invalid image checksum"):
            osimage.os_image_cache_stage(ctx, INST, bad)
