// Cluster overview: the cluster, its nodes (memory and disk use as bars), instance counts.
import { api, el, events, navbar, session, showError } from "/ui/common.js";

function bar(total, free, unit) {
  if (!total) return "-";
  const used = total - (free || 0);
  const meter = el("meter", { min: "0", max: String(total), value: String(used),
                              high: String(total * 0.9), optimum: "0" });
  return el("span", {}, meter, ` ${used} / ${total} ${unit}`);
}

const ROLES = { M: "master", C: "candidate", R: "regular", D: "drained", O: "offline" };

async function render() {
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

const s = await session();
navbar(s);
render().catch(showError);
// a node or instance change redraws the page (no polling)
let pending = false;
events(["node.added", "node.removed", "node.role", "instance.added", "instance.removed",
        "job.finished"], () => {
  if (pending) return;
  pending = true;
  setTimeout(() => { pending = false; render().catch(showError); }, 200);
});
