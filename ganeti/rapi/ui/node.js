// One node: its roles, memory and disk use, its instances and tags; drain/undrain and
// tag changes through RAPI with the job each created; evacuation with its plan drawn as
// a graph of jobs first; its storage units (a job per storage type, so for users who may
// write only) and the disk space every user can read.  A readonly user's buttons are off.
import { api, bar, el, events, instanceLink, navbar, serial, session, showError } from "/ui/common.js";
import { drawPlan } from "/ui/plan.js";

const name = new URLSearchParams(location.search).get("name") || "";
const path = "/2/nodes/" + encodeURIComponent(name);
const myJobs = new Set();
const FINAL = ["success", "error", "canceled"];
let readonly = true;

const ROLES = { M: "master", C: "master candidate", R: "regular", D: "drained", O: "offline" };

function flags(node) {
  const out = [];
  if (node.role === "M") out.push("master");
  if (node.master_candidate) out.push("master candidate");
  if (node.drained) out.push("drained");
  if (node.offline) out.push("offline");
  if (node.vm_capable) out.push("vm_capable");
  if (node.master_capable) out.push("master_capable");
  return out;
}

function tagItem(tag) {
  const remove = el("button", { type: "button", class: "tag-remove", dataset: { tag } }, "\u00d7");
  remove.title = `Remove the tag ${tag}`;
  remove.disabled = readonly;
  remove.addEventListener("click", () => submit("DELETE", path + "/tags?tag=" + encodeURIComponent(tag)));
  return el("li", { dataset: { tag } }, tag, " ", remove);
}

async function draw() {
  const node = await api("GET", path);
  document.getElementById("name").textContent = node.name;
  document.getElementById("role").textContent = ROLES[node.role] || node.role || "";
  document.getElementById("flags").replaceChildren(
    ...flags(node).map((f) => el("span", { class: "flag", dataset: { flag: f } }, f)));
  document.getElementById("drain").disabled = readonly || node.drained || node.role === "M";
  document.getElementById("undrain").disabled = readonly || !node.drained;
  const fields = [["Memory", bar(node.mtotal, node.mfree, "MiB")],
    ["Disk", bar(node.dtotal, node.dfree, "MiB")], ["CPUs", String(node.ctotal ?? "")],
    ["Primary IP", node.pip || ""], ["Secondary IP", node.sip || ""],
    ["Group", node["group.uuid"] || ""]];
  document.getElementById("params").replaceChildren(...fields.flatMap(([k, v]) => [
    el("dt", {}, k), el("dd", { class: k.toLowerCase().replace(" ", "-") }, v)]));
  const rows = [...(node.pinst_list || []).map((i) => [i, "primary"]),
                ...(node.sinst_list || []).map((i) => [i, "secondary"])]
    .map(([i, how]) => el("tr", { dataset: { name: i, kind: how } },
                          el("td", {}, instanceLink(i)), el("td", {}, how)));
  document.querySelector("#instances tbody").replaceChildren(...rows);
  document.getElementById("tags").replaceChildren(...(node.tags || []).slice().sort().map(tagItem));
  document.getElementById("storage-capacity").replaceChildren(...capacity(node));
  document.body.dataset.ready = "1";
}
const render = serial(draw);   // redraws never answer out of order

function showJob(id, status) {
  document.getElementById("job").replaceChildren(
    "Job ", el("a", { href: "/ui/job.html?id=" + id, id: "job-id" }, String(id)), ": ",
    el("span", { id: "job-status" }, status));
}

// submit one change; the job is followed on the event stream
async function submit(method, url, body) {
  try {
    const job = await api(method, url, body);
    myJobs.add(job);
    showJob(job, "submitted");
    // the job may have ended before its id came back: its events went by unseen
    const now = await api("GET", "/2/jobs/" + job);
    const same = document.getElementById("job-id").textContent === String(job);
    if (same && FINAL.includes(now.status)
        && !FINAL.includes(document.getElementById("job-status").textContent)) {
      showJob(job, now.status);
      await render();
    }
  } catch (err) {
    showError(err);
  }
}

