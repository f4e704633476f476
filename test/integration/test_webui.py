"""The web console (``/ui/``) in headless Chromium against a real ganeti-rapi.

One 2-node virtual cluster (fake hypervisor) and one browser for the
module; Chromium is driven through chromedriver (webdriver.py), as root
with ``--no-sandbox``.  The console's pages log in, show the nodes and
instances, stop and start an instance from its page and see its status
change from the event stream without a reload (the list too, for a
change made through RAPI).  A readonly user's buttons are disabled and
its forged POST refused; a write without the CSRF header is refused; no
page loads anything from outside the cluster.  Helpers come from
``test_rapi.py``.
"""

from __future__ import annotations

import http.client
import importlib.machinery
import importlib.util
import os
import re
import ssl
import time
import urllib.parse

import pytest
import webdriver
from test_rapi import request, wait_job, write_users
from vcluster_harness import VirtualCluster

from test.integration import host_helpers
from tools.harness import vcluster

pytestmark = pytest.mark.timeout(300)

N1, N2 = "node1.vcluster", "node2.vcluster"
WEB, DB = "web1.example.com", "db1.example.com"
USERS = "boss bpass write\nrita rpass read\n"
BOSS = ("boss", "bpass")


def _make(vc, name: str, pnode: str) -> None:
    body = {"__version__": 1, "name": name, "os": "tinyos", "mode": "create",
            "disk_template": "diskless", "disks": [], "nics": [{}], "pnode": pnode,
            "name_check": False, "ip_check": False, "start": True}
    status, job_id, _ = request(vc, "POST", "/2/instances", body, auth=BOSS)
    assert status == 200, job_id
    assert wait_job(vc, job_id)["status"] == "success"


@pytest.fixture(scope="module", autouse=True)
def _chromium() -> None:
    """Skip without chromium and chromedriver, unless make test as root (which installs
    them) requires the browser: there a missing one fails."""
    reason = webdriver.missing()
    host_helpers.skip_unless(reason, required_by=host_helpers.REQUIRE_BROWSER)


def with_users(cluster, users: str = USERS, auth: tuple[str, str] = BOSS) -> None:
    """Write the RAPI users file and wait (at most 10 s) until ganeti-rapi uses it."""
    write_users(cluster, users)
    deadline = time.monotonic() + 10
    while request(cluster, "GET", "/2/tokens", auth=auth)[0] != 200:
        assert time.monotonic() < deadline, "users file not loaded"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def vc(tmp_path_factory, _chromium):
    with VirtualCluster(tmp_path_factory.mktemp("vcweb"), nodes=2, use_ssh=False) as cluster:
        with_users(cluster)
        _make(cluster, WEB, N1)
        _make(cluster, DB, N2)
        yield cluster


@pytest.fixture(scope="module")
def browser():
    with webdriver.browser() as b:
        yield b


def _origin(vc) -> str:
    return f"https://{vc.cluster.master_node.ip}:{vc.cluster.rapi_port}"


def _login(vc, b: webdriver.Browser, user: str, password: str, page: str = "/ui/") -> None:
    b.get(_origin(vc) + "/ui/login.html?next=" + urllib.parse.quote(page))
    b.type("#user", user)
    b.type("#password", password)
    b.click("#submit")
    b.wait("return document.body.dataset.ready === '1' && location.pathname", f"{page} shown")


def _status(vc, name: str) -> str:
    return request(vc, "GET", f"/2/instances/{name}")[1]["status"]


def test_pages_are_served_with_a_strict_content_security_policy(vc):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    conn = http.client.HTTPSConnection(vc.cluster.master_node.ip, vc.cluster.rapi_port,
                                       context=ctx, timeout=10)
    try:
        for path, ctype in (("/ui/", "text/html"), ("/ui/instances.js", "text/javascript"),
                            ("/ui/app.css", "text/css")):
            conn.request("GET", path)
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200 and resp.getheader("Content-Type").startswith(ctype)
            csp = resp.getheader("Content-Security-Policy")
            assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
            assert resp.getheader("X-Content-Type-Options") == "nosniff"
        for path in ("/ui/../setup.py", "/ui/webui.py", "/ui/.hidden.js", "/ui/nothere.html"):
            conn.request("GET", path)
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 404, path
    finally:
        conn.close()


def test_a_page_without_a_session_sends_the_browser_to_the_login_form(vc, browser):
    browser.get(_origin(vc) + "/ui/instances.html")
    browser.wait("return location.pathname === '/ui/login.html'", "the login form")
    assert "next=%2Fui%2Finstances.html" in browser.url()


