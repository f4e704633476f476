"""The web console's forms and progress bars in headless Chromium (doc/webui.md).

One 2-node virtual cluster (fake hypervisor) and one browser for the
module, as in test_webui.py, whose fixtures and helpers this module
imports.  An instance is created through ``/ui/create.html`` and shows
in the list; from an instance's page it is migrated to the other node
(its migration's progress bar followed to the end, the primary node
changing without a reload) or failed over, its memory changed, a file disk grown, a
tag added and removed; bad input shows a message and submits no job,
RAPI's refusal shows its text; a readonly user's forms are disabled.
"""

from __future__ import annotations

import time

import pytest
import webdriver
from test_rapi import request, wait_job
from test_webui import BOSS, N1, N2, _chromium, _login, with_users  # noqa: F401
from vcluster_harness import VirtualCluster

pytestmark = pytest.mark.timeout(300)

#: migrated with a 128 MiB memory at 24 MiB/s: about 5 s of fake transfer
MIG, WEB, DISK = "mig1.example.com", "web2.example.com", "disk1.example.com"
NEW = "new1.example.com"


def _make(vc, name: str, pnode: str, template: str = "diskless",
          disks: tuple[int, ...] = (), **extra) -> None:
    body = {"__version__": 1, "name": name, "os": "tinyos", "mode": "create",
            "disk_template": template, "disks": [{"size": s} for s in disks],
            "nics": [{}], "pnode": pnode, "name_check": False, "ip_check": False,
            "start": True, **extra}
    status, job_id, _ = request(vc, "POST", "/2/instances", body, auth=BOSS)
    assert status == 200, job_id
    assert wait_job(vc, job_id)["status"] == "success"


@pytest.fixture(scope="module")
def vc(tmp_path_factory, _chromium):  # noqa: F811 (the imported fixture)
    with VirtualCluster(tmp_path_factory.mktemp("vcforms"), nodes=2, use_ssh=False) as cluster:
        with_users(cluster)
        _make(cluster, MIG, N1, beparams={"maxmem": 128, "minmem": 128},
              hvparams={"migration_bandwidth": 24})
        _make(cluster, WEB, N1)
        _make(cluster, DISK, N2, "file", (16,))
        yield cluster


@pytest.fixture(scope="module")
def browser():
    with webdriver.browser() as b:
        yield b


def _inst(vc, name: str) -> dict:
    status, inst, _ = request(vc, "GET", f"/2/instances/{name}", auth=BOSS)
    assert status == 200, inst
    return inst


def _job_ids(vc) -> list[int]:
    status, jobs, _ = request(vc, "GET", "/2/jobs", auth=BOSS)
    assert status == 200
    return sorted(int(j["id"]) for j in jobs)


def _set(b: webdriver.Browser, css: str, value: str) -> None:
    """Choose ``value`` in a select (or set an input), as a user's change would."""
    b.script("const e = document.querySelector(arguments[0]); e.value = arguments[1];"
             " e.dispatchEvent(new Event('change'));", css, value)


def _clear_and_type(b: webdriver.Browser, css: str, text: str) -> None:
    b.script("document.querySelector(arguments[0]).value = '';", css)
    b.type(css, text)


def _text_is(b: webdriver.Browser, css: str, text: str, what: str) -> None:
    b.wait("const e = document.querySelector(arguments[0]);"
           " return e !== null && e.textContent === arguments[1];", what, 30.0, css, text)


def test_create_form_makes_an_instance_that_shows_in_the_list(vc, browser):
    b = browser
    _login(vc, b, *BOSS, page="/ui/instances.html")
    b.click("#new-instance")
    b.wait("return location.pathname === '/ui/create.html'"
           " && document.body.dataset.ready === '1'", "the create form")
    assert b.script("return [...document.getElementById('os').options].map(o => o.value);") \
        == ["tinyos+compact", "tinyos+default", "tinyos+minimal"]  # GET /2/os: the variants
    assert "diskless" in b.script(
        "return [...document.getElementById('disk_template').options].map(o => o.value);")
    assert b.script("return document.getElementById('place-alloc').checked;") is True
    b.type("#name", NEW)
    _set(b, "#disk_template", "diskless")
    _set(b, "#os", "tinyos+minimal")
    b.type("#memory", "192")
    b.type("#vcpus", "2")
    b.click("#name_check")              # no DNS on the virtual cluster
    b.click("#create-submit")
    job = int(b.wait("const j = document.getElementById('job-id'); return j && j.textContent;",
                     "the create job shown"))
    assert wait_job(vc, job)["status"] == "success"
    _text_is(b, "#job-status", "success", "the job's end shown")
    href = b.wait("const a = document.querySelector('#done a'); return a && a.href;",
                  "the link to the new instance")
    assert href.endswith(f"/ui/instance.html?name={NEW}")
    inst = _inst(vc, NEW)
    # placed by the allocator (no node given), with the form's memory and vCPUs
    assert inst["pnode"] in (N1, N2) and inst["disk_template"] == "diskless"
    assert inst["beparams"]["maxmem"] == 192 and inst["beparams"]["vcpus"] == 2
    assert inst["status"] == "running" and inst["os"] == "tinyos+minimal"
    b.get(b.url().split("/ui/")[0] + "/ui/instances.html")
    b.wait(f"return document.querySelector('tr[data-name=\"{NEW}\"]') !== null",
           "the new instance in the list")