// ---- evacuation: "Show plan" submits the evacuation with ?plan=1 (a job whose result
// is the plan) and draws it; "Apply" submits the same request with that plan
// (apply_plan): exactly the jobs shown, refused once the cluster changed since.
const waiters = new Map();    // job id -> called at its job.finished
const evacJobs = new Map();   // job id of a moving job -> its status element
let plan = null;              // the plan shown, and the request that made it
let planBody = null;

// The job once it has ended: its job.finished event, or over already when first read.
async function finished(id) {
  const done = new Promise((resolve) => waiters.set(id, resolve));
  const now = await api("GET", "/2/jobs/" + id);
  if (FINAL.includes(now.status)) {
    waiters.delete(id);
    return now;
  }
  await done;
  return api("GET", "/2/jobs/" + id);
}

function jobError(job) {
  const i = (job.opstatus || []).indexOf("error");
  const result = i >= 0 ? (job.opresult || [])[i] : null;
  const text = Array.isArray(result) && Array.isArray(result[1]) ? result[1][0] : JSON.stringify(result);
  return `Job ${job.id} ${job.status}: ${text}`;
}

function jobLink(id) {
  return el("a", { href: "/ui/job.html?id=" + id }, String(id));
}

function evacMsg(bad, ...parts) {
  const msg = document.getElementById("evac-msg");
  msg.className = bad ? "msg bad" : "msg";
  msg.replaceChildren(...parts);
}

function evacBody() {
  const body = { mode: document.getElementById("evac-mode").value };
  const target = document.getElementById("evac-target").value;
  const iallocator = document.getElementById("evac-iallocator").value.trim();
  if (target) body.remote_node = target;
  else if (iallocator) body.iallocator = iallocator;
  if (document.getElementById("evac-early-release").checked) body.early_release = true;
  return body;
}

function forgetPlan() {
  plan = null;
  document.getElementById("evac-apply").disabled = true;
  document.getElementById("evac-graph").hidden = true;
  document.getElementById("evac-failed").replaceChildren();
}

async function showPlan() {
  forgetPlan();
  document.getElementById("evac-jobs").replaceChildren();
  const body = evacBody();
  try {
    evacMsg(false, "Planning\u2026");
    const id = await api("POST", path + "/evacuate?plan=1", body);
    evacMsg(false, "Planning: job ", jobLink(id));
    const job = await finished(id);
    if (job.status !== "success") {
      evacMsg(true, jobError(job));
      return;
    }
    const made = job.opresult[0].plan;
    const steps = made.steps || [];
    document.getElementById("evac-failed").replaceChildren(...(made.failed || []).map(
      ([inst, why]) => el("li", { class: "bad", dataset: { name: inst } }, `${inst} cannot be moved: ${why}`)));
    if (!steps.length) {
      evacMsg(false, "Nothing to move (plan job ", jobLink(id), ")");
      return;
    }
    const graph = document.getElementById("evac-graph");
    graph.hidden = false;
    drawPlan(graph, made);
    plan = made;
    planBody = body;
    evacMsg(false, `${steps.length} job(s) planned (plan job `, jobLink(id), "); Apply submits them");
    document.getElementById("evac-apply").disabled = readonly;
  } catch (err) {
    evacMsg(true, String(err.message || err));
  }
}

function showEvacJob(id, status) {
  const span = evacJobs.get(id);
  if (span) span.textContent = status;
}

