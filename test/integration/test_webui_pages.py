"""The web console's node, job list and job pages in headless Chromium.

One 2-node virtual cluster (fake hypervisor) and one browser for the
module, as in test_webui.py (whose helpers it uses).  The node page shows
the node's roles and instances, drains and undrains it and changes its
tags and lists its storage units (an operator's; a readonly user is told
why not); the job list shows a job submitted through RAPI as it runs; a job
page follows a delay job to its end without a reload (status and log),
cancels a waiting job and shows why a running one cannot be; a readonly
user's buttons are disabled.  The overview shows the last cluster verify's
warnings as soon as its jobs end; an instance page lists the instance's
recent jobs, following new ones.
"""

from __future__ import annotations

import re
import time
import urllib.parse

import pytest
import webdriver
from test_rapi import request, wait_job
from test_webui import (BOSS, DB, N1, N2, USERS, WEB, _chromium, _login,  # noqa: F401
                        _make, _origin, with_users)
from vcluster_harness import VirtualCluster

pytestmark = pytest.mark.timeout(300)

MIG = "mig1.example.com"
TINY = "tiny1.example.com"
OTTO = ("otto", "opass")        # an operator


@pytest.fixture(scope="module")
def vc(tmp_path_factory, _chromium):  # noqa: F811 (the imported fixture)
    with VirtualCluster(tmp_path_factory.mktemp("vcpages"), nodes=2, use_ssh=False) as cluster:
        with_users(cluster, USERS + "otto opass operator\n")
        _make(cluster, WEB, N1)
        _make(cluster, DB, N2)
        body = {"__version__": 1, "name": MIG, "os": "tinyos", "mode": "create",
                "disk_template": "diskless", "disks": [], "nics": [{}], "pnode": N1,
                "name_check": False, "ip_check": False, "start": True,
                "beparams": {"maxmem": 128, "minmem": 128},
                "hvparams": {"migration_bandwidth": 32}}     # a 4 s fake migration
        status, job, _ = request(cluster, "POST", "/2/instances", body, auth=BOSS)
        assert status == 200 and wait_job(cluster, job)["status"] == "success"
        yield cluster


@pytest.fixture(scope="module")
def browser():
    with webdriver.browser() as b:
        yield b


def _delay(vc, *args: str) -> int:
    """Submit a ``gnt-debug delay`` job (on the master, holding its node lock); its id."""
    res = vc.run("gnt-debug", "delay", "--submit", *args)
    assert res.returncode == 0, res.stderr
    match = re.search(r"JobID: (\d+)", res.stderr + res.stdout)
    assert match, res.stderr
    return int(match.group(1))


def _kill(vc, job: int) -> None:
    vc.ok("gnt-job", "cancel", "--kill", "--yes-do-it", str(job))
    assert wait_job(vc, job)["status"] in ("canceled", "error")


def _job_status(vc, job: int) -> str:
    return request(vc, "GET", f"/2/jobs/{job}")[1]["status"]


def _wait_status(vc, job: int, wanted: str) -> None:
    deadline = time.monotonic() + 20
    while _job_status(vc, job) != wanted:
        assert time.monotonic() < deadline, f"job {job} never {wanted}"
        time.sleep(0.1)


def _text(browser, css: str) -> str:
    """An element's text, read in one script (a page may replace the element meanwhile)."""
    return browser.script("const e = document.querySelector(arguments[0]);"
                          " return e ? e.textContent : null;", css)


def _click(browser, css: str) -> None:
    """Click an element the page may redraw at any time (found and clicked in one script)."""
    assert browser.script("const e = document.querySelector(arguments[0]);"
                          " if (e) e.click(); return e !== null;", css), css


def _rows(browser, table: str, key: str) -> list[str]:
    return browser.script(f"return [...document.querySelectorAll('#{table} tbody tr')]"
                          f".map(r => r.dataset.{key});")


def test_node_page_shows_roles_and_instances(vc, browser):
    _login(vc, browser, *BOSS)
    master = vc.cluster.master_node.name
    _click(browser, f"#nodes a[href='/ui/node.html?name={urllib.parse.quote(master)}']")
    browser.wait("return document.body.dataset.ready === '1'"
                 " && location.pathname === '/ui/node.html'", "the node page")
    assert _text(browser, "#name") == master
    assert _text(browser, "#role") == "master"
    flags = browser.script("return [...document.querySelectorAll('#flags .flag')]"
                           ".map(f => f.dataset.flag);")
    assert {"master", "master candidate", "vm_capable"} <= set(flags)
    assert "drained" not in flags
    assert browser.script("return document.querySelectorAll('#params meter').length;") == 2
    pnode = {N1: WEB, N2: DB}[master]
    primaries = [pnode, MIG] if master == N1 else [pnode]
    assert sorted(_rows(browser, "instances", "name")) == sorted(primaries)
    assert _rows(browser, "instances", "kind") == ["primary"] * len(primaries)
    _click(browser, f"#instances a[href='/ui/instance.html?name={pnode}']")
    browser.wait(f"return document.getElementById('name').textContent === '{pnode}'",
                 "the instance page")


