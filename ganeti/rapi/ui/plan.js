// A relocation plan (doc/protocols/iallocator.md, "Plans") drawn as a graph: one box per
// job listing its opcodes (instance: operation from -> to), an arrow from each job to
// the jobs that wait for it (`depends`).  Plain SVG, no library; styled by app.css.
const SVG = "http://www.w3.org/2000/svg";
const LINE = 18;      // px per text line
const PAD = 8;        // px inside a box
const HGAP = 28;      // px between boxes of one row
const VGAP = 44;      // px between rows (the arrows)

const VERBS = {
  OP_INSTANCE_MIGRATE: "migrate",
  OP_INSTANCE_FAILOVER: "failover",
  OP_INSTANCE_REPLACE_DISKS: "replace-disks",
};

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

// One opcode of a job as a line: "web1: migrate node1 -> node2".
export function opLine(op, move) {
  const verb = VERBS[op.OP_ID] || String(op.OP_ID || "").replace(/^OP_/, "").toLowerCase();
  const from = (move && move.from) || [];
  let to = (move && move.to) || [];
  if (to.join() === from.join()) {   // the plan's model could not place it: the opcode's own
    const target = op.target_node || op.remote_node;
    to = target ? [target] : [];
  }
  const where = op.OP_ID === "OP_INSTANCE_REPLACE_DISKS" && op.remote_node
    ? `new secondary ${op.remote_node}`
    : `${from.join(", ") || "?"} \u2192 ${to.join(", ") || "(chosen when it runs)"}`;
  return `${op.instance_name || (move && move.instance) || "?"}: ${verb} ${where}`;
}

// Each job's row: its longest chain of dependencies (jobs depend on earlier jobs only).
function levels(steps) {
  const level = [];
  steps.forEach((step, i) => {
    const deps = (step.depends_on || []).filter((d) => d >= 0 && d < i);
    level[i] = deps.length ? 1 + Math.max(...deps.map((d) => level[d])) : 0;
  });
  return level;
}

// The graph of ``plan`` (its ``steps``) drawn into ``container`` (which must be shown:
// the boxes are sized by measuring their text).
export function drawPlan(container, plan) {
  const steps = plan.steps || [];
  const root = svg("svg", { class: "plan", role: "img" });
  const defs = svg("defs");
  const marker = svg("marker", { id: "plan-arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
                                 markerWidth: 8, markerHeight: 8, orient: "auto" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", class: "plan-arrowhead" }));
  defs.append(marker);
  root.append(defs);
  container.replaceChildren(root);
  const boxes = steps.map((step, i) => {
    const deps = step.depends_on || [];
    const title = `Job ${i + 1}` + (deps.length ? ` (after job ${deps.map((d) => d + 1).join(", ")})` : "");
    const lines = (step.opcodes || []).map((op, k) => opLine(op, (step.moves || [])[k]));
    if (step.n1_ok_after === false) lines.push("N+1 fails after this job");
    const group = svg("g", { class: "plan-job" + (step.n1_ok_after === false ? " n1-bad" : "") });
    group.dataset.job = String(i);
    group.dataset.depends = deps.join(",");
    group.dataset.instances = (step.opcodes || []).map((op) => op.instance_name).join(" ");
    const rect = svg("rect", { rx: 4, ry: 4 });
    group.append(rect);
    const texts = [svg("text", { class: "plan-title" }, title),
                   ...lines.map((line) => svg("text", { class: "plan-op" }, line))];
    texts.forEach((t, k) => { t.setAttribute("x", PAD); t.setAttribute("y", PAD + LINE * k + 13); });
    group.append(...texts);
    root.append(group);
    const width = Math.ceil(Math.max(...texts.map((t) => t.getComputedTextLength()))) + 2 * PAD;
    const height = LINE * texts.length + 2 * PAD - 4;
    rect.setAttribute("width", width);
    rect.setAttribute("height", height);
    return { group, width, height, deps, x: 0, y: 0 };
  });
  const level = levels(steps);
  const rows = [];
  boxes.forEach((box, i) => (rows[level[i]] ||= []).push(box));
  const rowWidth = (row) => row.reduce((sum, b) => sum + b.width, 0) + HGAP * (row.length - 1);
  const total = Math.max(0, ...rows.map(rowWidth));
  let y = 2;
  for (const row of rows) {
    let x = 2 + (total - rowWidth(row)) / 2;   // each row centred
    for (const box of row) {
      box.x = x;
      box.y = y;
      box.group.setAttribute("transform", `translate(${x},${y})`);
      x += box.width + HGAP;
    }
    y += Math.max(...row.map((b) => b.height)) + VGAP;
  }
  boxes.forEach((box, i) => {
    for (const d of box.deps) {
      const from = boxes[d];
      if (!from || d >= i) continue;
      const edge = svg("line", { class: "plan-dep", "marker-end": "url(#plan-arrow)",
                                 x1: from.x + from.width / 2, y1: from.y + from.height,
                                 x2: box.x + box.width / 2, y2: box.y - 2 });
      edge.dataset.from = String(d);
      edge.dataset.to = String(i);
      root.insertBefore(edge, defs.nextSibling);    // under the boxes
    }
  });
  const width = total + 4;
  const height = Math.max(0, y - VGAP) + 4;
  root.setAttribute("width", width);
  root.setAttribute("height", height);
  root.setAttribute("viewBox", `0 0 ${width} ${height}`);
  return root;
}
