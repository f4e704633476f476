"""Evacuating a node from its page of the web console, with the plan drawn first.

A 3-node virtual cluster (fake hypervisor) with three instances on node1
(two running diskless ones and a running ``sharedfile`` one, all movable
by migration) and one browser.  The node page's "Show plan" draws the
plan as a graph (a box per job naming its instances and their target
nodes, an arrow per dependency) without moving anything; "Apply" submits
that plan, shows the jobs it created (links to their pages) and follows
them to success; node1 ends with no primary instance.  A readonly user's
evacuation controls are disabled.
"""

from __future__ import annotations

import urllib.parse

import pytest
import webdriver
from test_rapi import request, wait_job
from test_webui import BOSS, _chromium, _login, with_users  # noqa: F401 (fixture)
from test_webui_forms import _make
from vcluster_harness import VirtualCluster

pytestmark = pytest.mark.timeout(300)

N1, N2, N3 = (f"node{i}.vcluster" for i in (1, 2, 3))
MOVED = ("evac1.example.com", "evac2.example.com", "evacsf.example.com")
STAYS = "stays.example.com"


@pytest.fixture(scope="module")
def vc(tmp_path_factory, _chromium):  # noqa: F811 (the imported fixture)
    with VirtualCluster(tmp_path_factory.mktemp("vcevac"), nodes=3, use_ssh=False) as cluster:
        with_users(cluster)
        small = {"beparams": {"maxmem": 128, "minmem": 128}}
        _make(cluster, MOVED[0], N1, **small)
        _make(cluster, MOVED[1], N1, **small)
        _make(cluster, MOVED[2], N1, "sharedfile", (16,), **small)
        _make(cluster, STAYS, N2, **small)
        yield cluster


@pytest.fixture(scope="module")
def browser():
    with webdriver.browser() as b:
        yield b


def _primaries(vc, node: str) -> list[str]:
    status, info, _ = request(vc, "GET", f"/2/nodes/{node}", auth=BOSS)
    assert status == 200, info
    return sorted(info["pinst_list"])


def _job_ids(vc) -> set[int]:
    status, jobs, _ = request(vc, "GET", "/2/jobs", auth=BOSS)
    assert status == 200
    return {int(j["id"]) for j in jobs}


def _boxes(b: webdriver.Browser) -> list[dict]:
    return b.script(
        "return [...document.querySelectorAll('#evac-graph g.plan-job')].map(g => ({"
        " job: g.dataset.job, depends: g.dataset.depends, instances: g.dataset.instances,"
        " lines: [...g.querySelectorAll('text')].map(t => t.textContent),"
        " width: g.getBBox().width}));")


def test_plan_drawn_then_applied_empties_the_node(vc, browser):
    b = browser
    _login(vc, b, *BOSS, page="/ui/node.html?name=" + urllib.parse.quote(N1))
    assert b.script("return document.getElementById('evac-apply').disabled;")
    targets = b.script("return [...document.querySelectorAll('#evac-target option')]"
                       ".map(o => o.value);")
    assert targets == ["", N2, N3]                 # the allocator, or one of the others
    # the page's own jobs (its storage units, one per storage type) are over first
    b.wait("return document.body.dataset.storage === '1';", "the node's storage units")
    before_jobs = _job_ids(vc)
    b.script("document.getElementById('evac-mode').value = 'primary-only';"
             " document.getElementById('evac-mode').dispatchEvent("
             "new Event('change', {bubbles: true}));")
    b.click("#evac-plan")
    b.wait("return document.querySelectorAll('#evac-graph g.plan-job').length > 0"
           " && !document.getElementById('evac-apply').disabled", "the plan's graph", 60)
    boxes = _boxes(b)
    assert sorted(i for box in boxes for i in box["instances"].split()) == sorted(MOVED)
    for box in boxes:
        assert box["lines"][0].startswith(f"Job {int(box['job']) + 1}")
        assert box["width"] > 0
        for line in box["lines"][1:]:
            name, what = line.split(": ", 1)
            assert name in MOVED and what.split()[0] in ("migrate", "failover"), line
            assert f"{N1} \u2192 " in what and what.rsplit(" ", 1)[1] in (N2, N3), line
    # one arrow per dependency, from the earlier job to the later one
    deps = sorted((int(d), int(box["job"])) for box in boxes for d in box["depends"].split(",")
                  if d)
    arrows = b.script("return [...document.querySelectorAll('#evac-graph line.plan-dep')]"
                      ".map(l => [Number(l.dataset.from), Number(l.dataset.to)]);")
    assert sorted(tuple(a) for a in arrows) == deps
    assert all(a < c for a, c in deps)
    # planning moved nothing: one job (the plan's), node1 still holds its instances
    assert len(_job_ids(vc) - before_jobs) == 1
    assert _primaries(vc, N1) == sorted(MOVED)

    b.click("#evac-apply")
    b.wait("return document.querySelectorAll('#evac-jobs li[data-job]').length"
           f" === {len(boxes)}", "the evacuation's jobs listed", 60)
    links = b.script("return [...document.querySelectorAll('#evac-jobs li[data-job] a')]"
                     ".map(a => a.getAttribute('href'));")
    ids = [int(urllib.parse.parse_qs(urllib.parse.urlparse(h).query)["id"][0]) for h in links]
    assert len(set(ids)) == len(boxes) and not set(ids) & before_jobs
    b.wait("return [...document.querySelectorAll('#evac-jobs .evac-status')]"
           ".every(s => s.textContent === 'success')", "every job's success", 120)
    for job in ids:
        assert wait_job(vc, job)["status"] == "success"
    assert _primaries(vc, N1) == []
    # the page redraws itself: no primary instance left on it
    b.wait("return document.querySelectorAll('#instances tbody tr[data-kind=primary]')"
           ".length === 0", "the node's instance list emptied", 30)
    moved = {request(vc, "GET", f"/2/instances/{n}", auth=BOSS)[1]["pnode"] for n in MOVED}
    assert moved <= {N2, N3}
    b.click(f"#evac-jobs a[href='/ui/job.html?id={ids[0]}']")
    b.wait("return location.pathname === '/ui/job.html' && document.body.dataset.ready === '1'",
           "the first job's page")


def test_readonly_user_cannot_evacuate(vc, browser):
    b = browser
    b.script("document.getElementById('logout') && document.getElementById('logout').click();")
    b.wait("return location.pathname === '/ui/login.html'", "the login page")
    _login(vc, b, "rita", "rpass", page="/ui/node.html?name=" + urllib.parse.quote(N2))
    disabled = b.script("return [...document.getElementById('evacuate').elements]"
                        ".map(c => [c.id, c.disabled]);")
    assert disabled and all(d for _id, d in disabled), disabled
