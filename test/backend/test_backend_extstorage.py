"""Tests for ganeti.backend.extstorage: the extstorage_diagnose procedure's rows."""

from __future__ import annotations

import os

from ganeti.backend import extstorage as bes
from ganeti.storage import extstorage as es


def _provider(base: str, name: str, params: str, mode: int = 0o755) -> None:
    pdir = os.path.join(base, name)
    os.makedirs(pdir)
    for script in es.REQUIRED_SCRIPTS:
        path = os.path.join(pdir, script)
        with open(path, "w") as fobj:
            fobj.write("#!/bin/sh\n")
        os.chmod(path, mode)
    with open(os.path.join(pdir, es.PARAMETERS_FILE), "w") as fobj:
        fobj.write(params)


def test_no_search_dir_gives_no_rows(ctx):
    assert bes.extstorage_diagnose(ctx) == []


def test_rows_have_canonical_paths_and_parameters(ctx):
    first, last = ctx.paths.es_search_path[0], ctx.paths.es_search_path[-1]
    _provider(first, "good", "size The size\n")
    _provider(last, "good", "")
    _provider(last, "noexec", "", mode=0o644)
    assert bes.extstorage_diagnose(ctx) == [
        ["good", "/srv/ganeti/extstorage/good", True, "", [["size", "The size"]]],
        ["good", "/usr/share/ganeti/extstorage/good", True, "", []],
        ["noexec", "/usr/share/ganeti/extstorage/noexec", False,
         "File 'create' under path '/usr/share/ganeti/extstorage/noexec' is not executable", []],
    ]
