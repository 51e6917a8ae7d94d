// The composition tab: the entries as a dependency graph (providers to the
// left, each consumer one column further right than its deepest provider,
// arrows from consumer to provider) and the composition file's editor.

import { api } from "./api.js";
import { h, s, replace, duration } from "./dom.js";
import { toast, reportErrors, sync, every } from "./ui.js";
import { mountEditor } from "./editor.js";

let graphEl, columnsEl, arrowsEl, fileEl, emptyEl;
let entries = [];
let editor;

// States in which an entry is not serving, shown greyed.
const SERVING = new Set(["active", "unhealthy"]);

export function mount(section) {
  fileEl = h("span", { class: "muted mono" });
  arrowsEl = s("svg", { class: "arrows", "aria-hidden": "true" });
  columnsEl = h("div", { class: "columns" });
  emptyEl = h("p", { class: "empty" }, "No entries yet.");
  graphEl = h("div", { class: "graph", testid: "graph" }, arrowsEl, columnsEl);
  editor = mountEditor();
  replace(
    section,
    h("div", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", null, "Entries"), fileEl), emptyEl, graphEl),
    editor.el,
  );
  new ResizeObserver(() => drawArrows()).observe(graphEl);
  every(tickUptimes);
}

export async function loadText() {
  return editor.load();
}

// depths gives each entry its column: 0 with no provider among the entries,
// else one more than its deepest provider (a cycle stops where it closes).
function depths(list) {
  const providers = providerIndex(list);
  const byId = new Map(list.map((e) => [e.id, e]));
  const memo = new Map();
  const depth = (e, path) => {
    if (memo.has(e.id)) return memo.get(e.id);
    if (path.has(e.id)) return 0;
    path.add(e.id);
    let d = 0;
    for (const c of e.consumes || []) {
      for (const pid of providers.get(c.key) || []) {
        if (pid === e.id) continue;
        d = Math.max(d, depth(byId.get(pid), path) + 1);
      }
    }
    path.delete(e.id);
    memo.set(e.id, d);
    return d;
  };
  for (const e of list) depth(e, new Set());
  return memo;
}

function providerIndex(list) {
  const m = new Map();
  for (const e of list) {
    for (const key of e.provides || []) {
      if (!m.has(key)) m.set(key, []);
      m.get(key).push(e.id);
    }
  }
  return m;
}

export function setGraph(g) {
  entries = g.entries || [];
  fileEl.textContent = g.file || "";
  emptyEl.hidden = entries.length > 0;
  graphEl.hidden = entries.length === 0;
  const d = depths(entries);
  const cols = [];
  for (const e of entries) {
    const i = d.get(e.id) || 0;
    while (cols.length <= i) cols.push([]);
    cols[i].push(e);
  }
  sync(columnsEl, cols.map((list, i) => ({ i, list })), (c) => c.i, makeColumn);
  requestAnimationFrame(drawArrows);
}

function makeColumn() {
  const el = h("div", { class: "column" });
  return { el, update: (c) => sync(el, c.list, (e) => e.id, makeEntry) };
}

function field(label, testid) {
  const v = h("dd", { testid });
  return [v, [h("dt", null, label), v]];
}

function makeEntry(first) {
  const name = h("span", { class: "entry-name" });
  const state = h("span", { class: "state", testid: "entry-state" });
  const [pid, pidRow] = field("pid", "entry-pid");
  const [restarts, restartsRow] = field("restarts", "entry-restarts");
  const [uptime, uptimeRow] = field("uptime", "entry-uptime");
  const [binary, binaryRow] = field("binary", "entry-binary");
  const [sha, shaRow] = field("sha256", "entry-sha256");
  const [provides, providesRow] = field("provides", "entry-provides");
  const [consumes, consumesRow] = field("consumes", "entry-consumes");
  const [tools, toolsRow] = field("tools", "entry-tools");
  tools.classList.add("wrap");
  provides.classList.add("wrap");
  consumes.classList.add("wrap");
  const reason = h("p", { class: "reason", testid: "entry-reason" });
  const error = h("p", { class: "error", testid: "entry-error" });
  const reload = h("button", { type: "button", class: "small", testid: "entry-reload" }, "Reload");
  const el = h(
    "article",
    { class: "entry", testid: "entry" },
    h("header", null, name, state),
    h("dl", null, pidRow, restartsRow, uptimeRow, binaryRow, shaRow, providesRow, consumesRow, toolsRow),
    reason,
    error,
    h("div", { class: "entry-actions" }, reload),
  );
  let cur = first;
  reload.addEventListener("click", async () => {
    reload.disabled = true;
    const ok = await reportErrors(`reload ${cur.id}`, () => api.reload(cur.id));
    reload.disabled = false;
    if (ok) toast(`${cur.id}: reload asked`, "info");
  });

  const update = (e) => {
    cur = e;
    cur._at = Date.now();
    el.dataset.entry = e.id;
    el.dataset.state = e.state;
    el.classList.toggle("off", e.disabled || !SERVING.has(e.state));
    el.className = el.className.replace(/\bstate-\S+/g, "").trim() + ` state-${cssWord(e.state)}`;
    name.textContent = e.name && e.name !== e.id ? `${e.id} (${e.name})` : e.id;
    name.title = name.textContent + (e.version ? `, version ${e.version}` : "");
    state.textContent = e.disabled ? "disabled" : e.state;
    pid.textContent = e.pid ? String(e.pid) : "—";
    restarts.textContent = String(e.restarts ?? 0);
    uptime.textContent = e.pid ? duration(e.uptimeMs) : "—";
    binary.textContent = e.binary || "—";
    binary.title = e.binary || "";
    sha.textContent = e.sha256 ? e.sha256.slice(0, 12) : "—";
    sha.title = e.sha256 || "";
    provides.textContent = (e.provides || []).join(", ") || "—";
    consumes.textContent = (e.consumes || []).map((c) => (c.optional ? `${c.key} (optional)` : c.key)).join(", ") || "—";
    tools.textContent = (e.tools || []).join(", ");
    for (const el of toolsRow) el.hidden = !(e.tools && e.tools.length);
    provides.title = provides.textContent;
    consumes.title = consumes.textContent;
    reason.textContent = e.reason || "";
    reason.hidden = !e.reason;
    error.replaceChildren();
    error.hidden = !e.lastError;
    if (e.lastError) {
      const where = e.lastError.file ? `${e.lastError.file}${e.lastError.line ? `:${e.lastError.line}` : ""}` : "";
      error.append(h("span", { class: "message" }, e.lastError.message || ""));
      if (where) error.append(" ", h("span", { class: "where mono" }, where));
    }
  };
  el._tick = (now) => {
    if (cur.pid && SERVING.has(cur.state)) uptime.textContent = duration(cur.uptimeMs + (now - cur._at));
  };
  return { el, update };
}

function cssWord(s) {
  return String(s || "unknown").replace(/[^a-z0-9-]/gi, "-").toLowerCase();
}

function tickUptimes(now) {
  for (const el of columnsEl.querySelectorAll(".entry")) el._tick && el._tick(now);
}

// drawArrows joins each consumer's left side to each of its providers' right side.
function drawArrows() {
  if (!graphEl || graphEl.hidden) return;
  const box = graphEl.getBoundingClientRect();
  arrowsEl.setAttribute("width", String(graphEl.scrollWidth));
  arrowsEl.setAttribute("height", String(graphEl.scrollHeight));
  const defs = s("defs", {});
  arrowsEl.replaceChildren(defs);
  const marker = s("marker", { id: "arrowhead", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
  marker.append(s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }));
  defs.append(marker);
  const cards = new Map();
  for (const el of columnsEl.querySelectorAll(".entry")) cards.set(el.dataset.entry, el.getBoundingClientRect());
  const providers = providerIndex(entries);
  const sx = graphEl.scrollLeft - box.left;
  const sy = graphEl.scrollTop - box.top;
  for (const e of entries) {
    const from = cards.get(e.id);
    if (!from) continue;
    for (const c of e.consumes || []) {
      for (const pid of providers.get(c.key) || []) {
        const to = cards.get(pid);
        if (!to || pid === e.id) continue;
        const x1 = from.left + sx;
        const y1 = from.top + Math.min(from.height / 2, 28) + sy;
        const x2 = to.right + sx;
        const y2 = to.top + Math.min(to.height / 2, 28) + sy;
        const dx = Math.max(30, (x1 - x2) / 2);
        const path = s("path", {
          d: `M${x1},${y1} C${x1 - dx},${y1} ${x2 + dx},${y2} ${x2 + 2},${y2}`,
          class: c.optional ? "arrow optional" : "arrow",
          "marker-end": "url(#arrowhead)",
        });
        const title = s("title", {});
        title.textContent = `${e.id} → ${pid} (${c.key}${c.optional ? ", optional" : ""})`;
        path.append(title);
        arrowsEl.append(path);
      }
    }
  }
}
