// Drives Debian's chromium headless over the DevTools protocol to look at the
// page served by mock.mjs: runs a list of steps (navigate, evaluate, wait,
// screenshot). Needs node's WebSocket (node >= 22, or node 20 with
// --experimental-websocket). Not part of the build.
//
//   node --experimental-websocket dev/shoot.mjs URL OUTDIR
//
// Steps (STEPS, default ./steps.mjs) get expect(cond, what): a false one
// fails the run (exit status 1) after saving a "failed" screenshot.
import { spawn } from "node:child_process";
import { mkdtemp, readFile, writeFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [url = "http://127.0.0.1:8377/", out = "/tmp/shots"] = process.argv.slice(2);
const scheme = process.env.SCHEME || "light";
const profile = await mkdtemp(join(tmpdir(), "shoot-"));
const chrome = spawn("/usr/bin/chromium", [
  "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
  `--user-data-dir=${profile}`, "--remote-debugging-port=0", `--window-size=${process.env.WIDTH || 1400},1000`, "about:blank",
], { stdio: "ignore" });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let port;
for (let i = 0; i < 100 && !port; i++) {
  await sleep(200);
  try {
    port = (await readFile(join(profile, "DevToolsActivePort"), "utf8")).split("\n")[0];
  } catch {}
}
if (!port) throw new Error("chromium did not start within 20 s");
const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
const page = targets.find((t) => t.type === "page");
const ws = new WebSocket(page.webSocketDebuggerUrl);
await new Promise((r, j) => { ws.onopen = r; ws.onerror = j; });
let id = 0;
const waiting = new Map();
const logs = [];
ws.onmessage = (m) => {
  const msg = JSON.parse(m.data);
  if (msg.id && waiting.has(msg.id)) {
    waiting.get(msg.id)(msg);
    waiting.delete(msg.id);
  } else if (msg.method === "Runtime.consoleAPICalled") logs.push(`console.${msg.params.type}: ${msg.params.args.map((a) => a.value ?? a.description).join(" ")}`);
  else if (msg.method === "Runtime.exceptionThrown") logs.push(`exception: ${JSON.stringify(msg.params.exceptionDetails.exception?.description || msg.params.exceptionDetails.text)}`);
  else if (msg.method === "Log.entryAdded") logs.push(`log.${msg.params.entry.level}: ${msg.params.entry.text} ${msg.params.entry.url || ""}`);
};
const cdp = (method, params = {}) =>
  new Promise((resolve, reject) => {
    const n = ++id;
    waiting.set(n, (msg) => (msg.error ? reject(new Error(`${method}: ${msg.error.message}`)) : resolve(msg.result)));
    ws.send(JSON.stringify({ id: n, method, params }));
  });
const evaluate = async (expr) => {
  const r = await cdp("Runtime.evaluate", { expression: expr, awaitPromise: true, returnByValue: true });
  if (r.exceptionDetails) throw new Error(`${expr}: ${r.exceptionDetails.exception?.description || r.exceptionDetails.text}`);
  return r.result.value;
};
const expect = (cond, what) => {
  if (!cond) throw new Error(`expected ${what}`);
  console.log(`ok: ${what}`);
};
const shot = async (name) => {
  const r = await cdp("Page.captureScreenshot", { format: "png" });
  await writeFile(join(out, `${name}.png`), Buffer.from(r.data, "base64"));
  console.log(`shot ${name}.png`);
};
const click = (sel) => evaluate(`(() => { const e = document.querySelector(${JSON.stringify(sel)}); if (!e) throw new Error("no ${sel.replace(/"/g, "'")}"); e.click(); return true; })()`);
const waitFor = async (expr, ms = 10000) => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await evaluate(expr)) return;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${expr}`);
};

try {
  await cdp("Runtime.enable");
  await cdp("Log.enable");
  await cdp("Page.enable");
  await cdp("Emulation.setEmulatedMedia", { features: [{ name: "prefers-color-scheme", value: scheme }] });
  const steps = (await import(process.env.STEPS || "./steps.mjs")).default;
  try {
    await steps({ url, cdp, evaluate, shot, click, waitFor, sleep, expect });
  } catch (e) {
    await shot("failed").catch(() => {});
    throw e;
  }
} finally {
  for (const l of logs) console.log(l);
  ws.close();
  chrome.kill();
  await sleep(300);
  await rm(profile, { recursive: true, force: true });
}
