// A stand-in for dsh's console server, for working on the page alone: it
// serves ../../dist/ as dsh does (the page at /, files under /console/) and a
// fake host behind the API and its event streams. Not part of the build.
//
//   node dev/mock.mjs [--port 8377] [--logged-out]     (--port 0: any free port)
//
// The host it pretends to be changes by itself: an entry restarts, a job
// writes output, a terminal prints, questions come and expire, log lines flow.
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "..", "..", "dist");
const args = process.argv.slice(2);
const portArg = args.indexOf("--port");
const port = portArg >= 0 ? Number(args[portArg + 1]) : 8377;
const loggedOut = args.includes("--logged-out");
const CSRF = "csrf-mock-token";
const now = () => new Date().toISOString();
const started = Date.now();

let composition = `# dsh composition (mock)
entries:
  - id: shell-env
    binary: plugins/shell-env
  - id: bash-local
    binary: plugins/bash-local
    consumes: [shell.env]
  - id: tool-bash
    binary: plugins/tool-bash
    consumes: [shell.exec, approval?]
  - id: terminal
    binary: plugins/terminal
    consumes: [shell.exec]
  - id: kube
    binary: plugins/bash-kubernetes
    disabled: true
approval:
  channels: [client, console]
`;

const entry = (id, o) => ({
  id,
  name: id,
  binary: `/opt/dsh/plugins/${id}`,
  sha256: "9f2c4e1b7a6d3c5e8f0a1b2c3d4e5f60718293a4b5c6d7e8f9012345678abcde",
  disabled: false,
  state: "active",
  reason: "",
  pid: 4000 + id.length * 7,
  restarts: 0,
  uptimeMs: 0,
  version: "0.9.1",
  provides: [],
  consumes: [],
  tools: [],
  file: "/etc/dsh/composition.yaml",
  line: 3,
  lastError: null,
  ...o,
});

const graph = () => ({
  file: "/etc/dsh/composition.yaml",
  entries: [
    entry("shell-env", { provides: ["shell.env"], uptimeMs: Date.now() - started + 3600e3 }),
    entry("bash-local", { provides: ["shell.exec"], consumes: [{ key: "shell.env", optional: false }], uptimeMs: Date.now() - started + 3500e3, restarts: 2, line: 5 }),
    entry("approval-ui", {
      provides: ["approval"],
      state: "failed",
      pid: 0,
      reason: "",
      restarts: 5,
      lastError: { message: "plugin exited with status 2 before it served: unknown flag --bogus", file: "/etc/dsh/composition.yaml", line: 14 },
    }),
    entry("tool-bash", {
      provides: ["tool:bash"],
      tools: ["bash"],
      consumes: [
        { key: "shell.exec", optional: false },
        { key: "approval", optional: true },
      ],
      uptimeMs: Date.now() - started + 60e3,
      line: 8,
    }),
    entry("terminal", {
      provides: ["tool:terminal"],
      consumes: [{ key: "shell.exec", optional: false }, { key: "pty", optional: false }],
      state: "pending",
      pid: 0,
      reason: "waiting for pty: no entry provides it",
      line: 11,
    }),
    entry("kube", { disabled: true, state: "disabled", pid: 0, provides: ["shell.exec.k8s"], line: 16, binary: "/opt/dsh/plugins/bash-kubernetes" }),
  ],
});

const owner = {
  id: "o-7f3a",
  client: "claude-code 2.1.0",
  since: new Date(started - 600e3).toISOString(),
};
let calls = [
  { id: "c-1", tool: "bash", command: "npm test -- --watch=false", startedAt: new Date(started - 4200).toISOString(), started: started - 4200 },
];
let jobs = [
  { id: "j-1", command: "make -j2 build 2>&1 | tee build.log", state: "running", exitCode: null, startedAt: new Date(started - 30e3).toISOString(), outputBytes: 0, out: "" },
  { id: "j-gone", command: "sleep 1000 # its output stream answers 404", state: "running", exitCode: null, startedAt: new Date(started - 20e3).toISOString(), outputBytes: 0, out: "", refuse: true },
  { id: "j-0", command: "go vet ./...", state: "completed", exitCode: 0, startedAt: new Date(started - 300e3).toISOString(), outputBytes: 30, out: "ok\tgithub.com/dshrun/dsh\t0.4s\n<b>not html</b>\n" },
];
const terminals = [{ id: "t-1", command: "bash -l", cols: 100, rows: 14, alive: true }];
const agents = () => ({
  owners: [
    {
      ...owner,
      calls: calls.map(({ started, ...c }) => ({ ...c, elapsedMs: Date.now() - started })),
      jobs: jobs.map(({ out, refuse, ...j }) => ({ ...j, outputBytes: out.length })),
      terminals,
    },
    { id: "o-91bc", client: "codex 0.5", since: new Date(started - 60e3).toISOString(), calls: [], jobs: [], terminals: [] },
  ],
});

