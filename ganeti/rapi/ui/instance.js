// One instance: its parameters and status, start/stop/reboot and the action forms
// (migrate, failover, memory and vCPUs, grow a disk, tags) through RAPI with the job
// each created; the status follows the event stream, the running operations (runtime
// jobs: migrations, mirrors, copies, wipes) show as progress bars.  A readonly user's
// buttons and forms are off.
import { api, el, events, navbar, serial, session, showError, statusClass } from "/ui/common.js";

const name = new URLSearchParams(location.search).get("name") || "";
const path = "/2/instances/" + encodeURIComponent(name);
const ACTIONS = {   // button id -> RAPI request
  startup: ["PUT", path + "/startup"],
  shutdown: ["PUT", path + "/shutdown"],
  reboot: ["POST", path + "/reboot"],
};
const myJobs = new Set();
const FINAL = ["success", "error", "canceled"];

let current = null;      // the instance as last read

const render = serial(async () => {
  const inst = await api("GET", path);
  current = inst;
  document.getElementById("name").textContent = inst.name;
  const status = document.getElementById("status");
  status.textContent = inst.status;
  status.className = statusClass(inst.status);
  const be = inst.beparams || {};
  const fields = [["pnode", "Primary node", inst.pnode],
    ["snodes", "Secondary nodes", (inst.snodes || []).join(", ")],
    ["os", "OS", inst.os], ["hypervisor", "Hypervisor", inst.hypervisor],
    ["disk_template", "Disk template", inst.disk_template],
    ["memory", "Memory (MiB)", be.minmem === be.maxmem ? be.maxmem : `${be.minmem}-${be.maxmem}`],
    ["vcpus", "vCPUs", be.vcpus],
    ["disks", "Disks (MiB)", (inst["disk.sizes"] || []).join(", ")],
    ["nics", "NICs (MAC)", (inst["nic.macs"] || []).join(", ")],
    ["tags", "Tags", (inst.tags || []).join(", ")]];
  document.getElementById("params").replaceChildren(...fields.flatMap(([key, label, v]) =>
    [el("dt", {}, label), el("dd", { id: "p-" + key }, String(v ?? ""))]));
  // the VNC console's link: a kvm instance with vnc_bind_address (doc/webui.md, "Consoles")
  document.getElementById("vnc-link").hidden = !(inst.hvparams || {}).vnc_bind_address;
  renderForms(inst);
  document.body.dataset.ready = "1";
});

function showJob(id, status) {
  document.getElementById("job").replaceChildren(
    "Job ", el("a", { href: "/ui/job.html?id=" + id, id: "job-id" }, String(id)), ": ",
    el("span", { id: "job-status" }, status));
}

// A form's input that is not what RAPI takes: shown in the form, nothing is sent.
class InputError extends Error {}

// A whole number (MiB, vCPUs) from an input; undefined when empty and optional.
function whole(id, what, { optional = false, min = 1, unit = "MiB" } = {}) {
  const text = document.getElementById(id).value.trim();
  if (text === "" && optional) return undefined;
  if (!/^[0-9]+$/.test(text)) {
    throw new InputError(`${what}: a whole number${unit ? " of " + unit : ""} is needed,`
      + ` not "${text}"`);
  }
  const value = Number(text);
  if (value < min) throw new InputError(`${what}: at least ${min}`);
  return value;
}

// Submit one request, show the job it created and follow it (status, progress).
async function submit(method, url, body) {
  document.getElementById("error").hidden = true;     // an earlier job's error
  const job = await api(method, url, body);
  myJobs.add(job);
  related.add(job);
  showJob(job, "submitted");
  document.getElementById("job-progress").hidden = true;
  // the job may have ended before its id came back: its events went by unseen
  const now = await api("GET", "/2/jobs/" + job);
  const shown = document.getElementById("job-status").textContent;
  const same = document.getElementById("job-id").textContent === String(job);
  if (same && FINAL.includes(now.status) && !FINAL.includes(shown)) {
    showJob(job, now.status);
    if (now.status === "error") showJobError(now);
    await render();
  }
  return job;
}

// A failed job's error text (its first failed opcode's result) in the error box.
function showJobError(job) {
  const i = (job.opstatus || []).indexOf("error");
  const result = i >= 0 ? (job.opresult || [])[i] : null;
  const text = Array.isArray(result) && Array.isArray(result[1]) ? result[1][0]
    : JSON.stringify(result);
  showError(new Error(`Job ${job.id} failed: ${text}`));
}

// A form: build() answers [method, url, body] or throws InputError; the job goes to
// the page's job line, an input or RAPI error to the form's message.
function form(id, build) {
  const f = document.getElementById(id);
  const msg = document.getElementById(id + "-msg");
  for (const control of f.elements) control.disabled = readonly;
  f.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    msg.textContent = "";
    msg.className = "msg";
    try {
      const [method, url, body] = build();
      const job = await submit(method, url, body);
      msg.textContent = `Submitted job ${job}`;
    } catch (err) {
      msg.textContent = err.message;
      msg.className = "msg bad";
      if (!(err instanceof InputError)) console.warn(err);
    }
  });
}