def test_login_shows_the_cluster_nodes_and_instances(vc, browser):
    _login(vc, browser, *BOSS)
    master = vc.cluster.master_node.name
    assert browser.text("#master") == master
    nodes = browser.script("return [...document.querySelectorAll('#nodes tbody tr')]"
                           ".map(r => [r.dataset.node, r.querySelectorAll('meter').length]);")
    assert sorted(nodes) == [[N1, 2], [N2, 2]]
    assert browser.text("#count-total") == "2 instances"
    assert N1 in browser.text("#candidates") and N2 in browser.text("#candidates")
    browser.click("a[href='/ui/instances.html']")
    browser.wait("return document.body.dataset.ready === '1'", "the instance list")
    names = browser.script("return [...document.querySelectorAll('#instances tbody tr')]"
                           ".map(r => r.dataset.name);")
    assert names == [DB, WEB]
    browser.click("th[data-key='name']")        # sorted by name: a click reverses it
    assert browser.script("return document.querySelector('#instances tbody tr')"
                          ".dataset.name;") == WEB
    browser.type("#filter", "db1")
    assert browser.script("return [...document.querySelectorAll('#instances tbody tr')]"
                          ".map(r => r.dataset.name);") == [DB]


def test_stop_and_start_from_the_instance_page_without_reloading(vc, browser):
    _login(vc, browser, *BOSS, page=f"/ui/instance.html?name={WEB}")
    browser.script("window.__notReloaded = true;")
    assert browser.text("#status") == "running"
    browser.click("#shutdown")
    job = int(browser.wait("const j = document.getElementById('job-id');"
                           " return j && j.textContent;", "the shutdown job shown"))
    assert wait_job(vc, job)["status"] == "success"
    browser.wait("return document.getElementById('status').textContent === 'ADMIN_down'",
                 "status ADMIN_down")
    browser.wait("return document.getElementById('job-status').textContent === 'success'",
                 "the job's end shown")
    assert _status(vc, WEB) == "ADMIN_down"
    browser.click("#startup")
    started = int(browser.wait("const j = document.getElementById('job-id');"
                               f" return j && j.textContent !== '{job}' && j.textContent;",
                               "the startup job shown"))
    assert wait_job(vc, started)["status"] == "success"
    browser.wait("return document.getElementById('status').textContent === 'running'",
                 "status running")
    assert _status(vc, WEB) == "running"
    assert browser.script("return window.__notReloaded === true;")


def test_a_page_redraw_begun_before_a_change_never_overwrites_a_later_one(vc, browser):
    # common.js's serial(): three redraws asked while the first one's read hangs make one
    # more read after it, never three, and the last applied read is one begun after the
    # last call (a slow read answered last left a stopped instance shown as stopped after
    # its start: seen in make test).
    _login(vc, browser, *BOSS)
    browser.script("""
        window.__serial = null;
        import('/ui/common.js').then(async ({ serial }) => {
          let release;
          const hang = new Promise((r) => { release = r; });
          const begun = [], applied = [];
          const draw = serial(async () => {
            const n = begun.length;
            begun.push(n);
            if (n === 0) await hang;
            applied.push(n);
          });
          const first = draw();
          const later = [draw(), draw(), draw()];
          release();
          await Promise.all([first, ...later]);
          await draw();
          window.__serial = { begun, applied };
        });""")
    result = browser.wait("return window.__serial", "the serial() scenario's end", 20)
    assert result == {"begun": [0, 1, 2], "applied": [0, 1, 2]}


def test_instance_list_follows_a_change_made_elsewhere(vc, browser):
    _login(vc, browser, *BOSS, page="/ui/instances.html")
    browser.script("window.__notReloaded = true;")
    status, job, _ = request(vc, "PUT", f"/2/instances/{DB}/shutdown", auth=BOSS)
    assert status == 200 and wait_job(vc, job)["status"] == "success"
    browser.wait(f"const c = document.querySelector('tr[data-name=\"{DB}\"] .status');"
                 " return c && c.textContent === 'ADMIN_down';", "ADMIN_down in the list")
    status, job, _ = request(vc, "PUT", f"/2/instances/{DB}/startup", auth=BOSS)
    assert status == 200 and wait_job(vc, job)["status"] == "success"
    browser.wait(f"const c = document.querySelector('tr[data-name=\"{DB}\"] .status');"
                 " return c && c.textContent === 'running';", "running in the list")
    assert browser.script("return window.__notReloaded === true;")


