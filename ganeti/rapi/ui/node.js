// One node: its roles, memory and disk use, its instances and tags; drain/undrain and
// tag changes through RAPI with the job each created.  A readonly user's buttons are off.
import { api, el, events, instanceLink, navbar, session, showError } from "/ui/common.js";

const name = new URLSearchParams(location.search).get("name") || "";
const path = "/2/nodes/" + encodeURIComponent(name);
const myJobs = new Set();
const FINAL = ["success", "error", "canceled"];
let readonly = true;

function bar(total, free, unit) {
  if (!total) return "-";
  const used = total - (free || 0);
  const meter = el("meter", { min: "0", max: String(total), value: String(used),
                              high: String(total * 0.9), optimum: "0" });
  return el("span", {}, meter, ` ${used} / ${total} ${unit}`);
}

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

async function render() {
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
  document.body.dataset.ready = "1";
}

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

const s = await session();
navbar(s);
readonly = s.role === "readonly";
for (const id of ["drain", "undrain", "tag-add", "tag-new"]) {
  const control = document.getElementById(id);
  control.disabled = readonly;
  if (readonly) control.title = "Your role (readonly) cannot change nodes";
}
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
events(["node.role", "instance.added", "instance.removed", "instance.state", "job.status",
        "job.finished"], (ev) => {
  if (ev.type.startsWith("job.")) {
    if (!myJobs.has(ev.job_id)) return;
    showJob(ev.job_id, ev.data.status);
    if (ev.type === "job.finished") render().catch(showError);
  } else if (ev.node === name || ev.type.startsWith("instance.")) {
    render().catch(showError);
  }
});
render().catch(showError);