let nodes = [];

function fillSelect(select, options) {
  const keep = select.value;
  select.replaceChildren(...options.map(([value, text]) => el("option", { value }, text)));
  if (options.some(([value]) => value === keep)) select.value = keep;
}

// The parts of the forms that follow the instance: other nodes, disks, tags, hints.
function renderForms(inst) {
  const others = nodes.filter((n) => n !== inst.pnode).map((n) => [n, n]);
  for (const id of ["migrate-target", "failover-target"]) {
    fillSelect(document.getElementById(id), [["", "(automatic)"], ...others]);
  }
  const disks = (inst["disk.sizes"] || []).map((size, i) => [String(i), `disk/${i} (${size} MiB)`]);
  fillSelect(document.getElementById("grow-disk"), disks);
  document.getElementById("grow-submit").disabled = readonly || disks.length === 0;
  if (disks.length === 0) document.getElementById("grow-msg").textContent = "No disk to grow";
  const be = inst.beparams || {};
  document.getElementById("maxmem").placeholder = String(be.maxmem ?? "");
  document.getElementById("minmem").placeholder = String(be.minmem ?? "");
  document.getElementById("vcpus").placeholder = String(be.vcpus ?? "");
  document.getElementById("tag-list").replaceChildren(...(inst.tags || []).map((tag) => {
    const remove = el("button", { type: "button", class: "tag-remove", dataset: { tag } }, "Remove");
    remove.disabled = readonly;
    remove.addEventListener("click", () => {
      const msg = document.getElementById("tags-msg");
      msg.textContent = "";
      msg.className = "msg";
      submit("DELETE", path + "/tags?tag=" + encodeURIComponent(tag)).catch((err) => {
        msg.textContent = err.message;
        msg.className = "msg bad";
      });
    });
    return el("li", { dataset: { tag } }, el("span", { class: "tag" }, tag), " ", remove);
  }));
}

function mib(bytes) {
  return (bytes / 1048576).toFixed(1) + " MiB";
}

// One running operation (doc/progress.md, "Runtime jobs") as a line and a <progress>.
function runtimeItem(job) {
  const i = job.info || {};
  const what = i.jobType === "block" ? `${i.opType} ${i.device}` : String(i.jobType);
  const bar = el("progress", { max: String(i.end || 1) });
  if (i.end) bar.value = i.cur || 0;      // no end known: an indeterminate bar
  const pct = i.end ? (100 * (i.cur || 0) / i.end).toFixed(1) + "%" : "?";
  const parts = [`${mib(i.cur || 0)}/${i.end ? mib(i.end) : "?"}`];
  if (i.rate) parts.push(mib(i.rate) + "/s");
  if (i.eta !== null && i.eta !== undefined) parts.push(`eta ${Math.ceil(i.eta)}s`);
  if (job.state !== "normal") parts.push(String(job.state));
  return el("li", { dataset: { kind: String(i.jobType), op: String(i.opType || "") } },
    el("span", { class: "what" }, `${what}: ${pct} (${parts.join(", ")})`), " ", bar);
}

// The instance's running operations: read on the instance's events and on its jobs'
// progress entries, and every second while one runs (a runtime job nobody logs).
let runtimeBusy = false;
let runtimeAgain = false;
let runtimeTimer = null;

async function renderRuntime() {
  if (runtimeBusy) { runtimeAgain = true; return; }
  runtimeBusy = true;
  try {
    do {
      runtimeAgain = false;
      const answer = await api("PUT", "/2/query/instance",
        { fields: ["name", "hv_jobs"], qfilter: ["=", "name", name] });
      const cell = ((answer.data || [])[0] || [])[1];
      const list = cell && cell[0] === 0 && Array.isArray(cell[1]) ? cell[1] : [];
      document.getElementById("runtime-jobs").replaceChildren(...list.map(runtimeItem));
      document.getElementById("runtime").hidden = list.length === 0;
      clearTimeout(runtimeTimer);
      runtimeTimer = list.length ? setTimeout(refreshRuntime, 1000) : null;
    } while (runtimeAgain);
  } finally {
    runtimeBusy = false;
  }
}

function refreshRuntime() {
  renderRuntime().catch(showError);
}

// A progress entry of the job shown (doc/progress.md, "Progress entries").
function showJobProgress(message) {
  const bar = document.getElementById("job-progress");
  bar.max = message.end || 1;
  bar.value = message.done && message.end ? message.end : (message.cur || 0);
  bar.dataset.op = String(message.op);
  bar.dataset.done = message.done ? "1" : "0";
  bar.title = `${message.op}: ${mib(message.cur || 0)}/${mib(message.end || 0)}`;
  bar.hidden = false;
}

