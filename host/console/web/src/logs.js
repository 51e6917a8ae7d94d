// The logs tab: the host's and plugins' log lines, filtered by entry and
// minimum level, with live lines appended (at most MAX_ROWS kept).

import { api } from "./api.js";
import { h, replace, clock } from "./dom.js";
import { toast } from "./ui.js";

const MAX_ROWS = 2000;
const LEVELS = ["trace", "debug", "info", "warn", "error"];
const RANK = { trace: 0, debug: 1, info: 2, warn: 3, warning: 3, error: 4, fatal: 5, panic: 5 };

let entrySel, levelSel, rowsEl, countEl, box;
let knownEntries = "";
let gen = 0;
// held keeps live lines that come while a refresh is on its way.
let held = null;

export function mount(section) {
  entrySel = h("select", { testid: "logs-entry", "aria-label": "entry" }, h("option", { value: "" }, "all entries"));
  levelSel = h(
    "select",
    { testid: "logs-level", "aria-label": "minimum level" },
    ...LEVELS.map((l) => h("option", { value: l, selected: l === "info" }, l === "trace" ? "trace (all)" : `${l} and above`)),
  );
  levelSel.value = "info";
  countEl = h("span", { class: "muted small" });
  rowsEl = h("div", { class: "log-rows", role: "log" });
  box = h("div", { class: "log-box" }, rowsEl);
  replace(
    section,
    h(
      "div",
      { class: "panel logs" },
      h("div", { class: "panel-head" }, h("h2", null, "Logs"), h("label", null, "entry ", entrySel), h("label", null, "level ", levelSel), countEl),
      box,
    ),
  );
  entrySel.addEventListener("change", refresh);
  levelSel.addEventListener("change", refresh);
}

export function shown() {
  box.scrollTop = box.scrollHeight;
}

// setEntries keeps the entry filter's choices in step with the graph.
export function setEntries(entries) {
  const ids = entries.map((e) => e.id).sort();
  const key = ids.join("\n");
  if (key === knownEntries) return;
  knownEntries = key;
  const cur = entrySel.value;
  entrySel.replaceChildren(h("option", { value: "" }, "all entries"), ...ids.map((id) => h("option", { value: id }, id)));
  entrySel.value = ids.includes(cur) ? cur : "";
  if (entrySel.value !== cur) refresh();
}

function matches(line) {
  const entry = entrySel.value;
  if (entry && line.entry !== entry) return false;
  return (RANK[line.level] ?? 2) >= (RANK[levelSel.value] ?? 0);
}

function row(line) {
  const fields = Object.entries(line.fields || {})
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  return h(
    "div",
    { class: `log-line level-${RANK[line.level] !== undefined ? line.level : "info"}`, testid: "log-line", data: { entry: line.entry || "", level: line.level } },
    h("span", { class: "time mono", title: line.time }, clock(line.time)),
    h("span", { class: "level" }, line.level),
    h("span", { class: "src mono" }, line.entry || "host"),
    h("span", { class: "message" }, line.message, fields ? h("span", { class: "fields mono" }, " ", fields) : null),
  );
}

function count() {
  const n = rowsEl.childElementCount;
  countEl.textContent = n >= MAX_ROWS ? `last ${MAX_ROWS} lines` : `${n} line${n === 1 ? "" : "s"}`;
}

const atEnd = () => box.scrollHeight - box.scrollTop - box.clientHeight < 24;

// add appends one live line when it passes the filter.
export function add(line) {
  if (!matches(line)) return;
  if (held) {
    held.push(line);
    return;
  }
  const follow = atEnd();
  rowsEl.append(row(line));
  while (rowsEl.childElementCount > MAX_ROWS) rowsEl.firstElementChild.remove();
  count();
  if (follow) box.scrollTop = box.scrollHeight;
}

// refresh loads the recent lines for the current filter.
export async function refresh() {
  const my = ++gen;
  held = [];
  try {
    const r = await api.logs(entrySel.value, levelSel.value);
    if (my !== gen) return;
    const lines = r.lines || [];
    // Live lines the answer already holds are not shown twice.
    const last = lines.length ? lines[lines.length - 1].time : "";
    const seen = new Set(lines.filter((l) => l.time === last).map((l) => l.message));
    for (const l of held) {
      if (l.time > last || (l.time === last && !seen.has(l.message))) lines.push(l);
    }
    rowsEl.replaceChildren(...lines.slice(-MAX_ROWS).map(row));
    count();
    box.scrollTop = box.scrollHeight;
  } catch (e) {
    if (e.status !== 401) toast(`loading logs: ${e.message}`);
  } finally {
    if (my === gen) held = null;
  }
}
