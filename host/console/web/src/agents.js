// The agents tab: every owner (one MCP client session) with its calls in
// flight, its background jobs and its terminals.

import { api } from "./api.js";
import { h, replace, duration, clock } from "./dom.js";
import { toast, reportErrors, confirm, sync, every, claimViewer } from "./ui.js";
import { openJobOutput } from "./joboutput.js";
import { openTerminal } from "./terminal.js";

let listEl, emptyEl;

export function mount(section) {
  listEl = h("div", { class: "owners" });
  emptyEl = h("p", { class: "empty" }, "No agent is connected.");
  replace(section, h("div", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", null, "Agents")), emptyEl, listEl));
  every((now) => {
    for (const el of listEl.querySelectorAll('[data-testid="call"]')) el._tick && el._tick(now);
  });
}

// shown lets open terminals measure themselves once their tab is visible.
export function shown() {
  for (const el of listEl.querySelectorAll('[data-testid="terminal"]')) el._shown && el._shown();
}

export function set(data) {
  const owners = data.owners || [];
  emptyEl.hidden = owners.length > 0;
  sync(listEl, owners, (o) => o.id, makeOwner);
}

// section is one kind of an owner's things; it hides while it has none.
function section(title, name) {
  const list = h("div", { class: "rows" });
  const el = h("div", { class: "group", data: { group: name } }, h("h4", null, title), list);
  return {
    el,
    fill: (items, key, make) => {
      el.hidden = items.length === 0;
      sync(list, items, key, make);
    },
  };
}

function makeOwner(first) {
  const title = h("h3");
  const since = h("span", { class: "muted" });
  const calls = section("Calls in flight", "calls");
  const jobs = section("Jobs", "jobs");
  const terms = section("Terminals", "terminals");
  const idle = h("p", { class: "empty small" }, "No call in flight, no job, no terminal.");
  const el = h("article", { class: "owner", testid: "owner", data: { owner: first.id } }, h("header", null, title, since), idle, calls.el, jobs.el, terms.el);
  return {
    el,
    update: (o) => {
      title.textContent = o.client ? `${o.client}` : o.id;
      title.title = o.id;
      since.textContent = `${o.id} · since ${clock(o.since)}`;
      calls.fill(o.calls || [], (c) => c.id, makeCall);
      jobs.fill(o.jobs || [], (j) => j.id, (j) => makeJob(o.id, j));
      terms.fill(o.terminals || [], (t) => t.id, (t) => makeTerminal(o.id, t));
      idle.hidden = !!((o.calls || []).length || (o.jobs || []).length || (o.terminals || []).length);
    },
    drop: () => {
      for (const t of el.querySelectorAll('[data-testid="terminal"], [data-testid="job"]')) t._drop && t._drop();
    },
  };
}

function makeCall(first) {
  const tool = h("span", { class: "tool" });
  const command = h("code", { class: "command" });
  const elapsed = h("span", { class: "elapsed mono", testid: "call-elapsed" });
  const cancel = h("button", { type: "button", class: "small", testid: "call-cancel" }, "Cancel");
  const el = h("div", { class: "row call", testid: "call", data: { call: first.id } }, tool, command, elapsed, cancel);
  let cur = first;
  let at = Date.now();
  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    const ok = await reportErrors(`cancel ${cur.tool}`, () => api.cancelCall(cur.id));
    if (ok) toast(`${cur.tool}: cancel sent`, "info");
    else cancel.disabled = false;
  });
  el._tick = (now) => {
    elapsed.textContent = duration((cur.elapsedMs || 0) + (now - at));
  };
  return {
    el,
    update: (c) => {
      cur = c;
      at = Date.now();
      tool.textContent = c.tool;
      command.textContent = c.command || "";
      command.title = command.textContent;
      command.hidden = !c.command;
      el._tick(at);
    },
  };
}

