#!/usr/bin/env python3
"""The web console's instance list in headless Chromium, with 1,000 instances (issue 30).

On a 3-node virtual cluster (fake hypervisor) whose configuration is filled
with 1,000 diskless instances (half of them running; ConfigWriter while
masterd is stopped, as bench_rapi.py does), logged in as an admin:

* time to first render of ``/ui/instances.html``: from the navigation's
  start to the table holding every row (the page's ``instances-rendered``
  performance mark), median of 5 loads (target under 1 s);
* event-to-screen latency of a status change: an instance is stopped or
  started through RAPI; the figure is from the event's publication on
  the master (its ``time``) to the row showing the new status (the page
  reads the instance again on the event), median of 6, with the
  submit-to-screen time next to it.

Needs Debian's chromium and chromium-driver (``make debian-deps``);
Chromium runs with ``--no-sandbox`` (as root); without them the benchmark
says so and is skipped.  Run:
``.venv/bin/python tools/bench/bench_webui.py`` (about 30 s).  Prints
figures, asserts nothing.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import statistics
import sys
import tempfile
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "test", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import webdriver  # noqa: E402
from benchlib import fill_config  # noqa: E402
from tools.harness import vcluster  # noqa: E402

COUNT = 1000
LOADS = 5
CHANGES = 6
USER, PASSWORD = "bench", "benchpass"


def _rapi(address: tuple[str, int], method: str, path: str) -> Any:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    conn = http.client.HTTPSConnection(*address, context=ctx, timeout=60)
    try:
        auth = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        conn.request(method, path, headers={"Authorization": auth})
        resp = conn.getresponse()
        body = json.loads(resp.read())
        if resp.status != 200:
            raise RuntimeError(f"{method} {path}: {resp.status} {body}")
        return body
    finally:
        conn.close()


def _wait_job(address: tuple[str, int], job: int) -> None:
    deadline = time.monotonic() + 60
    while _rapi(address, "GET", f"/2/jobs/{job}")["status"] not in ("success", "error"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"job {job} did not end")
        time.sleep(0.05)


def _prepare(vc: vcluster.VCluster) -> tuple[str, int]:
    path = vc.paths(vc.master_node.name).rapi_users_file
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as fh:
        fh.write(f"{USER} {PASSWORD} write\n")
    os.chmod(path + ".tmp", 0o600)
    os.replace(path + ".tmp", path)
    fill_config(vc, COUNT, half_running=True)
    address = (vc.master_node.ip, int(vc.rapi_port or 0))
    for _ in range(400):
        try:
            if len(_rapi(address, "GET", "/2/instances")) >= COUNT:
                return address
        except (RuntimeError, OSError):
            pass
        time.sleep(0.05)
    raise RuntimeError("RAPI not ready")


def _first_render(b: webdriver.Browser, origin: str) -> float:
    b.get(origin + "/ui/instances.html")
    b.wait("return document.body.dataset.ready === '1'", "the instance list", 60)
    rows = b.script("return document.querySelectorAll('#instances tbody tr').length;")
    if rows != COUNT:
        raise RuntimeError(f"{rows} rows shown, not {COUNT}")
    return float(b.script(
        "return performance.getEntriesByName('instances-rendered')[0].startTime;")) / 1000


def _change(b: webdriver.Browser, address: tuple[str, int], name: str,
            target: str) -> tuple[float, float]:
    """Stop or start ``name``; (event-to-screen, submit-to-screen) seconds."""
    verb = "startup" if target == "running" else "shutdown"
    submitted = time.time()
    job = _rapi(address, "PUT", f"/2/instances/{name}/{verb}")
    shown = b.wait(f"const r = document.querySelector('tr[data-name=\"{name}\"]');"
                   f" return r && r.querySelector('.status').textContent === '{target}'"
                   " && [Number(r.dataset.eventTime), Number(r.dataset.shownAt)];",
                   f"{name} {target}", 60)
    _wait_job(address, job)
    return shown[1] - shown[0], shown[1] - submitted


def main() -> int:
    reason = webdriver.missing()
    if reason:
        print(f"skipped: {reason}")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-webui-") as tmp:
        directory = os.path.join(tmp, "vc")
        try:
            vc = vcluster.create(directory, 3, use_ssh=False)
            address = _prepare(vc)
            origin = f"https://{address[0]}:{address[1]}"
            with webdriver.browser() as b:
                b.get(origin + "/ui/login.html")
                b.type("#user", USER)
                b.type("#password", PASSWORD)
                b.click("#submit")
                b.wait("return document.body.dataset.ready === '1'", "the overview", 60)
                _first_render(b, origin)        # warm up (caches, the daemon's query path)
                renders = [_first_render(b, origin) for _ in range(LOADS)]
                event, total = [], []
                for i in range(CHANGES):
                    name = "cfg00001.example.com"      # running at first (half_running)
                    lat = _change(b, address, name, "ADMIN_down" if i % 2 == 0 else "running")
                    event.append(lat[0])
                    total.append(lat[1])
        finally:
            vcluster.destroy(directory)
    print(f"/ui/instances.html first render, {COUNT} instances, median of {LOADS}: "
          f"{statistics.median(renders):.3f} s (min {min(renders):.3f}, max {max(renders):.3f};"
          " target < 1 s)")
    print(f"status change event to screen, median of {CHANGES}: "
          f"{statistics.median(event) * 1000:.0f} ms (max {max(event) * 1000:.0f} ms)")
    print(f"status change RAPI submit to screen, median of {CHANGES}: "
          f"{statistics.median(total) * 1000:.0f} ms (max {max(total) * 1000:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