async function applyPlan() {
  if (!plan) return;
  document.getElementById("evac-apply").disabled = true;
  const body = { ...planBody, apply_plan: plan };
  forgetPlan();
  try {
    const id = await api("POST", path + "/evacuate", body);
    evacMsg(false, "Evacuating: job ", jobLink(id));
    const job = await finished(id);
    if (job.status !== "success") {
      evacMsg(true, jobError(job));
      return;
    }
    const result = job.opresult[0] || {};
    const items = (result.jobs || []).map(([ok, value]) => {
      if (!ok) return el("li", { class: "bad" }, `not submitted: ${value}`);
      const span = el("span", { class: "evac-status" }, "submitted");
      evacJobs.set(Number(value), span);
      return el("li", { dataset: { job: String(value) } }, "Job ", jobLink(value), ": ", span);
    });
    const failed = (result.failed || []).map(([inst, why]) =>
      el("li", { class: "bad" }, `${inst} cannot be moved: ${why}`));
    document.getElementById("evac-jobs").replaceChildren(...items, ...failed);
    evacMsg(false, `Evacuation (job `, jobLink(id), `) submitted ${items.length} job(s):`);
    // a job may have ended before its id came back: its events went by unseen
    for (const [jid] of evacJobs) {
      api("GET", "/2/jobs/" + jid).then((j) => showEvacJob(jid, j.status), showError);
    }
  } catch (err) {
    evacMsg(true, String(err.message || err));
  }
}

// ---- storage units: RAPI lists them only as a job (GET .../storage, a write-only GET:
// the LU locks the node), one job per storage type of the cluster's enabled disk templates.
const TEMPLATE_STORAGE = { plain: ["lvm-vg", "lvm-pv"], file: ["file"], sharedfile: ["sharedfile"] };
const STORAGE_FIELDS = ["name", "type", "size", "used", "free", "allocatable"];
const storageJobs = new Map();   // job id of a storage query -> its status element

// the figures of the node query (every user may read them): disk and spindles
function capacity(node) {
  if (node.dtotal == null) return ["Disk: not reported (the node did not answer)"];
  const out = [`Disk: ${node.dfree ?? "?"} MiB free of ${node.dtotal} MiB`];
  if (node.sptotal) out.push(`; spindles: ${node.spfree ?? "?"} free of ${node.sptotal}`);
  out.push(" (the node's default storage)");
  return out;
}

function storageCell(field, value) {
  let text = value;
  if (value === null || value === undefined) text = "-";
  else if (field === "allocatable") text = value ? "yes" : "no";
  else if (["size", "used", "free"].includes(field)) text = `${value} MiB`;
  return el("td", { class: field }, String(text));
}

// one storage type's units: the job submitted, followed to its end; its rows (none on failure)
async function storageOfType(stype) {
  const li = el("li", { dataset: { type: stype } }, `${stype}: `);
  document.getElementById("storage-jobs").append(li);
  try {
    const id = await api("GET", `${path}/storage?storage_type=${encodeURIComponent(stype)}`
                                + `&output_fields=${STORAGE_FIELDS.join(",")}`, undefined, true);
    const span = el("span", { class: "storage-status" }, "submitted");
    storageJobs.set(id, span);
    li.dataset.job = String(id);
    li.append("job ", jobLink(id), ": ", span);
    const job = await finished(id);
    storageJobs.delete(id);
    span.textContent = job.status;
    if (job.status !== "success") {
      li.append(el("span", { class: "bad" }, " " + jobError(job)));
      return [];
    }
    return job.opresult[0] || [];
  } catch (err) {
    li.append(el("span", { class: "bad" }, String(err.message || err)));
    return [];
  }
}

