// The console page: tabs, the session, the one live event stream, and the
// wiring of each tab's module to the data it shows.

import { api, session, whenUnauthorized, urls } from "./api.js";
import { stream } from "./sse.js";
import { h } from "./dom.js";
import { toast } from "./ui.js";
import * as composition from "./composition.js";
import * as agents from "./agents.js";
import * as approvals from "./approvals.js";
import * as logs from "./logs.js";

const TABS = ["composition", "agents", "approvals", "logs"];
let closeEvents = () => {};
let loggedOut = false;

function showTab(name) {
  if (!TABS.includes(name)) name = "composition";
  for (const t of TABS) {
    document.getElementById(`view-${t}`).hidden = t !== name;
    const b = document.querySelector(`[data-tab="${t}"]`);
    b.setAttribute("aria-selected", String(t === name));
    b.classList.toggle("active", t === name);
  }
  window.scrollTo(0, 0);
  if (name === "agents") agents.shown();
  if (name === "logs") logs.shown();
}

function setConnection(state) {
  const el = document.querySelector('[data-testid="connection"]');
  el.dataset.state = state;
  el.textContent = state;
}

// loginRequired replaces the page with what to do: the session is gone.
function loginRequired() {
  if (loggedOut) return;
  loggedOut = true;
  closeEvents();
  setConnection("logged out");
  const main = document.getElementById("main");
  main.replaceChildren(
    h(
      "section",
      { class: "login", testid: "login-required" },
      h("h2", null, "Login required"),
      h("p", null, "This page has no valid console session. On the host, run "),
      h("pre", null, "dsh console"),
      h("p", null, "and open the login link it prints (each link works once, for 10 minutes)."),
    ),
  );
  document.querySelector(".tabs").hidden = true;
}

// Each snapshot kind counts the stream's snapshots, so a GET answer that
// left before a newer snapshot came is not shown over it.
const seq = { graph: 0, agents: 0, approvals: 0 };
const apply = {
  graph: (g) => {
    composition.setGraph(g);
    logs.setEntries(g.entries || []);
  },
  agents: (a) => agents.set(a),
  approvals: (a) => approvals.set(a),
};

async function fetchSnapshot(kind) {
  const at = seq[kind];
  try {
    const data = await api[kind]();
    if (seq[kind] === at) apply[kind](data);
  } catch (e) {
    if (e.status !== 401) toast(`loading ${kind}: ${e.message}`);
  }
}

function fetchAll() {
  return Promise.all([fetchSnapshot("graph"), fetchSnapshot("agents"), fetchSnapshot("approvals"), logs.refresh()]);
}

async function start() {
  whenUnauthorized(loginRequired);
  for (const b of document.querySelectorAll("[data-tab]")) {
    b.addEventListener("click", () => {
      location.hash = b.dataset.tab;
    });
  }
  window.addEventListener("hashchange", () => showTab(location.hash.slice(1)));

  composition.mount(document.getElementById("view-composition"));
  agents.mount(document.getElementById("view-agents"));
  approvals.mount(document.getElementById("view-approvals"), (n) => {
    const badge = document.querySelector('[data-testid="approvals-count"]');
    badge.textContent = String(n);
    badge.hidden = n === 0;
    // A waiting question shows in a background tab's title too.
    document.title = n ? `(${n}) dsh console` : "dsh console";
  });
  logs.mount(document.getElementById("view-logs"));
  showTab(location.hash.slice(1));
  connect(true);
}

// connect gets the session, the first data and the live stream; while the
// host cannot be reached it tries again every few seconds.
async function connect(firstTry) {
  let s;
  try {
    s = await session();
  } catch (e) {
    if (e.status === 401) return;
    setConnection("offline");
    if (firstTry) toast(e.message);
    setTimeout(() => connect(false), 3000);
    return;
  }
  if (s.version) document.getElementById("version").textContent = s.version;

  await Promise.all([fetchAll(), composition.loadText()]);
  if (loggedOut) return;

  let first = true;
  closeEvents = stream(
    urls.events,
    {
      graph: (g) => {
        seq.graph++;
        apply.graph(g);
      },
      agents: (a) => {
        seq.agents++;
        apply.agents(a);
      },
      approvals: (a) => {
        seq.approvals++;
        apply.approvals(a);
      },
      log: (line) => logs.add(line),
    },
    {
      onStatus: (st) => {
        // A stream refused for a lost login looks like any drop: ask once
        // per drop whether the session is still there.
        const el = document.querySelector('[data-testid="connection"]');
        if (st === "reconnecting" && el.dataset.state !== "reconnecting") session().catch(() => {});
        setConnection(st);
      },
      onOpen: () => {
        // After a gap, what changed meanwhile is fetched again.
        if (!first) fetchAll();
        first = false;
      },
    },
  );
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