def test_migrate_follows_the_progress_bar_and_the_primary_node_changes(vc, browser):
    b = browser
    _login(vc, b, *BOSS, page=f"/ui/instance.html?name={MIG}")
    assert b.text("#p-pnode") == N1
    # the choices: the other node only
    assert b.script("return [...document.getElementById('migrate-target').options]"
                    ".map(o => o.value);") == ["", N2]
    # every runtime-job bar the page draws, and the job's own bar, as they change
    b.script("""
        window.__notReloaded = true;
        window.__bars = []; window.__jobBars = [];
        const seen = () => {
          for (const p of document.querySelectorAll('#runtime-jobs li progress'))
            window.__bars.push([p.closest('li').dataset.kind, p.value, p.max]);
          const j = document.getElementById('job-progress');
          if (!j.hidden) window.__jobBars.push([j.dataset.op, j.value, j.max, j.dataset.done]);
        };
        new MutationObserver(seen).observe(document.querySelector('main'),
            {subtree: true, childList: true, attributes: true});""")
    _set(b, "#migrate-mode", "live")
    _set(b, "#migrate-target", N2)
    b.click("#migrate-submit")
    job = int(b.wait("const j = document.getElementById('job-id'); return j && j.textContent;",
                     "the migrate job shown"))
    # the bar shows up while the fake hypervisor transfers the memory
    b.wait("return document.querySelector('#runtime-jobs li[data-kind=\"migration\"]"
           " progress') !== null", "a migration progress bar")
    _text_is(b, "#p-pnode", N2, "the new primary node")
    assert wait_job(vc, job)["status"] == "success"
    _text_is(b, "#job-status", "success", "the job's end shown")
    b.wait("return document.getElementById('runtime').hidden", "the bar gone at the end")
    b.wait("const j = document.getElementById('job-progress');"
           " return j.dataset.done === '1' && j.value === j.max;", "the job's bar full")
    bars = b.script("return window.__bars;")
    total = 128 * 1024 * 1024
    assert bars and all(kind == "migration" and mx == total for kind, _, mx in bars)
    values = [v for _, v, _ in bars]
    assert values == sorted(values) and len(set(values)) >= 3, values
    assert 0 < values[-1] <= total
    job_bars = b.script("return window.__jobBars;")
    assert job_bars[-1] == ["migration", total, total, "1"]
    assert _inst(vc, MIG)["pnode"] == N2
    assert b.script("return window.__notReloaded === true;")


def test_failover_moves_the_instance_to_the_chosen_node(vc, browser):
    b = browser
    _login(vc, b, *BOSS, page=f"/ui/instance.html?name={WEB}")
    b.script("window.__notReloaded = true;")
    assert b.text("#p-pnode") == N1
    _set(b, "#failover-target", N2)
    b.click("#failover-submit")
    _text_is(b, "#p-pnode", N2, "the new primary node")
    _text_is(b, "#job-status", "success", "the job's end shown")
    inst = _inst(vc, WEB)
    assert inst["pnode"] == N2 and inst["status"] == "running"
    assert "Submitted job" in b.text("#failover-msg")
    assert b.script("return window.__notReloaded === true;")


def test_modify_memory_shows_the_new_value(vc, browser):
    b = browser
    _login(vc, b, *BOSS, page=f"/ui/instance.html?name={WEB}")
    b.script("window.__notReloaded = true;")
    _clear_and_type(b, "#maxmem", "256")
    _clear_and_type(b, "#vcpus", "2")
    b.click("#modify-submit")
    _text_is(b, "#p-memory", "256", "the new memory")
    _text_is(b, "#p-vcpus", "2", "the new vCPUs")
    be = _inst(vc, WEB)["beparams"]
    assert (be["maxmem"], be["minmem"], be["vcpus"]) == (256, 256, 2)
    assert b.script("return window.__notReloaded === true;")


