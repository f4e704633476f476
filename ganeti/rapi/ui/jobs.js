// The job list, newest first; a job's row follows the event stream (a job event reads
// that job again with GET /2/jobs/ID): no polling, no reload.
import { api, el, events, navbar, session, showError } from "/ui/common.js";

const byId = new Map();         // job id -> RAPI job record
const pending = new Set();      // ids read again on the next tick

// a RAPI timestamp ([seconds, microseconds]) as local time
function timestamp(ts) {
  if (!Array.isArray(ts)) return "";
  return new Date(ts[0] * 1000 + Math.floor(ts[1] / 1000)).toLocaleString();
}

function jobClass(status) {
  if (status === "success") return "ok";
  if (status === "error") return "bad";
  if (status === "canceled" || status === "canceling") return "down";
  return "busy";
}

function row(job) {
  return el("tr", { dataset: { id: String(job.id) } },
    el("td", {}, el("a", { href: "/ui/job.html?id=" + job.id }, String(job.id))),
    el("td", { class: "summary" }, (job.summary || []).join(", ")),
    el("td", { class: "status " + jobClass(job.status) }, job.status || ""),
    el("td", {}, timestamp(job.received_ts)), el("td", {}, timestamp(job.end_ts)));
}

function render() {
  const list = [...byId.values()].sort((a, b) => b.id - a.id);
  const frag = document.createDocumentFragment();
  for (const job of list) frag.append(row(job));
  document.querySelector("#jobs tbody").replaceChildren(frag);
  document.getElementById("shown").textContent = `${list.length} jobs`;
}

async function refresh() {
  const ids = [...pending];
  pending.clear();
  for (const id of ids) {
    try {
      byId.set(id, await api("GET", "/2/jobs/" + id));
    } catch (err) {
      if (err.status === 404) byId.delete(id);   // archived meanwhile
      else throw err;
    }
  }
  render();
}

const s = await session();
navbar(s);
let loaded = false;
events(["job.submitted", "job.status", "job.finished"], (ev) => {
  if (ev.job_id === null || ev.job_id === undefined) return;
  const first = pending.size === 0;
  pending.add(ev.job_id);
  if (first && loaded) setTimeout(() => refresh().catch(showError), 50);
});
try {
  for (const job of await api("GET", "/2/jobs?bulk=1")) byId.set(job.id, job);
  loaded = true;
  if (pending.size) await refresh(); else render();
  document.body.dataset.ready = "1";
} catch (err) {
  showError(err);
}
