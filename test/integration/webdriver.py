"""A small W3C WebDriver client for headless Chromium through ``chromedriver``.

The browser tests (test_webui.py) and the console's benchmark
(tools/bench/bench_webui.py) and tools/webui_screenshots.py need a dozen
commands: open a session, go to a URL, find elements, click, type, run a
script, read the browser's performance entries, take a screenshot.
WebDriver is JSON over HTTP on loopback, so
``http.client`` is all it takes; Selenium would bring its own HTTP,
WebSocket and async stacks for the same calls (doc/dependencies.md).

Debian's ``chromium`` and ``chromium-driver`` (``make debian-deps``).
Chromium runs with ``--no-sandbox``: the tests run as root in CI, and
Chromium refuses to start its sandbox as root; the pages it opens are
the console's own, from a virtual cluster on loopback.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: the W3C key of an element reference
_ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


def missing() -> str | None:
    """Why no browser test can run here (None: chromium and chromedriver are installed)."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            return f"{path} is missing (Debian package {package}; make debian-deps)"
    return None


class WebDriverError(Exception):
    """A command chromedriver answered with an error (its ``error`` and ``message``)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Browser:
    """One chromedriver process and one headless Chromium session."""

    #: the chromedriver process (None before it is started and after close)
    _driver: subprocess.Popen[bytes] | None

    def _start_driver(self) -> None:
        """Start chromedriver on a free port and wait until it is ready; on another
        port when it exits at once (the port was taken between the pick and its
        bind by another process of a parallel test run), three tries."""
        deadline = time.monotonic() + 20
        for _ in range(3):
            self._port = _free_port()
            driver = self._driver = subprocess.Popen(
                [CHROMEDRIVER, f"--port={self._port}", "--allowed-ips=127.0.0.1"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while driver.poll() is None:
                try:
                    if self._call("GET", "/status").get("ready"):
                        return
                except (OSError, ValueError, WebDriverError):
                    pass
                if time.monotonic() > deadline:
                    raise WebDriverError("chromedriver did not start within 20 s")
                time.sleep(0.05)
        raise WebDriverError("chromedriver exited at start three times")

    def __init__(self, *, width: int = 1280, height: int = 900) -> None:
        self._profile = tempfile.mkdtemp(prefix="ganeti-chromium-")
        self._sid = ""
        self._driver = None
        try:
            self._start_driver()
            args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--ignore-certificate-errors", "--no-first-run", "--disable-extensions",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--metrics-recording-only", f"--window-size={width},{height}",
                    f"--user-data-dir={self._profile}"]
            caps = {"capabilities": {"alwaysMatch": {
                "browserName": "chrome", "acceptInsecureCerts": True,
                "goog:chromeOptions": {"binary": CHROMIUM, "args": args}}}}
            self._sid = self._call("POST", "/session", caps)["sessionId"]
        except BaseException:
            self.close()
            raise

    def _call(self, method: str, path: str, body: Any = None, timeout: float = 60) -> Any:
        conn = http.client.HTTPConnection("127.0.0.1", self._port, timeout=timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            conn.request(method, path, data, {"Content-Type": "application/json"})
            answer = json.loads(conn.getresponse().read() or b"{}")
        finally:
            conn.close()
        value = answer.get("value", answer)
        if isinstance(value, dict) and "error" in value:
            raise WebDriverError(f"{value['error']}: {value.get('message', '')[:300]}")
        return value

    def cmd(self, method: str, path: str, body: Any = None) -> Any:
        """A command of this session (``path`` after ``/session/{id}``)."""
        return self._call(method, f"/session/{self._sid}{path}", body)

    def get(self, url: str) -> None:
        self.cmd("POST", "/url", {"url": url})

    def url(self) -> str:
        return str(self.cmd("GET", "/url"))

    def script(self, source: str, *args: Any) -> Any:
        """Run ``source`` as a function body in the page; its ``return`` value."""
        return self.cmd("POST", "/execute/sync", {"script": source, "args": list(args)})

    def find(self, css: str) -> str:
        """The first element matching the CSS selector (its reference)."""
        return str(self.cmd("POST", "/element", {"using": "css selector", "value": css})[_ELEMENT])

    def click(self, css: str) -> None:
        self.cmd("POST", f"/element/{self.find(css)}/click", {})

    def type(self, css: str, text: str) -> None:
        self.cmd("POST", f"/element/{self.find(css)}/value", {"text": text})

    def text(self, css: str) -> str:
        return str(self.cmd("GET", f"/element/{self.find(css)}/text"))

    def wait(self, js: str, what: str, timeout: float = 60.0, *args: Any) -> Any:
        """Wait until the script ``js`` (a function body) returns something true; that value.

        The default timeout is long: a page's first answers can take many seconds while
        make test runs the guest clusters beside it, and a wait ends as soon as it holds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.script(js, *args)
            except WebDriverError:
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            time.sleep(0.05)

    def resource_urls(self) -> list[str]:
        """Every URL the current page loaded or fetched (its performance entries)."""
        return [str(u) for u in self.script(
            "return [location.href].concat(performance.getEntriesByType('resource')"
            ".map(e => e.name));")]

    def screenshot(self) -> bytes:
        """The current page's viewport as PNG bytes (W3C ``GET /screenshot``, base64)."""
        return base64.b64decode(str(self.cmd("GET", "/screenshot")))

    def close(self) -> None:
        """End the session and chromedriver (and so Chromium); remove the profile."""
        if self._sid:
            with contextlib.suppress(OSError, WebDriverError, ValueError):
                self._call("DELETE", f"/session/{self._sid}", timeout=10)
            self._sid = ""
        driver = self._driver
        if driver is not None and driver.poll() is None:
            driver.terminate()
            try:
                driver.wait(10)
            except subprocess.TimeoutExpired:
                driver.kill()
                driver.wait()
        shutil.rmtree(self._profile, ignore_errors=True)


@contextlib.contextmanager
def browser(**kw: Any) -> Iterator[Browser]:
    b = Browser(**kw)
    try:
        yield b
    finally:
        b.close()
