// Instance list: sortable, filterable; status kept current from the event stream.
import { api, el, events, instanceLink, navbar, session, showError, statusClass } from "/ui/common.js";

const byName = new Map();         // name -> instance record (RAPI bulk fields)
const dirty = new Set();          // changed by an event, read again when its job ends
let sortKey = "name";
let sortDir = 1;

function memory(i) {
  return (i.beparams && (i.beparams.maxmem ?? i.beparams.memory)) ?? i.oper_ram ?? "";
}

function row(i) {
  const status = el("td", { class: "status " + statusClass(i.status) }, i.status);
  return el("tr", { dataset: { name: i.name } }, el("td", {}, instanceLink(i.name)), status,
            el("td", {}, i.pnode || ""), el("td", {}, i.os || ""),
            el("td", {}, i.disk_template || ""), el("td", {}, String(memory(i))));
}

function value(i, key) {
  return key === "memory" ? Number(memory(i)) || 0 : String(i[key] ?? "");
}

function render() {
  const needle = document.getElementById("filter").value.trim().toLowerCase();
  const list = [...byName.values()].filter((i) => !needle || [i.name, i.status, i.pnode, i.os]
    .some((v) => String(v ?? "").toLowerCase().includes(needle)));
  list.sort((a, b) => {
    const x = value(a, sortKey), y = value(b, sortKey);
    return (x < y ? -1 : x > y ? 1 : 0) * sortDir;
  });
  const frag = document.createDocumentFragment();
  for (const i of list) frag.append(row(i));
  document.querySelector("#instances tbody").replaceChildren(frag);
  document.getElementById("shown").textContent = `${list.length} of ${byName.size} shown`;
  for (const th of document.querySelectorAll("th[data-key]")) {
    th.classList.toggle("asc", th.dataset.key === sortKey && sortDir === 1);
    th.classList.toggle("desc", th.dataset.key === sortKey && sortDir === -1);
  }
}

// read one instance again and redraw its row (event time kept for the benchmark)
async function refresh(name, eventTime) {
  let inst;
  try {
    inst = await api("GET", "/2/instances/" + encodeURIComponent(name));
  } catch (err) {
    if (err.status === 404) { byName.delete(name); render(); return; }
    throw err;
  }
  byName.set(name, inst);
  const old = document.querySelector(`tr[data-name="${CSS.escape(name)}"]`);
  if (!old) { render(); return; }
  const fresh = row(inst);
  fresh.dataset.eventTime = String(eventTime);
  fresh.dataset.shownAt = String(Date.now() / 1000);
  old.replaceWith(fresh);
}

const s = await session();
navbar(s);
document.getElementById("filter").addEventListener("input", render);
for (const th of document.querySelectorAll("th[data-key]")) {
  th.addEventListener("click", () => {
    sortDir = th.dataset.key === sortKey ? -sortDir : 1;
    sortKey = th.dataset.key;
    render();
  });
}
events(["instance.added", "instance.removed", "instance.state", "job.finished"], (ev) => {
  if (ev.type === "job.finished") {
    for (const name of dirty) refresh(name, ev.time).catch(showError);
    dirty.clear();
  } else if (ev.instance) {
    dirty.add(ev.instance);
    refresh(ev.instance, ev.time).catch(showError);
  }
});
try {
  for (const i of await api("GET", "/2/instances?bulk=1")) byName.set(i.name, i);
  render();
  performance.mark("instances-rendered");
  document.body.dataset.ready = "1";
} catch (err) {
  showError(err);
}
