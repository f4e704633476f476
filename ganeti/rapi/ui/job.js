// One job: its opcodes and their status, its log (live), the progress of a long
// operation as a bar, and Cancel (DELETE /2/jobs/ID).  Each event about the job reads it
// again with GET /2/jobs/ID.  A readonly user's Cancel is off.
import { api, el, navbar, session, showError } from "/ui/common.js";

const id = new URLSearchParams(location.search).get("id") || "";
const path = "/2/jobs/" + encodeURIComponent(id);
const FINAL = ["success", "error", "canceled"];
let readonly = true;

function timestamp(ts) {
  if (!Array.isArray(ts)) return "";
  return new Date(ts[0] * 1000 + Math.floor(ts[1] / 1000)).toLocaleString();
}

function statusClass(status) {
  if (status === "success") return "ok";
  if (status === "error") return "bad";
  if (status === "canceled" || status === "canceling") return "down";
  return "busy";
}

// a log entry's message as text (a progress entry is a dict: doc/progress.md)
function message(type, msg) {
  if (type === "progress" && msg && typeof msg === "object") {
    const pct = msg.end ? ` ${Math.floor((100 * msg.cur) / msg.end)}%` : "";
    const end = msg.done ? (msg.error ? ` failed: ${msg.error}` : " done") : "";
    return `${msg.op}:${pct}${end}`;
  }
  return typeof msg === "string" ? msg : JSON.stringify(msg);
}

// the newest progress entry of each operation (op name) of one opcode's log
function progressBars(entries) {
  const last = new Map();
  for (const [, , type, msg] of entries) {
    if (type === "progress" && msg && typeof msg === "object") last.set(msg.op, msg);
  }
  return [...last.values()].map((p) => {
    const max = p.end || 1;
    const value = p.done && !p.error ? max : Math.min(p.cur || 0, max);
    const attrs = { class: "progress", dataset: { op: p.op }, max: String(max) };
    if (p.end || p.done) attrs.value = String(value);    // no value: indeterminate
    const pct = p.end ? Math.floor((100 * value) / max) + "%" : "";
    return el("span", {}, el("progress", attrs), ` ${p.op} ${pct}`);
  });
}

async function render() {
  const job = await api("GET", path);
  document.getElementById("title").textContent = `Job ${job.id}`;
  const status = document.getElementById("status");
  status.textContent = job.status;
  status.className = statusClass(job.status);
  document.getElementById("cancel").disabled = readonly || FINAL.includes(job.status);
  document.getElementById("times").replaceChildren(
    el("dt", {}, "Received"), el("dd", {}, timestamp(job.received_ts)),
    el("dt", {}, "Started"), el("dd", {}, timestamp(job.start_ts)),
    el("dt", {}, "Ended"), el("dd", {}, timestamp(job.end_ts)));
  const ops = job.ops || [];
  const logs = job.oplog || [];
  document.querySelector("#ops tbody").replaceChildren(...ops.map((op, i) => {
    const st = (job.opstatus || [])[i] || "";
    return el("tr", { dataset: { index: String(i) } }, el("td", {}, String(i + 1)),
      el("td", {}, op.OP_ID || ""), el("td", {}, (job.summary || [])[i] || ""),
      el("td", { class: "status " + statusClass(st) }, st),
      el("td", { class: "bars" }, ...progressBars(logs[i] || [])));
  }));
  const lines = logs.flatMap((entries, i) => entries.map(([serial, ts, type, msg]) =>
    el("tr", { dataset: { serial: String(serial), type: String(type) } },
       el("td", {}, timestamp(ts)), el("td", {}, String(i + 1)),
       el("td", { class: "message" }, message(type, msg)))));
  document.querySelector("#log tbody").replaceChildren(...lines);
  document.body.dataset.ready = "1";
}

const s = await session();
navbar(s);
readonly = s.role === "readonly";
const cancel = document.getElementById("cancel");
cancel.disabled = true;
if (readonly) cancel.title = "Your role (readonly) cannot cancel jobs";
cancel.addEventListener("click", async () => {
  try {
    const [ok, msg] = await api("DELETE", path);
    const answer = document.getElementById("cancel-answer");
    answer.textContent = msg;
    answer.className = ok ? "" : "bad";
    await render();
  } catch (err) {
    showError(err);
  }
});
// only this job's events (GET /2/events?jobs=ID); each one reads the job again, at most
// one read at a time and one more after it
let reading = false;
let again = false;
async function reread() {
  if (reading) { again = true; return; }
  reading = true;
  try {
    do { again = false; await render(); } while (again);
  } catch (err) {
    showError(err);
  } finally {
    reading = false;
  }
}
if (/^\d+$/.test(id)) {
  const source = new EventSource("/2/events?jobs=" + id);
  for (const type of ["job.status", "job.log", "job.finished"]) source.addEventListener(type, reread);
  // read after the stream is open: a change in between is seen either way
  source.addEventListener("open", reread, { once: true });
}
reread();
