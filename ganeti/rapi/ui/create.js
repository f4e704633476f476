// A new instance: name, OS, disk template and sizes, memory, vCPUs, and a primary node
// or the allocator; POST /2/instances (request version 1), then the job it created and,
// once it succeeded, a link to the instance.  A readonly user's form is off.
import { api, el, events, instanceLink, navbar, session, showError } from "/ui/common.js";

const FINAL = ["success", "error", "canceled"];
let jobId = null;
let instName = null;

// Input that is not what RAPI takes: shown under the form, nothing is sent.
class InputError extends Error {}

function value(id) {
  return document.getElementById(id).value.trim();
}

function whole(text, what) {
  if (!/^[0-9]+$/.test(text) || Number(text) < 1) {
    throw new InputError(`${what}: a whole number of at least 1 is needed, not "${text}"`);
  }
  return Number(text);
}

function fillSelect(id, options) {
  document.getElementById(id).replaceChildren(
    ...options.map(([v, text]) => el("option", { value: v }, text)));
}

// The request body from the form (InputError for bad input).
function build() {
  const name = value("name");
  if (!/^[A-Za-z0-9][A-Za-z0-9.-]*$/.test(name)) {
    throw new InputError(name ? `Name: "${name}" is not a host name` : "Name: needed");
  }
  const os = value("os");
  if (!os) throw new InputError("OS: none is available");
  const template = value("disk_template");
  const sizes = value("disks").split(",").map((t) => t.trim()).filter((t) => t !== "");
  if (template === "diskless" && sizes.length) throw new InputError("Disks: diskless takes none");
  if (template !== "diskless" && !sizes.length) {
    throw new InputError(`Disks: ${template} needs at least one disk size`);
  }
  const disks = sizes.map((t, i) => ({ size: whole(t, `Disk ${i} size (MiB)`) }));
  const beparams = {};
  if (value("memory")) {
    beparams.maxmem = whole(value("memory"), "Memory (MiB)");
    beparams.minmem = beparams.maxmem;
  }
  if (value("vcpus")) beparams.vcpus = whole(value("vcpus"), "vCPUs");
  const check = document.getElementById("name_check").checked;
  const body = { __version__: 1, mode: "create", name, os, disk_template: template, disks,
    nics: [{}], beparams, name_check: check, ip_check: check,
    start: document.getElementById("start").checked };
  if (document.getElementById("place-node").checked) {
    body.pnode = value("pnode");
    if (value("snode")) body.snode = value("snode");
    if (body.snode === body.pnode) throw new InputError("Secondary node: not the primary node");
  } else if (value("iallocator")) {
    body.iallocator = value("iallocator");     // empty: the cluster's default, or built-in
  }
  return body;
}

function showJob(id, status) {
  document.getElementById("job").replaceChildren(
    "Job ", el("a", { href: "/ui/job.html?id=" + id, id: "job-id" }, String(id)), ": ",
    el("span", { id: "job-status" }, status));
  if (status === "success") {
    document.getElementById("done").replaceChildren("Created: ", instanceLink(instName));
  }
}

async function finished(job) {
  showJob(job.id, job.status);
  if (job.status === "error") {
    const i = (job.opstatus || []).indexOf("error");
    const result = i >= 0 ? (job.opresult || [])[i] : null;
    const text = Array.isArray(result) && Array.isArray(result[1]) ? result[1][0]
      : JSON.stringify(result);
    const msg = document.getElementById("create-msg");
    msg.textContent = `Job ${job.id} failed: ${text}`;
    msg.className = "msg bad";
  }
}

const s = await session();
navbar(s);
const readonly = s.role === "readonly";
const form = document.getElementById("create");
for (const control of form.elements) control.disabled = readonly;
const msg = document.getElementById("create-msg");
if (readonly) msg.textContent = "Your role (readonly) cannot create instances";

const [oses, info, nodes] = await Promise.all(
  [api("GET", "/2/os"), api("GET", "/2/info"), api("GET", "/2/nodes")]);
fillSelect("os", oses.map((o) => [o, o]));
fillSelect("disk_template", (info.enabled_disk_templates || []).map((t) => [t, t]));
const names = nodes.map((n) => n.id).sort();
fillSelect("pnode", names.map((n) => [n, n]));
fillSelect("snode", [["", "(none)"], ...names.map((n) => [n, n])]);
const alloc = document.getElementById("iallocator");
alloc.value = info.default_iallocator || "";
alloc.placeholder = "the built-in one";

form.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  msg.textContent = "";
  msg.className = "msg";
  let body;
  try {
    body = build();
  } catch (err) {
    msg.textContent = err.message;
    msg.className = "msg bad";
    return;
  }
  try {
    instName = body.name;
    jobId = await api("POST", "/2/instances", body);
    showJob(jobId, "submitted");
    document.getElementById("done").replaceChildren();
    // the job may have ended before its id came back: its events went by unseen
    const now = await api("GET", "/2/jobs/" + jobId);
    if (FINAL.includes(now.status)) await finished(now);
  } catch (err) {
    msg.textContent = err.message;
    msg.className = "msg bad";
  }
});
events(["job.status", "job.finished"], (ev) => {
  if (ev.job_id !== jobId) return;
  if (ev.type === "job.finished") api("GET", "/2/jobs/" + ev.job_id).then(finished, showError);
  else showJob(ev.job_id, ev.data.status);
});
document.body.dataset.ready = "1";
