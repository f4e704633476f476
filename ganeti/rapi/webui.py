"""The web console's static files (``/ui/``): which exist, and the headers they go with.

The pages are plain HTML, CSS and JavaScript modules in ``ganeti/rapi/ui/``
(no build step); they talk to RAPI with the session cookie (doc/webui.md).
:func:`page` maps a request path to a file of that directory, read when
asked; nothing outside the directory and no other file type is served.  Every
page goes with :data:`HEADERS`: a Content-Security-Policy that lets a page
load scripts, styles, images and connections from this origin only, never
frames, plugins or inline scripts (the serial console's page also allows
``style`` attributes: :data:`CONSOLE_CSP`).
"""

from __future__ import annotations

import dataclasses
import os

__all__ = ["CSP", "CONSOLE_CSP", "HEADERS", "STATIC_DIR", "VENDOR", "VENDOR_TREES", "Page",
           "page"]

#: the directory of the console's files (installed with the package: setup.py)
STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ui")

#: extension -> Content-Type of the files served
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
}

#: the files of system packages the console uses, by their path under ``/ui/``: an
#: allow-list, nothing else of the system is served (``libjs-term.js``: the serial
#: console's terminal, doc/webui.md "Consoles")
VENDOR = {
    "vendor/term.js": ("/usr/share/javascript/term.js/term.js", _TYPES[".js"]),
}

#: the JavaScript module trees of system packages, by their prefix under ``/ui/``: the
#: directory, and the subdirectories of it whose ``.js`` files are served (``novnc``:
#: the VNC console's client, ES modules that import each other by relative paths)
VENDOR_TREES = {
    "vendor/novnc/": ("/usr/share/novnc", ("core/", "vendor/pako/lib/")),
}

#: nothing from another origin, no inline script or style, no framing, no plugins
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self';"
       " connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self';"
       " frame-ancestors 'none'")

#: the serial console's page: the same, but ``style`` attributes allowed (not
#: ``<style>`` elements, nor any script): term.js draws the terminal's colours as
#: ``<span style="color:...">`` it writes itself, from the escape sequences' numbers
CONSOLE_CSP = CSP + "; style-src-attr 'unsafe-inline'"

HEADERS: tuple[tuple[str, str], ...] = (
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-cache"),
)

#: the pages whose policy is not :data:`CSP`
_PAGE_CSP = {"console.html": CONSOLE_CSP}


@dataclasses.dataclass(frozen=True)
class Page:
    """One static file to answer with: its Content-Type, bytes and headers."""

    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = HEADERS


def page(prefix: str, path: str, directory: str = STATIC_DIR) -> Page | None:
    """The file for request ``path`` under ``prefix`` (``/ui/`` is ``index.html``), or
    None when there is none: an unknown name or type, a hidden file, a subdirectory."""
    name = path[len(prefix):].lstrip("/") or "index.html"
    if name in VENDOR:
        return _read(*VENDOR[name])
    for tree, (root, subdirs) in VENDOR_TREES.items():
        if name.startswith(tree):
            return _tree_file(root, subdirs, name[len(tree):])
    if "/" in name or "\\" in name or name.startswith("."):
        return None
    ctype = _TYPES.get(os.path.splitext(name)[1])
    if ctype is None:
        return None
    found = _read(os.path.join(directory, name), ctype)
    if found is not None and name in _PAGE_CSP:
        csp = ("Content-Security-Policy", _PAGE_CSP[name])
        found = dataclasses.replace(found, headers=tuple(
            csp if key == csp[0] else (key, value) for key, value in HEADERS))
    return found


def _tree_file(root: str, subdirs: tuple[str, ...], rel: str) -> Page | None:
    """A ``.js`` file ``rel`` of a vendor tree, under one of its ``subdirs``: no
    ``..``, hidden or empty path component, nothing else."""
    parts = rel.split("/")
    if not rel.endswith(".js") or "\\" in rel or \
            any(not p or p.startswith(".") for p in parts) or \
            not any(rel.startswith(d) for d in subdirs):
        return None
    return _read(os.path.join(root, *parts), _TYPES[".js"])


def _read(path: str, ctype: str) -> Page | None:
    try:
        with open(path, "rb") as fh:
            return Page(ctype, fh.read())
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