const s = await session();
navbar(s);
const readonly = s.role === "readonly";
const related = new Set();    // jobs about this instance: their progress re-reads it
for (const [id, [method, url]] of Object.entries(ACTIONS)) {
  const button = document.getElementById(id);
  button.disabled = readonly;
  if (readonly) button.title = "Your role (readonly) cannot change instances";
  button.addEventListener("click", () => submit(method, url).catch(showError));
}
form("migrate", () => {
  const body = { mode: document.getElementById("migrate-mode").value };
  const target = document.getElementById("migrate-target").value;
  if (target) body.target_node = target;
  return ["PUT", path + "/migrate", body];
});
form("failover", () => {
  const target = document.getElementById("failover-target").value;
  return ["PUT", path + "/failover", target ? { target_node: target } : {}];
});
form("modify", () => {
  const maxmem = whole("maxmem", "Memory", { optional: true });
  const minmem = whole("minmem", "Minimum memory", { optional: true });
  const vcpus = whole("vcpus", "vCPUs", { optional: true, unit: "" });
  const beparams = {};
  if (maxmem !== undefined) {
    beparams.maxmem = maxmem;
    beparams.minmem = minmem ?? maxmem;
  } else if (minmem !== undefined) {
    beparams.minmem = minmem;
  }
  if (beparams.minmem !== undefined && beparams.minmem > (maxmem ?? current.beparams.maxmem)) {
    throw new InputError("Minimum memory: not more than the memory");
  }
  if (vcpus !== undefined) beparams.vcpus = vcpus;
  if (Object.keys(beparams).length === 0) throw new InputError("Nothing to change");
  return ["PUT", path + "/modify", { beparams }];
});
form("grow", () => {
  const disk = document.getElementById("grow-disk").value;
  if (disk === "") throw new InputError("No disk to grow");
  const amount = whole("grow-amount", "Add");
  return ["POST", `${path}/disk/${disk}/grow`, { amount }];
});
form("tags", () => {
  const tag = document.getElementById("tag-new").value.trim();
  if (!tag) throw new InputError("Tag: empty");
  if (/\s/.test(tag)) throw new InputError("Tag: no spaces");
  return ["PUT", path + "/tags?tag=" + encodeURIComponent(tag)];
});
if (readonly) {
  for (const msg of document.querySelectorAll(".forms .msg")) {
    msg.textContent = "Your role (readonly) cannot change instances";
  }
}
events(["instance.state", "job.submitted", "job.status", "job.log", "job.finished"], (ev) => {
  if (ev.type === "instance.state" && ev.instance === name) {
    render().catch(showError);
    refreshRuntime();
  }
  if (ev.type === "job.submitted"
      && (ev.data.summary || []).some((op) => op.includes("(" + name + ")"))) {
    related.add(ev.job_id);
  }
  if (ev.type === "job.log" && ev.data.log_type === "progress") {
    const shown = document.getElementById("job-id");
    if (shown && shown.textContent === String(ev.job_id)) showJobProgress(ev.data.message);
    if (related.has(ev.job_id)) refreshRuntime();
  }
  if ((ev.type === "job.status" || ev.type === "job.finished") && myJobs.has(ev.job_id)) {
    showJob(ev.job_id, ev.data.status);
    if (ev.type === "job.finished") {
      render().catch(showError);
      if (ev.data.status === "error") api("GET", "/2/jobs/" + ev.job_id).then(showJobError, showError);
    }
  }
  if (ev.type === "job.finished" && related.has(ev.job_id)) refreshRuntime();
  if ((ev.type === "job.submitted" || ev.type === "job.finished")
      && (related.has(ev.job_id) || myJobs.has(ev.job_id))) refreshRecent();
});
// ---- recent jobs: the queue's jobs whose summary names the instance, newest first
// (a job query of summaries only, answered from the master's memory; filtered here)
const RECENT = 10;
let recentTimer = null;

async function renderRecent() {
  const res = await api("PUT", "/2/query/job", { fields: ["id", "summary", "status"],
                                                 qfilter: ["!", ["?", "archived"]] });
  const mine = (res.data || []).map(([[, id], [, summary], [, status]]) => ({ id, summary, status }))
    .filter((j) => (j.summary || []).some((op) => op.includes("(" + name + ")")))
    .sort((a, b) => b.id - a.id).slice(0, RECENT);
  document.getElementById("recent-jobs").replaceChildren(...mine.map((j) =>
    el("li", { dataset: { job: String(j.id) } },
       el("a", { href: "/ui/job.html?id=" + j.id }, String(j.id)), " ",
       (j.summary || []).join(", "), ": ", el("span", { class: "recent-status" }, j.status))));
  if (!mine.length) document.getElementById("recent-jobs").append(el("li", {}, "none in the queue"));
}

function refreshRecent() {      // at most one read per 300 ms of events
  if (recentTimer) return;
  recentTimer = setTimeout(() => { recentTimer = null; renderRecent().catch(showError); }, 300);
}
renderRecent().catch(showError);
nodes = (await api("GET", "/2/nodes")).map((n) => n.id).sort();
render().catch(showError);
refreshRuntime();
