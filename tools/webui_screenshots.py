#!/usr/bin/env python3
"""Screenshots of the web console's pages for doc/webui.md (issue 30).

Starts a 3-node virtual cluster (fake hypervisor) with a few instances
(running and stopped, diskless and ``sharedfile``, one below the memory
policy so that verify warns), runs a fake migration, a tag change and
``gnt-cluster verify``, logs in with headless Chromium (through
test/integration/webdriver.py) and saves one PNG per page in doc/webui/:
login, overview, instances, create, instance, node (and node-evacuate,
the evacuation plan's graph), jobs, job.  The window is 1100x700, so each
file stays small.

Needs Debian's chromium and chromium-driver (``make debian-deps``).  Run
``.venv/bin/python tools/webui_screenshots.py [OUTDIR]`` (about 40 s);
the PNGs change with every run (times, job ids), so commit them only when
a page changed.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import urllib.parse

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "test", "integration"))

import webdriver  # noqa: E402
from test_rapi import request, wait_job, write_users  # noqa: E402
from vcluster_harness import VirtualCluster  # noqa: E402

USER, PASSWORD = "admin", "admin-pass"
AUTH = (USER, PASSWORD)
N1, N2, N3 = (f"node{i}.vcluster" for i in (1, 2, 3))
WIDTH, HEIGHT = 1100, 700


def _job(vc: VirtualCluster, method: str, path: str, body: object = None) -> int:
    status, job, _ = request(vc, method, path, body, auth=AUTH)
    if status != 200:
        raise RuntimeError(f"{method} {path}: {status} {job}")
    done = wait_job(vc, job)
    if done["status"] != "success":
        raise RuntimeError(f"{method} {path}: job {job} {done['status']}")
    return int(job)


def _instance(vc: VirtualCluster, name: str, pnode: str, *, template: str = "diskless",
              memory: int = 128, start: bool = True, **extra: object) -> int:
    body = {"__version__": 1, "name": name, "os": "tinyos", "mode": "create",
            "disk_template": template,
            "disks": [{"size": 64}] if template != "diskless" else [],
            "nics": [{}], "pnode": pnode, "name_check": False, "ip_check": False,
            "start": start, "beparams": {"maxmem": memory, "minmem": memory}, **extra}
    return _job(vc, "POST", "/2/instances", body)


def _prepare(vc: VirtualCluster) -> int:
    """The cluster's instances and a few jobs; the id of a migration job (the job page)."""
    write_users(vc, f"{USER} {PASSWORD} write\n")
    deadline = time.monotonic() + 10
    while request(vc, "GET", "/2/tokens", auth=AUTH)[0] != 200:     # the users file read
        if time.monotonic() > deadline:
            raise RuntimeError("the RAPI users file was not loaded")
        time.sleep(0.1)
    _instance(vc, "web1.example.com", N1, hvparams={"migration_bandwidth": 64})
    _instance(vc, "web2.example.com", N1)
    _instance(vc, "files1.example.com", N1, template="sharedfile")
    _instance(vc, "db1.example.com", N2, memory=256)
    _instance(vc, "build1.example.com", N3, start=False)
    _instance(vc, "tiny1.example.com", N3, memory=64, start=False, ignore_ipolicy=True)
    _job(vc, "PUT", "/2/instances/db1.example.com/tags?tag=production")
    migration = _job(vc, "PUT", "/2/instances/web1.example.com/migrate",
                     {"target_node": N2, "mode": "live"})
    vc.run("gnt-cluster", "verify")          # warns about tiny1 (below the memory policy)
    return migration


def _ready(b: webdriver.Browser, what: str) -> None:
    b.wait("return document.body.dataset.ready === '1'", what, 30)
    time.sleep(0.5)                          # the rest of the page's reads and redraws


def _save(b: webdriver.Browser, outdir: str, page: str) -> None:
    path = os.path.join(outdir, page + ".png")
    with open(path, "wb") as fh:
        fh.write(b.screenshot())
    print(f"{path}: {os.path.getsize(path) // 1024} KiB")


def shoot(vc: VirtualCluster, outdir: str, migration: int) -> None:
    origin = f"https://{vc.cluster.master_node.ip}:{vc.cluster.rapi_port}"
    with webdriver.browser(width=WIDTH, height=HEIGHT) as b:
        b.get(origin + "/ui/login.html?next=%2Fui%2F")
        b.wait("return document.getElementById('user')", "the login form")
        b.type("#user", USER)
        _save(b, outdir, "login")
        b.type("#password", PASSWORD)
        b.click("#submit")
        _ready(b, "the overview")
        b.wait("return document.getElementById('verify-jobs')", "the last verify", 30)
        _save(b, outdir, "overview")
        pages = [("instances", "/ui/instances.html"), ("create", "/ui/create.html"),
                 ("instance", "/ui/instance.html?name=web1.example.com"),
                 ("node", "/ui/node.html?name=" + urllib.parse.quote(N1)),
                 ("jobs", "/ui/jobs.html"), ("job", f"/ui/job.html?id={migration}")]
        for page, path in pages:
            b.get(origin + path)
            _ready(b, page)
            if page == "instance":
                b.wait("return document.querySelector('#recent-jobs li[data-job]')",
                       "the recent jobs", 30)
            if page == "node":
                b.wait("return document.body.dataset.storage === '1'", "the storage units", 30)
            _save(b, outdir, page)
        # the node page again, with the plan of node1's evacuation to node3 drawn (one
        # job after the other: arrows); nothing is moved
        b.get(origin + "/ui/node.html?name=" + urllib.parse.quote(N1))
        _ready(b, "the node page")
        b.script("const t = document.getElementById('evac-target'); t.value = arguments[0];"
                 " t.dispatchEvent(new Event('change', {bubbles: true}));", N3)
        b.click("#evac-plan")
        b.wait("return document.querySelector('#evac-graph g.plan-job')", "the plan", 60)
        b.script("document.getElementById('evacuate').scrollIntoView();")
        time.sleep(0.3)
        _save(b, outdir, "node-evacuate")


def main(argv: list[str]) -> int:
    reason = webdriver.missing()
    if reason is not None:
        print(f"no screenshots: {reason}", file=sys.stderr)
        return 1
    outdir = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(REPO, "doc", "webui"))
    os.makedirs(outdir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="webui-shots-") as tmp:
        with VirtualCluster(tmp, nodes=3, use_ssh=False) as vc:
            shoot(vc, outdir, _prepare(vc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