let qn = 0;
let pending = [];
const ask = () => {
  qn++;
  pending.push({
    id: `q-${qn}`,
    owner: owner.id,
    kind: qn % 2 ? "network_escalation" : "sandbox_permissions",
    command: qn % 2 ? "curl -fsSL https://registry.npmjs.org/esbuild" : "rm -rf ./build && make install PREFIX=/usr/local",
    hosts: qn % 2 ? ["registry.npmjs.org:443", "<script>alert(1)</script>"] : [],
    justification: "The install needs the package index; nothing else is reached.",
    askedAt: now(),
    expiresAt: new Date(Date.now() + 90e3).toISOString(),
  });
};
ask();
ask();

const logs = [];
const LEVELS = ["debug", "info", "info", "warn", "error", "trace"];
let ln = 0;
const logLine = () => {
  ln++;
  const ids = ["", "shell-env", "bash-local", "tool-bash"];
  const l = {
    time: now(),
    level: LEVELS[ln % LEVELS.length],
    entry: ids[ln % ids.length],
    message: ln % 7 === 0 ? "<img src=x onerror=alert(1)> not html" : `message number ${ln}`,
    fields: ln % 3 === 0 ? { owner: owner.id, ms: String(ln * 3) } : {},
  };
  logs.push(l);
  if (logs.length > 1000) logs.shift();
  return l;
};
for (let i = 0; i < 60; i++) logLine();

// Event stream subscribers.
const subs = new Set();
const send = (res, event, data) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
const broadcast = (event, data) => {
  for (const res of subs) send(res, event, data);
};

function sse(req, res) {
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-store", Connection: "keep-alive" });
  res.write(": hello\n\n");
  return res;
}

const RANK = { trace: 0, debug: 1, info: 2, warn: 3, error: 4 };

function problemsOf(text) {
  const out = [];
  text.split("\n").forEach((line, i) => {
    if (line.includes("\t")) out.push({ file: "/etc/dsh/composition.yaml", line: i + 1, col: line.indexOf("\t") + 1, message: "a tab: YAML indents with spaces" });
    const m = line.match(/binary:\s*(\S*missing\S*)/);
    if (m) out.push({ file: "/etc/dsh/composition.yaml", line: i + 1, col: line.indexOf(m[1]) + 1, message: `binary ${m[1]}: no such file` });
  });
  return out;
}

async function body(req) {
  let s = "";
  for await (const c of req) s += c;
  return s ? JSON.parse(s) : {};
}

const json = (res, code, v) => {
  res.writeHead(code, { "Content-Type": "application/json", "Cache-Control": "no-store" });
  res.end(JSON.stringify(v));
};

const CSP = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'";

async function serveFile(res, name, type) {
  try {
    const b = await readFile(join(dist, name));
    res.writeHead(200, { "Content-Type": type, "Content-Security-Policy": CSP, "Cache-Control": "no-store" });
    res.end(b);
  } catch {
    res.writeHead(404).end("not built: run npm run build");
  }
}

