"""The console page's files (ganeti/rapi/webui.py): the allow-listed system files."""

from __future__ import annotations

import os

import pytest

from ganeti.rapi import webui


def test_a_vendor_file_is_served_from_its_allow_listed_path(tmp_path, monkeypatch):
    lib = tmp_path / "term.js"
    lib.write_text("window.Terminal = 1;")
    monkeypatch.setitem(webui.VENDOR, "vendor/term.js", (str(lib), "text/javascript"))
    found = webui.page("/ui", "/ui/vendor/term.js")
    assert found is not None and found.body == b"window.Terminal = 1;"


def test_a_missing_vendor_file_is_a_404(monkeypatch, tmp_path):
    monkeypatch.setitem(webui.VENDOR, "vendor/term.js", (str(tmp_path / "no"), "text/javascript"))
    assert webui.page("/ui", "/ui/vendor/term.js") is None


@pytest.mark.parametrize("path", ["/ui/vendor/xterm.js", "/ui/vendor/../vendor/term.js",
                                  "/ui/vendor/", "/ui/vendor"],
                         ids=["other", "dotdot", "dir", "bare"])
def test_nothing_else_of_the_system_is_served(path):
    assert webui.page("/ui", path) is None


def test_the_package_file_when_installed():
    path, _ = webui.VENDOR["vendor/term.js"]
    if not os.path.exists(path):
        pytest.skip("libjs-term.js is not installed (make debian-deps installs it)")
    found = webui.page("/ui", "/ui/vendor/term.js")
    assert found is not None and b"Terminal" in found.body


def test_the_console_page_uses_only_its_own_files():
    with open(os.path.join(webui.STATIC_DIR, "console.html"), encoding="utf-8") as fh:
        text = fh.read()
    assert '<script src="/ui/vendor/term.js"></script>' in text
    assert "<script>" not in text and "style=" not in text