def test_readonly_user_has_disabled_buttons_and_its_forged_post_is_refused(vc, browser):
    _login(vc, browser, "rita", "rpass", page=f"/ui/instance.html?name={WEB}")
    disabled = browser.script("return ['startup', 'shutdown', 'reboot']"
                              ".map(id => document.getElementById(id).disabled);")
    assert disabled == [True, True, True]
    # the page's own code, with the session's CSRF token, forging the request anyway
    answer = browser.script(
        "return fetch('/ui/session').then(r => r.json()).then(s => fetch("
        f"'/2/instances/{WEB}/reboot', {{method: 'POST',"
        " headers: {'X-CSRF-Token': s.csrf_token}})).then(r => r.status);")
    assert answer == 403
    assert _status(vc, WEB) == "running"


def test_write_without_the_csrf_header_is_refused(vc, browser):
    _login(vc, browser, *BOSS, page="/ui/instances.html")
    answer = browser.script(
        f"return fetch('/2/instances/{WEB}/shutdown', {{method: 'PUT'}})"
        ".then(r => r.json().then(b => [r.status, b.explain]));")
    assert answer[0] == 403 and "CSRF" in answer[1]
    assert _status(vc, WEB) == "running"


def test_logout_ends_the_session(vc, browser):
    _login(vc, browser, *BOSS)
    browser.click("#logout")
    browser.wait("return location.pathname === '/ui/login.html'", "the login form")
    assert browser.script("return fetch('/ui/session').then(r => r.status);") == 401


def test_no_page_loads_anything_from_outside_the_cluster(vc, browser):
    origin = _origin(vc)
    _login(vc, browser, *BOSS)
    seen: list[str] = browser.resource_urls()
    for page in ("/ui/instances.html", f"/ui/instance.html?name={WEB}", "/ui/login.html"):
        browser.get(origin + page)
        browser.wait("return document.readyState === 'complete'", page)
        time.sleep(0.3)     # the page's own requests (session, RAPI reads, events)
        seen += browser.resource_urls()
    assert len(seen) > 10
    outside = [u for u in seen if not u.startswith(origin + "/")]
    assert outside == []
    # the pages' RAPI reads are among them (the event stream is listed only once it
    # ends: a stream still open has no resource entry yet)
    assert {origin + "/2/info", origin + "/2/instances?bulk=1", origin + "/ui/session",
            f"{origin}/2/instances/{WEB}"} <= set(seen)


def test_the_demo_prints_the_console_address_and_a_login_that_works(vc, browser):
    """``make demo``'s lines (tools/demo): run last, it replaces the users file."""
    loader = importlib.machinery.SourceFileLoader(
        "ganeti_demo", os.path.join(vcluster.REPO_ROOT, "tools", "demo"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    demo = importlib.util.module_from_spec(spec)
    loader.exec_module(demo)
    text = demo._web_console(vc.cluster)
    url = re.search(r"(https://\S+/ui/)", text)
    login = re.search(r"log in as (\S+), password (\S+)", text)
    assert url and login and url.group(1) == _origin(vc) + "/ui/"
    b = browser
    deadline = time.monotonic() + 10
    while request(vc, "GET", "/2/tokens", auth=(login.group(1), login.group(2)))[0] != 200:
        assert time.monotonic() < deadline, "the demo's users file not loaded"
        time.sleep(0.1)
    b.get(url.group(1))
    b.wait("return location.pathname === '/ui/login.html'", "the login form")
    b.type("#user", login.group(1))
    b.type("#password", login.group(2))
    b.click("#submit")
    b.wait("return document.body.dataset.ready === '1' && location.pathname === '/ui/'",
           "the overview")
    assert b.text("#whoami") == f"{login.group(1)} (admin)"


def test_the_browser_refuses_a_load_from_elsewhere_and_inline_code(vc, browser):
    """The Content-Security-Policy is enforced: an image from another address and an
    inline script put into a page are blocked by Chromium (a blocked load still gets
    a resource entry: the check above would report it)."""
    browser.get(_origin(vc) + "/ui/login.html")
    browser.wait("return document.readyState === 'complete'", "the login page")
    blocked = browser.script("""
        const seen = [];
        document.addEventListener('securitypolicyviolation',
                                  (e) => seen.push(e.effectiveDirective));
        const img = document.createElement('img');
        img.src = 'https://192.0.2.1/x.png';
        document.body.append(img);
        const s = document.createElement('script');
        s.textContent = 'window.__inline = true;';
        document.body.append(s);
        return new Promise((done) => setTimeout(() => done(
            [seen.sort(), window.__inline === true]), 300));""")
    assert blocked == [["img-src", "script-src-elem"], False]
