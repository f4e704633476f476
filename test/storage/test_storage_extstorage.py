"""Tests for ganeti.storage.extstorage: which provider directories are valid."""

from __future__ import annotations

import os
import pathlib

import pytest

from ganeti.storage import extstorage as es

OK = es.FileState(regular=True, executable=True)
ALL_OK = {n: OK for n in (*es.REQUIRED_SCRIPTS, es.PARAMETERS_FILE)}


def make_provider(base: pathlib.Path, name: str, *, params: str = "size The size\n",
                  skip: tuple[str, ...] = (), mode: int = 0o755) -> pathlib.Path:
    """A provider directory with every required script (``mode``) and parameters.list."""
    pdir = base / name
    pdir.mkdir(parents=True)
    for script in es.REQUIRED_SCRIPTS:
        if script not in skip:
            (pdir / script).write_text("#!/bin/sh\nexit 0\n")
            os.chmod(pdir / script, mode)
    if es.PARAMETERS_FILE not in skip:
        (pdir / es.PARAMETERS_FILE).write_text(params)
    return pdir


def test_check_files_all_present_is_valid():
    assert es.check_files("/p", ALL_OK) == ""


@pytest.mark.parametrize("name", [*es.REQUIRED_SCRIPTS, es.PARAMETERS_FILE])
def test_check_files_required_file_missing(name):
    files = {**ALL_OK, name: None}
    assert es.check_files("/p", files) == f"File '{name}' under path '/p' is missing"


@pytest.mark.parametrize("name", es.OPTIONAL_SCRIPTS)
def test_check_files_optional_script_may_be_missing_but_must_be_executable(name):
    assert es.check_files("/p", {**ALL_OK, name: None}) == ""
    bad = {**ALL_OK, name: es.FileState(regular=True, executable=False)}
    assert es.check_files("/p", bad) == f"File '{name}' under path '/p' is not executable"


@pytest.mark.parametrize("state, what", [
    (es.FileState(regular=False, executable=True), "not a regular file"),
    (es.FileState(regular=True, executable=False), "not executable"),
], ids=["directory", "not-executable"])
def test_check_files_bad_script(state, what):
    assert es.check_files("/p", {**ALL_OK, "grow": state}) == \
        f"File 'grow' under path '/p' is {what}"


def test_check_files_parameters_list_need_not_be_executable():
    files = {**ALL_OK, es.PARAMETERS_FILE: es.FileState(regular=True, executable=False)}
    assert es.check_files("/p", files) == ""


def test_check_files_reports_the_first_problem_in_order():
    files = {**ALL_OK, "create": None, "verify": None}
    assert "'create'" in es.check_files("/p", files)


def test_parse_parameters():
    text = "size  The size in MiB \n\nmode\npool Pool name, with spaces\n"
    assert es.parse_parameters(text) == (("size", "The size in MiB"), ("mode", ""),
                                         ("pool", "Pool name, with spaces"))


def test_search_lists_visible_entries_in_search_order(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    make_provider(first, "zeta")
    make_provider(second, "alpha")
    make_provider(second, "zeta")
    (second / ".hidden").mkdir()
    (second / "stray").write_text("")
    found = es.search([str(first), str(tmp_path / "missing"), str(second)])
    assert found == [("zeta", str(first / "zeta")), ("alpha", str(second / "alpha")),
                     ("stray", str(second / "stray")), ("zeta", str(second / "zeta"))]


def test_diagnose_valid_provider(tmp_path):
    pdir = make_provider(tmp_path, "ok", params="size The size\npool Pool\n")
    diag = es.diagnose("ok", str(pdir), "/srv/ganeti/extstorage/ok")
    assert diag == es.ProviderStatus("ok", "/srv/ganeti/extstorage/ok", True, "",
                                     (("size", "The size"), ("pool", "Pool")))


@pytest.mark.parametrize("kwargs, message", [
    ({"skip": ("attach",)}, "File 'attach' under path '/shown' is missing"),
    ({"skip": (es.PARAMETERS_FILE,)}, "File 'parameters.list' under path '/shown' is missing"),
    ({"mode": 0o644}, "File 'create' under path '/shown' is not executable"),
], ids=["missing-script", "missing-parameters", "not-executable"])
def test_diagnose_invalid_provider(tmp_path, kwargs, message):
    pdir = make_provider(tmp_path, "bad", **kwargs)
    diag = es.diagnose("bad", str(pdir), "/shown")
    assert (diag.valid, diag.diagnose, diag.parameters) == (False, message, ())


def test_diagnose_not_a_directory(tmp_path):
    (tmp_path / "stray").write_text("")
    diag = es.diagnose("stray", str(tmp_path / "stray"))
    assert not diag.valid and "not a directory" in diag.diagnose
