// Cluster overview: the cluster, its nodes (memory and disk use as bars), instance counts,
// the warnings and errors of the last cluster verify still in the job queue.
import { api, bar, el, events, navbar, serial, session, showError } from "/ui/common.js";

const ROLES = { M: "master", C: "candidate", R: "regular", D: "drained", O: "offline" };

async function draw() {
  const [info, nodes, instances] = await Promise.all([
    api("GET", "/2/info"), api("GET", "/2/nodes?bulk=1"), api("GET", "/2/instances?bulk=1")]);
  document.getElementById("title").textContent = `Cluster ${info.name}`;
  const candidates = nodes.filter((n) => n.master_candidate).map((n) => n.name);
  document.getElementById("cluster").replaceChildren(
    el("dt", {}, "Master"), el("dd", { id: "master" }, info.master),
    el("dt", {}, "Master candidates"), el("dd", { id: "candidates" }, candidates.join(", ")),
    el("dt", {}, "Hypervisors"), el("dd", {}, (info.enabled_hypervisors || []).join(", ")),
    el("dt", {}, "Version"), el("dd", {}, String(info.software_version || "")));
  const running = instances.filter((i) => i.status === "running").length;
  const down = instances.filter((i) => i.status === "ADMIN_down").length;
  document.getElementById("counts").replaceChildren(
    el("span", { id: "count-total" }, `${instances.length} instances`),
    el("span", { id: "count-running" }, `${running} running`),
    el("span", { id: "count-down" }, `${down} stopped`),
    el("span", { id: "count-other" }, `${instances.length - running - down} other`));
  const rows = nodes.map((n) => el("tr", { dataset: { node: n.name } },
    el("td", {}, el("a", { href: "/ui/node.html?name=" + encodeURIComponent(n.name) }, n.name)),
    el("td", {}, ROLES[n.role] || n.role || ""),
    el("td", { class: "mem" }, bar(n.mtotal, n.mfree, "MiB")),
    el("td", { class: "disk" }, bar(n.dtotal, n.dfree, "MiB")),
    el("td", {}, `${n.pinst_cnt ?? 0} / ${n.sinst_cnt ?? 0}`)));
  document.querySelector("#nodes tbody").replaceChildren(...rows);
  document.body.dataset.ready = "1";
}
const render = serial(draw);   // redraws never answer out of order

// The last `gnt-cluster verify`: its config job and one job per group, kept in the job
// queue until archived.  Their summaries are read from memory by a filtered job query
// (a read), then only the newest of each is read whole for its ERROR/WARNING log lines.
const verifyJobs = new Set();   // ids of verify jobs seen submitted

async function renderVerify() {
  const groups = await api("GET", "/2/groups");
  const wanted = ["CLUSTER_VERIFY_CONFIG", ...groups.map((g) => `CLUSTER_VERIFY_GROUP(${g.name})`)];
  const found = await api("PUT", "/2/query/job", {
    fields: ["id", "summary"], qfilter: ["|", ...wanted.map((w) => ["=[]", "summary", w])] });
  const newest = new Map();     // summary -> newest job id
  for (const [[, id], [, summary]] of found.data || []) {
    const key = (summary || [])[0];
    if (!newest.has(key) || newest.get(key) < id) newest.set(key, id);
  }
  const box = document.getElementById("verify");
  if (!newest.size) {
    box.replaceChildren(el("p", { id: "verify-none" }, "No cluster verify in the job queue"
      + " (never run, or archived): gnt-cluster verify runs one."));
    return;
  }
  const jobs = await Promise.all([...newest.values()].sort((a, b) => a - b)
    .map((id) => api("GET", "/2/jobs/" + id)));
  const findings = [];
  for (const job of jobs) {
    for (const entry of (job.oplog || []).flat()) {
      const text = String(entry[3] ?? "");
      const match = /^\s*-\s*(ERROR|WARNING)\b/.exec(text);
      if (match) {
        findings.push(el("li", { class: match[1] === "ERROR" ? "bad" : "warn", dataset: { job: String(job.id) } },
                         text.replace(/^\s*-\s*/, "")));
      }
    }
  }
  const when = Math.max(...jobs.map((j) => (j.end_ts || [0])[0] || 0));
  const summary = el("p", { id: "verify-jobs" }, "Last verify: ",
    ...jobs.flatMap((j, i) => [i ? ", " : "", el("a", { href: "/ui/job.html?id=" + j.id }, `job ${j.id}`),
                               ` (${j.summary[0]}: ${j.status})`]),
    when ? `, ended ${new Date(when * 1000).toLocaleString()}` : "");
  const list = findings.length ? el("ul", { id: "verify-findings" }, ...findings)
    : el("p", { id: "verify-clean", class: "ok" }, "No errors or warnings.");
  box.replaceChildren(summary, list);
}

const s = await session();
navbar(s);
render().catch(showError);
renderVerify().catch(showError);
// a node or instance change redraws the page (no polling)
let pending = false;
events(["node.added", "node.removed", "node.role", "instance.added", "instance.removed",
        "job.finished", "job.submitted"], (ev) => {
  if (ev.type === "job.submitted"
      && (ev.data.summary || []).some((op) => op.startsWith("CLUSTER_VERIFY_"))) {
    verifyJobs.add(ev.job_id);
  }
  if (ev.type === "job.finished" && verifyJobs.has(ev.job_id)) {
    verifyJobs.delete(ev.job_id);
    renderVerify().catch(showError);
  }
  if (ev.type === "job.submitted") return;
  if (pending) return;
  pending = true;
  setTimeout(() => { pending = false; render().catch(showError); }, 200);
});