def test_grow_a_file_disk(vc, browser):
    b = browser
    _login(vc, b, *BOSS, page=f"/ui/instance.html?name={DISK}")
    assert b.script("return [...document.getElementById('grow-disk').options]"
                    ".map(o => o.textContent);") == ["disk/0 (16 MiB)"]
    _clear_and_type(b, "#grow-amount", "8")
    b.click("#grow-submit")
    _text_is(b, "#p-disks", "24", "the grown disk")
    assert _inst(vc, DISK)["disk.sizes"] == [24]


def test_add_and_remove_a_tag(vc, browser):
    b = browser
    _login(vc, b, *BOSS, page=f"/ui/instance.html?name={WEB}")
    _clear_and_type(b, "#tag-new", "tier:web")
    b.click("#tag-add")
    b.wait("return document.querySelector('#tag-list li[data-tag=\"tier:web\"]') !== null",
           "the new tag listed")
    assert request(vc, "GET", f"/2/instances/{WEB}/tags")[1] == ["tier:web"]
    b.click("#tag-list li[data-tag='tier:web'] button.tag-remove")
    b.wait("return document.querySelector('#tag-list li') === null", "the tag gone")
    assert request(vc, "GET", f"/2/instances/{WEB}/tags")[1] == []
    # a tag the master refuses (too long): the job fails and the page says why
    _clear_and_type(b, "#tag-new", "x" * 200)
    b.click("#tag-add")
    _text_is(b, "#job-status", "error", "the failed job")
    err = b.wait("const e = document.getElementById('error');"
                 " return !e.hidden && e.textContent;", "the job's error shown")
    assert "failed" in err and "Tag too long" in err, err
    assert request(vc, "GET", f"/2/instances/{WEB}/tags")[1] == []


def test_bad_input_shows_a_message_and_submits_nothing(vc, browser):
    b = browser
    _login(vc, b, *BOSS, page=f"/ui/instance.html?name={DISK}")
    before = _job_ids(vc)
    _clear_and_type(b, "#maxmem", "lots")
    b.click("#modify-submit")
    assert "whole number" in b.text("#modify-msg") and "lots" in b.text("#modify-msg")
    assert b.script("return document.getElementById('modify-msg').className;") == "msg bad"
    _clear_and_type(b, "#grow-amount", "-5")
    b.click("#grow-submit")
    assert "whole number" in b.text("#grow-msg")
    _clear_and_type(b, "#tag-new", "two words")
    b.click("#tag-add")
    assert "no spaces" in b.text("#tags-msg")
    b.get(b.url().split("/ui/")[0] + "/ui/create.html")
    b.wait("return document.body.dataset.ready === '1'", "the create form")
    b.type("#name", "bad name!")
    b.click("#create-submit")
    assert "not a host name" in b.text("#create-msg")
    _clear_and_type(b, "#name", "ok.example.com")
    _set(b, "#disk_template", "file")
    b.click("#create-submit")
    assert "at least one disk" in b.text("#create-msg")
    time.sleep(0.5)
    assert _job_ids(vc) == before
    assert b.script("return document.getElementById('job').textContent;") == ""
    # input the form takes but RAPI refuses (more than the largest disk): RAPI's text
    b.get(b.url().split("/ui/")[0] + f"/ui/instance.html?name={DISK}")
    b.wait("return document.body.dataset.ready === '1'", "the instance page")
    _clear_and_type(b, "#grow-amount", str(2 ** 41))
    b.click("#grow-submit")
    msg = b.wait("const m = document.getElementById('grow-msg');"
                 " return m.className === 'msg bad' && m.textContent;", "RAPI's refusal")
    assert "amount" in msg
    assert _job_ids(vc) == before
    assert _inst(vc, DISK)["disk.sizes"] == [24]


def test_readonly_user_has_disabled_forms(vc, browser):
    b = browser
    _login(vc, b, "rita", "rpass", page=f"/ui/instance.html?name={WEB}")
    states = b.script("return [...document.querySelectorAll('.forms input, .forms select,"
                      " .forms button')].map(e => [e.id || e.className, e.disabled]);")
    assert len(states) >= 12 and all(disabled for _, disabled in states), states
    assert "readonly" in b.text("#modify-msg")
    b.get(b.url().split("/ui/")[0] + "/ui/create.html")
    b.wait("return document.body.dataset.ready === '1'", "the create form")
    states = b.script("return [...document.getElementById('create').elements]"
                      ".map(e => e.disabled);")
    assert len(states) >= 10 and all(states)