def test_drain_and_undrain_from_the_node_page(vc, browser):
    _login(vc, browser, *BOSS, page=f"/ui/node.html?name={N2}")
    browser.script("window.__notReloaded = true;")
    assert _text(browser, "#role") != "drained"
    browser.click("#drain")
    browser.wait("return document.getElementById('role').textContent === 'drained'",
                 "the role drained")
    assert request(vc, "GET", f"/2/nodes/{N2}/role")[1] == "drained"
    job = int(_text(browser, "#job-id"))
    assert browser.script("return document.getElementById('job-id')"
                          ".getAttribute('href');") == f"/ui/job.html?id={job}"
    browser.wait("return document.getElementById('job-status').textContent === 'success'",
                 "the drain job's end")
    assert browser.script("return [document.getElementById('drain').disabled,"
                          " document.getElementById('undrain').disabled];") == [True, False]
    browser.click("#undrain")
    browser.wait("return document.getElementById('role').textContent !== 'drained'"
                 " && document.getElementById('job-status').textContent === 'success'",
                 "the node undrained")
    assert request(vc, "GET", f"/2/nodes/{N2}/role")[1] != "drained"
    assert "drained" not in _text(browser, "#flags")
    assert browser.script("return window.__notReloaded === true;")


def test_add_and_remove_a_node_tag_from_its_page(vc, browser):
    _login(vc, browser, *BOSS, page=f"/ui/node.html?name={N1}")
    browser.type("#tag-new", "rack-7")
    browser.click("#tag-add")
    browser.wait("return document.querySelector('#tags li[data-tag=\"rack-7\"]') !== null",
                 "the new tag shown")
    assert request(vc, "GET", f"/2/nodes/{N1}/tags")[1] == ["rack-7"]
    _click(browser, "#tags button[data-tag='rack-7']")
    browser.wait("return document.querySelectorAll('#tags li').length === 0"
                 " && document.getElementById('job-status').textContent === 'success'",
                 "the tag removed")
    assert request(vc, "GET", f"/2/nodes/{N1}/tags")[1] == []


def test_node_page_lists_its_storage_units(vc, browser):
    _login(vc, browser, *OTTO, page=f"/ui/node.html?name={N1}")
    browser.wait("return document.body.dataset.storage === '1'", "the storage units", 30)
    rows = browser.script("return [...document.querySelectorAll('#storage-table tbody tr')]"
                          ".map(r => [r.dataset.type, r.dataset.name,"
                          " ...[...r.cells].map(c => c.textContent)]);")
    assert rows, _text(browser, "#storage-jobs")
    stype, unit, *cells = rows[0]
    assert stype == "file" and cells[:2] == [unit, "file"] and cells[5] in ("yes", "no")
    size, used, free = (int(c.removesuffix(" MiB")) for c in cells[2:5])
    assert size >= free > 0 and used >= 0
    # each query's job: linked, followed to its success, and RAPI's result is the table's
    jobs = browser.script("return [...document.querySelectorAll('#storage-jobs li')].map(li =>"
                          " [li.dataset.type, li.dataset.job,"
                          " li.querySelector('.storage-status').textContent,"
                          " li.querySelector('a').getAttribute('href')]);")
    assert "file" in [j[0] for j in jobs], jobs     # one job per enabled storage type
    result = []
    for _, job, status, href in jobs:
        assert [status, href] == ["success", f"/ui/job.html?id={job}"]
        result += request(vc, "GET", f"/2/jobs/{job}")[1]["opresult"][0]
    assert [[str(v) for v in r[:2]] for r in result] == [[r[1], r[0]] for r in rows]
    assert "MiB free of" in _text(browser, "#storage-capacity")
    # a readonly user: the node's own figures, a line saying why there are no units
    _login(vc, browser, "rita", "rpass", page=f"/ui/node.html?name={N1}")
    browser.wait("return document.body.dataset.storage === '1'", "the storage section")
    assert "needs write access" in _text(browser, "#storage-msg")
    assert browser.script("return [document.getElementById('storage-table'),"
                          " document.querySelectorAll('#storage-jobs li').length,"
                          " document.getElementById('storage-reload').disabled];") \
        == [None, 0, True]
    assert "MiB free of" in _text(browser, "#storage-capacity")
    assert not browser.script("return document.getElementById('error').hidden === false;")