async function loadStorage() {
  const reload = document.getElementById("storage-reload");
  const msg = document.getElementById("storage-msg");
  delete document.body.dataset.storage;
  reload.disabled = true;
  if (readonly) {
    reload.title = "Your role (readonly) cannot list storage units";
    msg.textContent = "Listing the storage units needs write access (RAPI runs a job for it:"
      + " operator or admin role); the disk space above is the node's own report.";
    document.body.dataset.storage = "1";
    return;
  }
  document.getElementById("storage-jobs").replaceChildren();
  const info = await api("GET", "/2/info");
  const types = (info.enabled_disk_templates || []).flatMap((t) => TEMPLATE_STORAGE[t] || []);
  let table = [];
  if (!types.length) {
    msg.textContent = "No enabled disk template has storage units to list.";
  } else {
    msg.textContent = "Listing the storage units\u2026";
    const rows = (await Promise.all(types.map(storageOfType))).flat();
    msg.textContent = rows.length ? "" : "No storage units on this node.";
    const body = rows.map((row) => el("tr", { dataset: { name: row[0], type: row[1] } },
      ...row.map((value, i) => storageCell(STORAGE_FIELDS[i], value))));
    const head = ["Name", "Type", "Size", "Used", "Free", "Allocatable"].map((t) => el("th", {}, t));
    if (rows.length) {
      table = [el("table", { id: "storage-table" }, el("thead", {}, el("tr", {}, ...head)),
                  el("tbody", {}, ...body))];
    }
  }
  document.getElementById("storage-units").replaceChildren(...table);
  reload.disabled = false;
  document.body.dataset.storage = "1";
}

const s = await session();
navbar(s);
readonly = s.role === "readonly";
for (const id of ["drain", "undrain", "tag-add", "tag-new"]) {
  const control = document.getElementById(id);
  control.disabled = readonly;
  if (readonly) control.title = "Your role (readonly) cannot change nodes";
}
const evacForm = document.getElementById("evacuate");
for (const control of evacForm.elements) {
  control.disabled = readonly || control.id === "evac-apply";
  if (readonly) control.title = "Your role (readonly) cannot evacuate nodes";
}
evacForm.addEventListener("submit", (ev) => { ev.preventDefault(); showPlan(); });
evacForm.addEventListener("change", () => {
  document.getElementById("evac-iallocator").disabled = readonly
    || document.getElementById("evac-target").value !== "";
  forgetPlan();
});
document.getElementById("evac-apply").addEventListener("click", applyPlan);
document.getElementById("drain").addEventListener("click", () => submit("PUT", path + "/role", "drained"));
document.getElementById("undrain").addEventListener("click", () => submit("PUT", path + "/role", "regular"));
document.getElementById("tag-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const input = document.getElementById("tag-new");
  const tag = input.value.trim();
  if (!tag) return;
  input.value = "";
  submit("PUT", path + "/tags?tag=" + encodeURIComponent(tag));
});
const stream = events(["node.role", "instance.added", "instance.removed", "instance.state", "job.status",
        "job.finished"], (ev) => {
  if (ev.type === "job.finished" && waiters.has(ev.job_id)) {
    waiters.get(ev.job_id)();
    waiters.delete(ev.job_id);
  }
  if (ev.type.startsWith("job.") && storageJobs.has(ev.job_id)) {
    storageJobs.get(ev.job_id).textContent = ev.data.status;
  }
  if (ev.type.startsWith("job.") && evacJobs.has(ev.job_id)) {
    showEvacJob(ev.job_id, ev.data.status);
    if (ev.type === "job.finished") render().catch(showError);
  }
  if (ev.type.startsWith("job.")) {
    if (!myJobs.has(ev.job_id)) return;
    showJob(ev.job_id, ev.data.status);
    if (ev.type === "job.finished") render().catch(showError);
  } else if (ev.node === name || ev.type.startsWith("instance.")) {
    render().catch(showError);
  }
});
const others = (await api("GET", "/2/nodes")).map((n) => n.id).filter((n) => n !== name).sort();
document.getElementById("evac-target").append(...others.map((n) => el("option", { value: n }, n)));
render().catch(showError);
document.getElementById("storage-reload").addEventListener("click", () => loadStorage().catch(showError));
// the storage jobs are followed on the event stream: submitted once it is open (its
// subscription is made before it opens), so that no job's end goes by unseen
new Promise((resolve) => {
  if (stream.readyState === EventSource.OPEN) resolve();
  else stream.addEventListener("open", resolve, { once: true });
}).then(loadStorage).catch(showError);