function makeJob(owner, first) {
  const id = h("span", { class: "id mono" });
  const command = h("code", { class: "command" });
  const state = h("span", { class: "state", testid: "job-state" });
  const info = h("span", { class: "muted small" });
  const open = h("button", { type: "button", class: "small", testid: "job-open" }, "Output");
  const kill = h("button", { type: "button", class: "small danger", testid: "job-kill" }, "Kill");
  const body = h("div", { class: "viewer", hidden: true });
  const el = h(
    "div",
    { class: "job", testid: "job", data: { job: first.id } },
    h("div", { class: "row" }, id, command, state, info, open, kill),
    body,
  );
  let cur = first;
  let viewer = null;
  let release = () => {};
  const close = () => {
    release();
    if (viewer) viewer.close();
    viewer = null;
    body.hidden = true;
    body.replaceChildren();
    open.textContent = "Output";
  };
  open.addEventListener("click", () => {
    if (viewer) return close();
    body.hidden = false;
    // An ended job's stream closes by itself; its text stays shown.
    viewer = openJobOutput(body, owner, cur.id, () => release());
    release = claimViewer(`the output of job ${cur.id}`, close);
    open.textContent = "Hide output";
  });
  kill.addEventListener("click", async () => {
    const yes = await confirm({
      testid: "kill-confirm",
      title: "Kill this job?",
      text: `Job ${cur.id} of ${owner} and every process it started will be ended.`,
      detail: cur.command,
      yes: "Kill",
      danger: true,
    });
    if (!yes) return;
    kill.disabled = true;
    const ok = await reportErrors(`kill job ${cur.id}`, () => api.killJob(owner, cur.id));
    if (ok) toast(`job ${cur.id}: killed`, "info");
    else kill.disabled = false;
  });
  el._drop = close;
  return {
    el,
    drop: close,
    update: (j) => {
      cur = j;
      el.dataset.state = j.state;
      id.textContent = j.id;
      command.textContent = j.command || "";
      command.title = command.textContent;
      state.textContent = j.state === "running" ? "running" : `${j.state}${j.exitCode !== undefined && j.exitCode !== null ? ` (${j.exitCode})` : ""}`;
      state.className = `state state-${j.state}`;
      info.textContent = `${clock(j.startedAt)} · ${bytes(j.outputBytes || 0)}`;
      kill.hidden = j.state !== "running";
    },
  };
}

function makeTerminal(owner, first) {
  const id = h("span", { class: "id mono" });
  const command = h("code", { class: "command" });
  const size = h("span", { class: "muted small" });
  const alive = h("span", { class: "state" });
  const open = h("button", { type: "button", class: "small", testid: "terminal-open" }, "View");
  const attach = h("button", { type: "button", class: "small", testid: "terminal-attach" }, "Attach…");
  const body = h("div", { class: "viewer", hidden: true });
  const el = h(
    "div",
    { class: "terminal", testid: "terminal", data: { terminal: first.id } },
    h("div", { class: "row" }, id, command, size, alive, open, attach),
    body,
  );
  let cur = first;
  let view = null;
  let release = () => {};
  const close = () => {
    release();
    if (view) view.close();
    view = null;
    body.hidden = true;
    body.replaceChildren();
    open.textContent = "View";
    attach.textContent = "Attach…";
  };
  const show = () => {
    if (view) return view;
    body.hidden = false;
    view = openTerminal(body, owner, cur, {
      onDetached: () => {
        attach.textContent = "Attach…";
      },
      onEnded: () => release(),
    });
    release = claimViewer(`terminal ${cur.id}`, close);
    open.textContent = "Close";
    return view;
  };
  open.addEventListener("click", () => (view ? close() : show()));
  attach.addEventListener("click", async () => {
    if (view && view.attached()) {
      view.detach();
      return;
    }
    const yes = await confirm({
      testid: "attach-confirm",
      title: "Type into this terminal?",
      text: `What you type will go to terminal ${cur.id} of ${owner}, as if the agent typed it. The agent sees what you do.`,
      detail: cur.command,
      yes: "Attach",
    });
    if (!yes) return;
    const v = show();
    if (await v.attach()) attach.textContent = "Detach";
  });
  el._shown = () => view && view.fit();
  el._drop = close;
  return {
    el,
    drop: close,
    update: (t) => {
      cur = t;
      id.textContent = t.id;
      command.textContent = t.command || "";
      command.title = command.textContent;
      size.textContent = `${t.cols}×${t.rows}`;
      alive.textContent = t.alive ? "alive" : "closed";
      alive.className = `state ${t.alive ? "state-running" : "state-completed"}`;
      attach.disabled = !t.alive;
      if (view) view.resize(t.cols, t.rows);
    },
  };
}

function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}