def test_job_list_shows_a_job_submitted_through_rapi_as_it_runs(vc, browser):
    _login(vc, browser, *BOSS, page="/ui/jobs.html")
    browser.script("window.__notReloaded = true;")
    before = _rows(browser, "jobs", "id")
    assert before and [int(i) for i in before] == sorted((int(i) for i in before), reverse=True)
    status, job, _ = request(vc, "PUT", f"/2/nodes/{N2}/tags?tag=seen-live", auth=BOSS)
    assert status == 200
    browser.wait(f"const r = document.querySelector('#jobs tr[data-id=\"{job}\"] .status');"
                 " return r && r.textContent === 'success';", "the new job's success")
    assert _rows(browser, "jobs", "id")[0] == str(job)          # newest first
    assert "TAGS_SET" in _text(browser, f"#jobs tr[data-id='{job}'] .summary")
    assert browser.script(f"return document.querySelector('#jobs tr[data-id=\"{job}\"] a')"
                          ".getAttribute('href');") == f"/ui/job.html?id={job}"
    assert browser.script("return window.__notReloaded === true;")


def test_job_page_follows_a_delay_job_to_its_end(vc, browser):
    _login(vc, browser, *BOSS, page="/ui/jobs.html")
    job = _delay(vc, "--repeat", "3", "1")
    browser.get(f"{_origin(vc)}/ui/job.html?id={job}")
    browser.wait("return document.body.dataset.ready === '1'", "the job page")
    browser.script("window.__notReloaded = true;")
    assert _text(browser, "#status") in ("queued", "waiting", "running")
    assert browser.script("return document.getElementById('cancel').disabled;") is False
    browser.wait("return document.getElementById('status').textContent === 'success'",
                 "the job's success", timeout=20)
    assert wait_job(vc, job)["status"] == "success"
    log = browser.script("return [...document.querySelectorAll('#log td.message')]"
                         ".map(c => c.textContent);")
    assert log == [f"Test delay iteration {i}/3" for i in (1, 2, 3)]
    assert browser.script("return [...document.querySelectorAll('#ops tbody td')]"
                          ".slice(1, 4).map(c => c.textContent);")[0] == "OP_TEST_DELAY"
    assert _text(browser, "#ops tbody .status") == "success"
    assert browser.script("return document.getElementById('cancel').disabled;") is True
    assert browser.script("return window.__notReloaded === true;")


def test_job_page_shows_a_migration_progress_bar(vc, browser):
    _login(vc, browser, *BOSS, page="/ui/jobs.html")
    status, job, _ = request(vc, "PUT", f"/2/instances/{MIG}/migrate",
                             {"mode": "live", "target_node": N2}, auth=BOSS)
    assert status == 200, job
    browser.get(f"{_origin(vc)}/ui/job.html?id={job}")
    browser.wait("return document.body.dataset.ready === '1'", "the job page")
    # every bar the page draws, as it changes
    browser.script("""
        window.__notReloaded = true;
        window.__bars = [];
        const seen = () => {
          for (const p of document.querySelectorAll('#ops progress'))
            window.__bars.push([p.dataset.op, p.value, p.max]);
        };
        seen();
        new MutationObserver(seen).observe(document.querySelector('#ops'),
            {subtree: true, childList: true, attributes: true});""")
    browser.wait("return document.getElementById('status').textContent === 'success'",
                 "the migration's success", timeout=30)
    assert wait_job(vc, job)["status"] == "success"
    total = 128 * 1024 * 1024
    bars = browser.script("return window.__bars;")
    assert bars and all(op == "migration" and mx == total for op, _, mx in bars)
    values = [v for _, v, _ in bars]
    assert values == sorted(values) and len(set(values)) >= 3, values
    assert values[-1] == total
    assert any(m.startswith("migration:") and m.endswith("done") for m in browser.script(
        "return [...document.querySelectorAll('#log td.message')].map(c => c.textContent);"))
    assert browser.script("return window.__notReloaded === true;")


def test_cancel_a_waiting_job_from_its_page(vc, browser):
    blocker = _delay(vc, "30")
    try:
        _wait_status(vc, blocker, "running")
        waiter = _delay(vc, "1")                # waits for the master's node lock
        _wait_status(vc, waiter, "waiting")
        _login(vc, browser, *BOSS, page=f"/ui/job.html?id={waiter}")
        assert _text(browser, "#status") == "waiting"
        browser.click("#cancel")
        browser.wait("return document.getElementById('status').textContent === 'canceled'",
                     "the job canceled")
        assert _job_status(vc, waiter) == "canceled"
        assert browser.script("return document.getElementById('cancel').disabled;") is True
        # a running job is not canceled (RAPI's cancel does not kill): the page says so
        browser.get(f"{_origin(vc)}/ui/job.html?id={blocker}")
        browser.wait("return document.body.dataset.ready === '1'", "the blocker's page")
        browser.click("#cancel")
        answer = browser.wait("return document.getElementById('cancel-answer').textContent",
                              "the refusal")
        assert "can no longer be canceled" in answer
        assert _job_status(vc, blocker) == "running"
    finally:
        _kill(vc, blocker)