const server = createServer(async (req, res) => {
  const url = new URL(req.url, "http://x");
  const p = url.pathname;
  if (p === "/" || p === "/console/" || p === "/console/index.html") return serveFile(res, "index.html", "text/html; charset=utf-8");
  if (p === "/console/app.js") return serveFile(res, "app.js", "text/javascript; charset=utf-8");
  if (p === "/console/app.css") return serveFile(res, "app.css", "text/css; charset=utf-8");
  if (p === "/dev/flood" && req.method === "POST") {
    // A burst of log lines, for the page's row cap.
    const n = Number(url.searchParams.get("n")) || 2500;
    for (let i = 0; i < n; i++) broadcast("log", logLine());
    return json(res, 200, { sent: n });
  }
  if (!p.startsWith("/console/api/")) return json(res, 404, { error: "not found" });
  if (loggedOut) return json(res, 401, { error: "no console session: open the login link dsh printed" });
  if (req.method !== "GET" && req.headers["x-dsh-csrf"] !== CSRF) return json(res, 403, { error: "missing or wrong X-Dsh-Csrf" });
  const api = p.slice("/console/api".length);
  let m;
  if (api === "/session") return json(res, 200, { csrf: CSRF, version: "v0.30.0-mock", file: "/etc/dsh/composition.yaml" });
  if (api === "/graph") return json(res, 200, graph());
  if (api === "/agents") return json(res, 200, agents());
  if (api === "/approvals") return json(res, 200, { pending });
  if (api === "/composition") return json(res, 200, { file: "/etc/dsh/composition.yaml", text: composition });
  if (api === "/logs") {
    const entry = url.searchParams.get("entry") || "";
    const level = url.searchParams.get("level") || "trace";
    return json(res, 200, { lines: logs.filter((l) => (!entry || l.entry === entry) && RANK[l.level] >= (RANK[level] ?? 0)) });
  }
  if (api === "/composition/check" && req.method === "POST") return json(res, 200, { problems: problemsOf((await body(req)).text || "") });
  if (api === "/composition/apply" && req.method === "POST") {
    const text = (await body(req)).text || "";
    const problems = problemsOf(text);
    if (problems.length) return json(res, 200, { applied: false, problems, error: "" });
    composition = text;
    broadcast("graph", graph());
    return json(res, 200, { applied: true, problems: [], error: "" });
  }
  if ((m = api.match(/^\/entries\/([^/]+)\/reload$/)) && req.method === "POST") {
    if (m[1] === "kube") return json(res, 409, { error: "entry kube is disabled: enable it in the composition first" });
    return json(res, 200, { ok: true });
  }
  if ((m = api.match(/^\/calls\/([^/]+)\/cancel$/)) && req.method === "POST") {
    calls = calls.filter((c) => c.id !== decodeURIComponent(m[1]));
    broadcast("agents", agents());
    return json(res, 200, { ok: true });
  }
  if ((m = api.match(/^\/jobs\/([^/]+)\/([^/]+)\/kill$/)) && req.method === "POST") {
    const j = jobs.find((j) => j.id === decodeURIComponent(m[2]));
    if (!j) return json(res, 404, { error: "no such job" });
    j.state = "killed";
    j.exitCode = -1;
    broadcast("agents", agents());
    return json(res, 200, { ok: true });
  }
  if ((m = api.match(/^\/jobs\/([^/]+)\/([^/]+)\/output$/))) {
    const j = jobs.find((j) => j.id === decodeURIComponent(m[2]));
    if (!j || j.refuse) return json(res, 404, { error: "no such job" });
    sse(req, res);
    let sent = 0;
    const pump = () => {
      if (j.out.length > sent) {
        send(res, "output", { text: j.out.slice(sent) });
        sent = j.out.length;
      }
      if (j.state !== "running") {
        send(res, "end", { state: j.state, exitCode: j.exitCode });
        clearInterval(t);
        res.end();
      }
    };
    const t = setInterval(pump, 200);
    pump();
    req.on("close", () => clearInterval(t));
    return;
  }
  if ((m = api.match(/^\/terminals\/([^/]+)\/([^/]+)\/stream$/))) {
    sse(req, res);
    const b64 = (s) => Buffer.from(s).toString("base64");
    send(res, "output", { b64: b64("\x1b[2J\x1b[H\x1b[1;32mdev@box\x1b[0m:\x1b[1;34m~/dsh\x1b[0m$ ls\r\nMakefile  README.md  host  plugins  test\r\n\x1b[1;32mdev@box\x1b[0m:\x1b[1;34m~/dsh\x1b[0m$ ") });
    let n = 0;
    const t = setInterval(() => {
      n++;
      send(res, "output", { b64: b64(`echo tick ${n}\r\ntick ${n}\r\n\x1b[1;32mdev@box\x1b[0m:\x1b[1;34m~/dsh\x1b[0m$ `) });
    }, 3000);
    termStreams.add(res);
    req.on("close", () => {
      clearInterval(t);
      termStreams.delete(res);
    });
    return;
  }
  if ((m = api.match(/^\/terminals\/([^/]+)\/([^/]+)\/attach$/)) && req.method === "POST") return json(res, 200, { attach: "attach-token-1" });
  if ((m = api.match(/^\/terminals\/([^/]+)\/([^/]+)\/input$/)) && req.method === "POST") {
    const b = await body(req);
    if (b.attach !== "attach-token-1") return json(res, 403, { error: "not attached" });
    for (const r of termStreams) send(r, "output", { b64: Buffer.from(b.data.replace(/\r/g, "\r\n")).toString("base64") });
    return json(res, 200, { ok: true });
  }
  if ((m = api.match(/^\/approvals\/([^/]+)$/)) && req.method === "POST") {
    const id = decodeURIComponent(m[1]);
    if (!pending.some((q) => q.id === id)) return json(res, 404, { error: `question ${id} was already answered or expired` });
    pending = pending.filter((q) => q.id !== id);
    broadcast("approvals", { pending });
    return json(res, 200, { ok: true });
  }
  if (api === "/events") {
    sse(req, res);
    subs.add(res);
    req.on("close", () => subs.delete(res));
    return;
  }
  json(res, 404, { error: `no such API: ${req.method} ${p}` });
});
const termStreams = new Set();

// The fake host moves.
setInterval(() => {
  const j = jobs[0];
  if (j.state === "running") {
    j.out += `[${new Date().toISOString().slice(11, 19)}] compiling step ${j.out.split("\n").length}\n`;
  }
}, 700);
setInterval(() => broadcast("log", logLine()), 1500);
setInterval(() => broadcast("agents", agents()), 5000);
setInterval(() => {
  pending = pending.filter((q) => Date.parse(q.expiresAt) > Date.now());
  if (pending.length < 2) ask();
  broadcast("approvals", { pending });
}, 10000);

server.listen(port, "127.0.0.1", () => console.log(`mock console at http://127.0.0.1:${server.address().port}/`));
