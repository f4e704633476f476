// One instance: its parameters and status, start/stop/reboot through RAPI with the job
// each created; the status follows the event stream.  A readonly user's buttons are off.
import { api, el, events, navbar, session, showError, statusClass } from "/ui/common.js";

const name = new URLSearchParams(location.search).get("name") || "";
const path = "/2/instances/" + encodeURIComponent(name);
const ACTIONS = {   // button id -> RAPI request
  startup: ["PUT", path + "/startup"],
  shutdown: ["PUT", path + "/shutdown"],
  reboot: ["POST", path + "/reboot"],
};
const myJobs = new Set();
const FINAL = ["success", "error", "canceled"];

async function render() {
  const inst = await api("GET", path);
  document.getElementById("name").textContent = inst.name;
  const status = document.getElementById("status");
  status.textContent = inst.status;
  status.className = statusClass(inst.status);
  const fields = [["Primary node", inst.pnode], ["Secondary nodes", (inst.snodes || []).join(", ")],
    ["OS", inst.os], ["Hypervisor", inst.hypervisor], ["Disk template", inst.disk_template],
    ["Disks (MiB)", (inst["disk.sizes"] || []).join(", ")], ["NICs (MAC)", (inst["nic.macs"] || []).join(", ")],
    ["Tags", (inst.tags || []).join(", ")]];
  document.getElementById("params").replaceChildren(
    ...fields.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v ?? ""))]));
  document.body.dataset.ready = "1";
}

function showJob(id, status) {
  document.getElementById("job").replaceChildren(
    "Job ", el("a", { href: "/2/jobs/" + id, id: "job-id" }, String(id)), ": ",
    el("span", { id: "job-status" }, status));
}

const s = await session();
navbar(s);
const readonly = s.role === "readonly";
for (const [id, [method, url]] of Object.entries(ACTIONS)) {
  const button = document.getElementById(id);
  button.disabled = readonly;
  if (readonly) button.title = "Your role (readonly) cannot change instances";
  button.addEventListener("click", async () => {
    try {
      const job = await api(method, url);
      myJobs.add(job);
      showJob(job, "submitted");
      // the job may have ended before its id came back: its events went by unseen
      const now = await api("GET", "/2/jobs/" + job);
      const shown = document.getElementById("job-status").textContent;
      const same = document.getElementById("job-id").textContent === String(job);
      if (same && FINAL.includes(now.status) && !FINAL.includes(shown)) {
        showJob(job, now.status);
        await render();
      }
    } catch (err) {
      showError(err);
    }
  });
}
events(["instance.state", "job.status", "job.finished"], (ev) => {
  if (ev.type === "instance.state" && ev.instance === name) render().catch(showError);
  if (ev.type !== "instance.state" && myJobs.has(ev.job_id)) {
    showJob(ev.job_id, ev.data.status);
    if (ev.type === "job.finished") render().catch(showError);
  }
});
render().catch(showError);