def test_readonly_user_has_disabled_buttons(vc, browser):
    job = _delay(vc, "30")
    try:
        _login(vc, browser, "rita", "rpass", page=f"/ui/job.html?id={job}")
        assert _text(browser, "#status") in ("queued", "waiting", "running")
        assert browser.script("return document.getElementById('cancel').disabled;") is True
        browser.get(f"{_origin(vc)}/ui/node.html?name={N2}")
        browser.wait("return document.body.dataset.ready === '1'", "the node page")
        disabled = browser.script("return ['drain', 'undrain', 'tag-add', 'tag-new']"
                                  ".map(id => document.getElementById(id).disabled);")
        assert disabled == [True, True, True, True]
        answer = browser.script(
            "return fetch('/ui/session').then(r => r.json()).then(s => fetch("
            f"'/2/jobs/{job}', {{method: 'DELETE',"
            " headers: {'X-CSRF-Token': s.csrf_token}})).then(r => r.status);")
        assert answer == 403
        assert _job_status(vc, job) in ("queued", "waiting", "running")
    finally:
        _kill(vc, job)


def test_overview_shows_the_last_verify_and_its_warnings(vc, browser):
    # an instance below the policy's smallest memory: verify warns about it
    body = {"__version__": 1, "name": TINY, "os": "tinyos", "mode": "create",
            "disk_template": "diskless", "disks": [], "nics": [{}], "pnode": N2,
            "name_check": False, "ip_check": False, "start": False, "ignore_ipolicy": True,
            "beparams": {"maxmem": 64, "minmem": 64}}
    status, job, _ = request(vc, "POST", "/2/instances", body, auth=BOSS)
    assert status == 200 and wait_job(vc, job)["status"] == "success", job
    _login(vc, browser, *BOSS)
    browser.wait("return document.getElementById('verify').textContent", "the verify section")
    res = vc.run("gnt-cluster", "verify")
    findings = sorted(set(re.findall(r"- ((?:ERROR|WARNING): .*)$", res.stdout, re.M)))
    assert any(TINY in f and "memory-size" in f for f in findings), res.stdout
    # the page follows the verify jobs' ends: the new findings without a reload
    shown = browser.wait(
        "const l = [...document.querySelectorAll('#verify-findings li')];"
        f" return l.some(li => li.textContent.includes('{TINY}'))"
        " && l.map(li => li.textContent);", "the verify's warnings", 30)
    assert sorted(set(shown)) == findings
    assert browser.script("return document.querySelector('#verify-findings li.warn') !== null;")
    links = browser.script("return [...document.querySelectorAll('#verify-jobs a')]"
                           ".map(a => a.textContent);")
    assert len(links) == 2                       # the config's job and the one group's
    request(vc, "DELETE", f"/2/instances/{TINY}", auth=BOSS)


def test_instance_page_lists_its_recent_jobs(vc, browser):
    _login(vc, browser, *BOSS, page=f"/ui/instance.html?name={WEB}")
    first = browser.wait("return [...document.querySelectorAll('#recent-jobs li[data-job]')]"
                         ".map(li => li.textContent);", "the recent jobs")
    assert any(f"INSTANCE_CREATE({WEB})" in text for text in first), first
    assert all(WEB in text for text in first), first
    status, job, _ = request(vc, "PUT", f"/2/instances/{WEB}/tags?tag=recent", auth=BOSS)
    assert status == 200 and wait_job(vc, job)["status"] == "success"
    # submitted elsewhere: listed first, its success shown, without a reload
    browser.wait("const li = document.querySelector('#recent-jobs li[data-job]');"
                 f" return li && li.dataset.job === '{job}'"
                 " && li.querySelector('.recent-status').textContent === 'success';",
                 "the new job first, done", 20)
    # another instance's job is not listed; the list is re-read at the next job of this one
    status, other, _ = request(vc, "PUT", f"/2/instances/{DB}/tags?tag=other", auth=BOSS)
    assert status == 200 and wait_job(vc, other)["status"] == "success"
    status, last, _ = request(vc, "DELETE", f"/2/instances/{WEB}/tags?tag=recent", auth=BOSS)
    assert status == 200
    browser.wait("const li = document.querySelector('#recent-jobs li[data-job]');"
                 f" return li && li.dataset.job === '{last}';", "the removal listed", 20)
    ids = browser.script("return [...document.querySelectorAll('#recent-jobs li[data-job]')]"
                         ".map(li => Number(li.dataset.job));")
    assert other not in ids and job in ids
    assert ids == sorted(ids, reverse=True) and len(ids) <= 10
