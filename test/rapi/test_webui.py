"""ganeti/rapi/webui.py: which request paths are console files, and their headers."""

from __future__ import annotations

import os
import re

import pytest

from ganeti.rapi import webui


@pytest.mark.parametrize("path, ctype", [
    ("/ui/", "text/html; charset=utf-8"),
    ("/ui", "text/html; charset=utf-8"),
    ("/ui/login.html", "text/html; charset=utf-8"),
    ("/ui/instances.js", "text/javascript; charset=utf-8"),
    ("/ui/app.css", "text/css; charset=utf-8"),
], ids=["slash", "bare", "html", "js", "css"])
def test_console_files_are_found_with_their_type(path, ctype):
    found = webui.page("/ui", path)
    assert found is not None and found.content_type == ctype and found.body


@pytest.mark.parametrize("path", [
    "/ui/../webui.py", "/ui/..%2Fwebui.py", "/ui/sub/index.html", "/ui/.hidden.js",
    "/ui/nothere.html", "/ui/README", "/ui/\\index.html",
], ids=["dotdot", "encoded", "subdir", "hidden", "missing", "no-type", "backslash"])
def test_other_paths_are_not_files(path):
    assert webui.page("/ui", path) is None


def test_every_file_in_the_directory_is_of_a_served_type(tmp_path):
    (tmp_path / "a.js").write_text("x")
    assert webui.page("/ui", "/ui/a.js", str(tmp_path)) is not None
    assert webui.page("/ui", "/ui/index.html", str(tmp_path)) is None


def test_pages_forbid_other_origins_inline_code_and_framing():
    headers = dict(webui.HEADERS)
    csp = headers["Content-Security-Policy"]
    assert "default-src 'self'" in csp and "object-src 'none'" in csp
    assert "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert dict(webui.page("/ui", "/ui/instance.html").headers) == headers


def test_the_console_page_alone_allows_style_attributes_and_nothing_more():
    console = dict(webui.page("/ui", "/ui/console.html").headers)
    csp = console.pop("Content-Security-Policy")
    others = dict(webui.HEADERS)
    assert csp == others.pop("Content-Security-Policy") + "; style-src-attr 'unsafe-inline'"
    assert console == others
    assert "script-src 'self';" in csp and "style-src 'self';" in csp


def test_the_html_pages_load_nothing_inline_or_from_elsewhere():
    for name in os.listdir(webui.STATIC_DIR):
        with open(os.path.join(webui.STATIC_DIR, name), encoding="utf-8") as fh:
            text = fh.read()
        # the SVG namespace is a name (createElementNS), never fetched
        assert not re.search(r"https?://", text.replace("http://www.w3.org/2000/svg", "")), name
        if name.endswith(".html"):
            assert " style=" not in text and "<style" not in text, name
            assert all('src="/ui/' in tag for tag in re.findall(r"<script[^>]*>", text)), name


@pytest.fixture
def novnc_tree(tmp_path, monkeypatch):
    (tmp_path / "core" / "util").mkdir(parents=True)
    (tmp_path / "core" / "rfb.js").write_text("export default class RFB {}")
    (tmp_path / "core" / "util" / "int.js").write_text("export const x = 1;")
    (tmp_path / "core" / ".hidden.js").write_text("x")
    (tmp_path / "core" / "notes.txt").write_text("x")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "ui.js").write_text("x")
    monkeypatch.setattr(webui, "VENDOR_TREES",
                        {"vendor/novnc/": (str(tmp_path), ("core/", "vendor/pako/lib/"))})
    return tmp_path


@pytest.mark.parametrize("path", ["/ui/vendor/novnc/core/rfb.js",
                                  "/ui/vendor/novnc/core/util/int.js"], ids=["top", "nested"])
def test_a_vendor_trees_modules_are_served(novnc_tree, path):
    found = webui.page("/ui", path)
    assert found is not None and found.content_type == "text/javascript; charset=utf-8"


@pytest.mark.parametrize("path", [
    "/ui/vendor/novnc/core/../app/ui.js", "/ui/vendor/novnc/app/ui.js",
    "/ui/vendor/novnc/core/.hidden.js", "/ui/vendor/novnc/core/notes.txt",
    "/ui/vendor/novnc/core//rfb.js", "/ui/vendor/novnc/core/missing.js",
    "/ui/vendor/novnc/core\\rfb.js", "/ui/vendor/novnc/",
], ids=["dotdot", "other-subdir", "hidden", "not-js", "empty-part", "missing", "backslash",
        "bare"])
def test_nothing_else_of_a_vendor_tree_is_served(novnc_tree, path):
    assert webui.page("/ui", path) is None
