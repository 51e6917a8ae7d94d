// The console's browser scenarios: playwright-core drives chromium (the
// system's, never a downloaded one) against a real `dsh serve --http`.
// console_test.go runs one scenario per process with its spec as JSON in
// $DSH_SCENARIO ({scenario, chromium, shots, base, login, cookie, token,
// params}) and reads stdout:
//
//   check: TEXT      one thing checked, logged by the Go test
//   ask: {name,...}  Go acts (kills a pid, sends to a terminal, looks at
//                    processes) and answers one JSON line on stdin
//   result: {...}    the last line: what the Go test checks further
//
// Any failure throws: the scenario saves a "-failed" screenshot and exits 1.
// Selectors are the data-testid values of the console's contract.
import { chromium } from "playwright-core";
import { createInterface } from "node:readline";
import path from "node:path";

const spec = JSON.parse(process.env.DSH_SCENARIO);
// The session cookie is named after the port (a browser sends a host's
// cookies to all its ports).
const COOKIE = spec.base ? "dsh_console_" + new URL(spec.base).port : "";
const params = spec.params ?? {};
// Every wait is bounded: the machine may be slow and shared.
const T = 30000;

const check = (msg) => console.log("check: " + msg);
const fail = (msg) => {
  throw new Error(msg);
};

const stdin = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
// ask has the Go test do something and returns its answer.
async function ask(name, data = {}) {
  console.log("ask: " + JSON.stringify({ name, ...data }));
  const { value, done } = await stdin.next();
  if (done) fail(`${name}: the Go test closed stdin`);
  const r = JSON.parse(value);
  if (r.error) fail(`${name}: ${r.error}`);
  return r;
}

// Root (as the tests run here) cannot use chromium's own sandbox, which
// needs an unprivileged user namespace setuid helper: chromium refuses to
// start as root without --no-sandbox. Playwright passes it by default
// (chromiumSandbox: false); it is named here so that it is plain.
//
// On this loaded machine chromium now and then dies at start (SIGSEGV
// before its first page): that start is tried again, twice at most, and
// said so; nothing of the console has been touched by then.
async function launch() {
  for (let attempt = 1; ; attempt++) {
    try {
      return await chromium.launch({ executablePath: spec.chromium, headless: true, timeout: T, args: ["--no-sandbox"] });
    } catch (e) {
      if (attempt >= 3) throw e;
      console.log(`chromium did not start (attempt ${attempt}: ${String(e.message).split("\n")[0]}); starting it again`);
    }
  }
}
const browser = await launch();

const pages = [];
// newPage opens a page in a fresh context, with the session cookie when
// one is given.
async function newPage(cookie = spec.cookie) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  if (cookie) await context.addCookies([{ name: COOKIE, value: cookie, url: spec.base + "/" }]);
  const page = await context.newPage();
  page.setDefaultTimeout(T);
  page.on("pageerror", (e) => console.log("page error: " + e.message));
  page.on("console", (m) => {
    if (m.type() === "error") console.log("page console error: " + m.text());
  });
  pages.push(page);
  return page;
}

// open loads the console with the session cookie and waits for the page.
async function open(tab) {
  const page = await newPage();
  const resp = await page.goto(spec.base + "/", { timeout: T });
  if (resp.status() !== 200) fail(`GET / answered ${resp.status()} with the session cookie`);
  await page.getByTestId("tab-composition").waitFor({ timeout: T });
  if (tab) await page.getByTestId(tab).click();
  return page;
}

async function shot(page, name, fullPage = true) {
  const file = path.join(spec.shots, name + ".png");
  await page.screenshot({ path: file, fullPage, timeout: T });
  check(`screenshot ${file}`);
  return file;
}

const entry = (page, id) => page.locator(`[data-testid="entry"][data-entry="${id}"]`);
const inner = (loc, id) => loc.locator(`[data-testid="${id}"]`);

// activeAll waits until every entry id shows data-state active.
async function activeAll(page, ids) {
  for (const id of ids) {
    await page.locator(`[data-testid="entry"][data-entry="${id}"][data-state="active"]`).waitFor({ timeout: T });
  }
  check(`entries ${ids.join(", ")} show data-state=active`);
}

// pidOf reads an entry's entry-pid as a number.
async function pidOf(page, id) {
  const text = (await inner(entry(page, id), "entry-pid").textContent()) ?? "";
  const m = text.match(/\d+/);
  if (!m) fail(`entry ${id}: entry-pid shows ${JSON.stringify(text)}, no pid`);
  return Number(m[0]);
}

// api sends a request from Node (not the browser, so any header can be
// forged) and returns its status and body.
async function api(method, url, headers = {}, body) {
  const r = await fetch(url, { method, headers, body, redirect: "manual", signal: AbortSignal.timeout(T) });
  return { status: r.status, body: await r.text(), headers: r.headers };
}

const scenarios = {
  // The browser runs here: a page of its own, no console needed.
  async selftest() {
    const page = await newPage();
    await page.goto("data:text/html,<title>selftest</title><h1 data-testid=hello>dsh console browser test</h1>");
    const text = await page.getByTestId("hello").textContent({ timeout: T });
    check(`chromium ${browser.version()} rendered a page; read back ${JSON.stringify(text)}`);
    return { text, version: browser.version(), shot: await shot(page, "selftest") };
  },

  // The printed one-time URL logs in: 303 to / with an HttpOnly,
  // SameSite=Strict cookie, and the page is there.
  async login() {
    const page = await newPage(null);
    await page.goto(spec.login, { timeout: T });
    // The page may add a #tab to the URL: the path is what counts.
    await page.waitForURL((u) => u.origin === spec.base && u.pathname === "/", { timeout: T });
    await page.getByTestId("tab-composition").waitFor({ timeout: T });
    check(`the login URL led to ${page.url()} and the page shows tab-composition`);
    if ((await page.getByTestId("login-required").count()) !== 0) fail("the page after login shows login-required");
    const cookie = (await page.context().cookies()).find((c) => c.name === COOKIE);
    if (!cookie) fail(`no ${COOKIE} cookie after login`);
    if (!cookie.httpOnly || cookie.sameSite !== "Strict" || cookie.path !== "/")
      fail(`the cookie is not HttpOnly, SameSite=Strict, Path=/: ${JSON.stringify(cookie)}`);
    check(`cookie ${COOKIE} is HttpOnly, SameSite=Strict, Path=/`);
    await shot(page, "login");
    return { cookie: cookie.value };
  },

  // The same code again: refused.
  async "login-twice"() {
    const page = await newPage(null);
    const resp = await page.goto(spec.login, { timeout: T });
    await page.getByTestId("login-refused").waitFor({ timeout: T });
    if (resp.status() !== 401) fail(`a used code answered ${resp.status()}, want 401`);
    const cookie = (await page.context().cookies()).find((c) => c.name === COOKIE);
    if (cookie) fail("a used code still set a session cookie");
    check("the code used a second time: 401 with login-refused and no cookie");
    await shot(page, "login-refused");
    return {};
  },

  // No cookie: the page and the API refuse.
  async "login-required"() {
    const page = await newPage(null);
    const resp = await page.goto(spec.base + "/", { timeout: T });
    await page.getByTestId("login-required").waitFor({ timeout: T });
    if (resp.status() !== 401) fail(`/ without a cookie answered ${resp.status()}, want 401`);
    check("/ without a cookie: 401 with login-required");
    const r = await api("GET", spec.base + "/console/api/graph");
    if (r.status !== 401) fail(`the API without a cookie answered ${r.status}: ${r.body}`);
    let error;
    try {
      error = JSON.parse(r.body).error;
    } catch {}
    if (!error) fail(`the API's 401 is not {"error": ...}: ${r.body}`);
    check(`GET /console/api/graph without a cookie: 401 ${JSON.stringify(error)}`);
    const bad = await api("GET", spec.base + "/console/api/graph", { Cookie: `${COOKIE}=forged` });
    if (bad.status !== 401) fail(`a forged cookie answered ${bad.status}`);
    check("a forged cookie: 401");
    await shot(page, "login-required");
    return {};
  },

  // A forged Origin is refused, the page's own is not; a change without
  // the CSRF header is refused.
  async "forged-origin"() {
    const cookie = `${COOKIE}=${spec.cookie}`;
    const own = await api("GET", spec.base + "/console/api/graph", { Cookie: cookie, Origin: spec.base });
    if (own.status !== 200) fail(`the page's own Origin answered ${own.status}: ${own.body}`);
    check(`GET /console/api/graph with Origin ${spec.base}: 200`);
    const evil = await api("GET", spec.base + "/console/api/graph", { Cookie: cookie, Origin: "http://evil.example" });
    if (evil.status !== 403) fail(`Origin http://evil.example answered ${evil.status}: ${evil.body}`);
    if (!evil.body.includes("evil.example")) fail(`the refusal does not name the Origin: ${evil.body}`);
    check(`GET with Origin http://evil.example: 403 ${JSON.stringify(evil.body.trim())}`);
    const evilPage = await api("GET", spec.base + "/", { Cookie: cookie, Origin: "http://evil.example", Accept: "text/html" });
    if (evilPage.status !== 403) fail(`/ with Origin http://evil.example answered ${evilPage.status}`);
    check("GET / with Origin http://evil.example: 403");
    const noCsrf = await api("POST", spec.base + "/console/api/composition/check",
      { Cookie: cookie, Origin: spec.base, "Content-Type": "application/json" }, JSON.stringify({ text: "plugins: []\n" }));
    if (noCsrf.status !== 403) fail(`a POST without X-Dsh-Csrf answered ${noCsrf.status}: ${noCsrf.body}`);
    check("POST /console/api/composition/check without X-Dsh-Csrf: 403");
    const sess = JSON.parse((await api("GET", spec.base + "/console/api/session", { Cookie: cookie })).body);
    const withCsrf = await api("POST", spec.base + "/console/api/composition/check",
      { Cookie: cookie, Origin: spec.base, "Content-Type": "application/json", "X-Dsh-Csrf": sess.csrf }, JSON.stringify({ text: "plugins: []\n" }));
    if (withCsrf.status !== 200) fail(`the same POST with the session's CSRF token answered ${withCsrf.status}: ${withCsrf.body}`);
    check("the same POST with the session's X-Dsh-Csrf: 200");
    const page = await open("tab-composition");
    await shot(page, "forged-origin");
    return {};
  },

  // Every entry active, with its pid and binary's hash; the full-page
  // picture of the composition.
  async composition() {
    const page = await open("tab-composition");
    await page.getByTestId("graph").waitFor({ timeout: T });
    await activeAll(page, Object.keys(params.entries));
    const pids = {};
    for (const [id, sha] of Object.entries(params.entries)) {
      pids[id] = await pidOf(page, id);
      const shown = ((await inner(entry(page, id), "entry-sha256").textContent()) ?? "").match(/[0-9a-f]{8,}/g) ?? [];
      if (!shown.length || !shown.every((h) => sha.includes(h))) fail(`entry ${id}: entry-sha256 shows ${shown}, the binary's is ${sha}`);
    }
    check(`pids ${JSON.stringify(pids)}; each entry-sha256 is its binary's`);
    // Let uptimes tick and fonts settle before the picture.
    await page.waitForTimeout(500);
    const file = await shot(page, "composition");
    return { pids, shot: file };
  },

  // kill -9 of a plugin: the page shows restarting, then active with a new pid.
  async restart() {
    const id = params.entry;
    const page = await open("tab-composition");
    await activeAll(page, [id]);
    const before = await pidOf(page, id);
    // Every state the entry shows from here on, however briefly.
    await page.evaluate((id) => {
      window.__states = [];
      const look = () => {
        const el = document.querySelector(`[data-testid="entry"][data-entry="${id}"]`);
        const s = el?.getAttribute("data-state");
        if (s && window.__states[window.__states.length - 1] !== s) window.__states.push(s);
      };
      look();
      new MutationObserver(look).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
    }, id);
    await ask("kill", { pid: before });
    check(`killed pid ${before} of ${id} with SIGKILL`);
    await page.waitForFunction(
      ({ id, before }) => {
        const el = document.querySelector(`[data-testid="entry"][data-entry="${id}"][data-state="active"]`);
        const pid = el?.querySelector('[data-testid="entry-pid"]')?.textContent?.match(/\d+/)?.[0];
        return pid && Number(pid) !== before;
      },
      { id, before },
      { timeout: T },
    );
    const states = await page.evaluate(() => window.__states);
    if (!states.includes("restarting")) fail(`the entry went ${states.join(" -> ")}: never restarting`);
    const after = await pidOf(page, id);
    const restarts = ((await inner(entry(page, id), "entry-restarts").textContent()) ?? "").match(/\d+/)?.[0];
    if (!(Number(restarts) >= 1)) fail(`entry-restarts shows ${restarts}`);
    check(`${id} went ${states.join(" -> ")}; pid ${before} -> ${after}; restarts ${restarts}`);
    await shot(page, "restart");
    return { before, after };
  },

  // entry-reload: the entry moves to a new process of its binary.
  async reload() {
    const id = params.entry;
    const page = await open("tab-composition");
    await activeAll(page, [id]);
    const before = await pidOf(page, id);
    await inner(entry(page, id), "entry-reload").click();
    await page.waitForFunction(
      ({ id, before }) => {
        const el = document.querySelector(`[data-testid="entry"][data-entry="${id}"][data-state="active"]`);
        const pid = el?.querySelector('[data-testid="entry-pid"]')?.textContent?.match(/\d+/)?.[0];
        return pid && Number(pid) !== before;
      },
      { id, before },
      { timeout: T },
    );
    const after = await pidOf(page, id);
    check(`entry-reload: ${id} active again, pid ${before} -> ${after}`);
    await shot(page, "reload");
    return { before, after };
  },

  // A background job started over MCP: listed under its owner, its output
  // streams into job-output.
  async "job-output"() {
    const page = await open("tab-agents");
    const job = page.locator(`[data-testid="job"][data-job="${params.job}"]`);
    await job.waitFor({ timeout: T });
    const state = await job.getAttribute("data-state");
    if (state !== "running") fail(`job ${params.job} shows data-state=${state}`);
    const owner = await page.locator('[data-testid="owner"]').filter({ has: job }).getAttribute("data-owner");
    check(`job ${params.job} listed running under owner ${owner}`);
    await inner(job, "job-open").click();
    const out = page.getByTestId("job-output");
    await page.waitForFunction((el) => /tick-1\b/.test(el.textContent), await out.elementHandle(), { timeout: T });
    const first = (await out.textContent()).match(/tick-(\d+)/g).length;
    // Streaming: lines printed after the view opened appear in it.
    await page.waitForFunction(
      ({ el, n }) => (el.textContent.match(/tick-\d+/g) ?? []).length >= n + 3,
      { el: await out.elementHandle(), n: first },
      { timeout: T },
    );
    const text = await out.textContent();
    const last = text.match(/tick-\d+/g).pop();
    check(`job-output showed ${first} tick lines when opened, then streamed to ${last}`);
    await shot(page, "job-output");
    return { owner };
  },

  // job-kill in the page ends the job and every process of its tree.
  async "job-kill"() {
    const page = await open("tab-agents");
    const job = page.locator(`[data-testid="job"][data-job="${params.job}"]`);
    await page.locator(`[data-testid="job"][data-job="${params.job}"][data-state="running"]`).waitFor({ timeout: T });
    const before = await ask("processes");
    if (!before.count) fail("the job's sleep processes are not running before the kill");
    check(`${before.count} processes of the job's tree running`);
    await inner(job, "job-kill").click();
    // The page asks before it kills (an in-page dialog, kill-confirm);
    // the contract leaves that to the page, so a page without it passes too.
    const yes = page.getByTestId("kill-confirm-yes");
    if (await yes.waitFor({ timeout: 5000 }).then(() => true, () => false)) {
      await yes.click();
      check("confirmed in kill-confirm");
    }
    await page.locator(`[data-testid="job"][data-job="${params.job}"]:not([data-state="running"])`).waitFor({ timeout: T });
    const state = await job.getAttribute("data-state");
    check(`job ${params.job} shows data-state=${state} after job-kill`);
    const after = await ask("gone");
    check(`no process of the job's tree is left (${after.waited} ms)`);
    await shot(page, "job-kill");
    return { state };
  },

  // A terminal opened over MCP: its screen (prompt and earlier output,
  // repainted) and then live output in the read-only xterm view.
  async terminal() {
    const page = await open("tab-agents");
    const term = page.locator(`[data-testid="terminal"][data-terminal="${params.terminal}"]`);
    await term.waitFor({ timeout: T });
    await inner(term, "terminal-open").click();
    const rows = page.locator('[data-testid="terminal-view"] .xterm-rows');
    await rows.waitFor({ timeout: T });
    const rowsEl = await rows.elementHandle();
    const hasText = (want) => page.waitForFunction(({ el, want }) => el.innerText.includes(want), { el: rowsEl, want }, { timeout: T });
    await hasText(params.before);
    const text = await rows.innerText();
    // xterm's DOM rows pad with no-break spaces.
    const prompt = text.split("\n").map((l) => l.replace(/\u00a0/g, " ").trimEnd()).filter((l) => /[#$]$/.test(l));
    if (!prompt.length) fail(`no prompt in the terminal view:\n${text}`);
    check(`terminal-view repainted ${JSON.stringify(params.before)} and the prompt ${JSON.stringify(prompt.pop().trim())}`);
    await ask("type");
    await hasText(params.live);
    check(`terminal-view showed ${JSON.stringify(params.live)}, typed over MCP after it opened`);
    await shot(page, "terminal");
    return {};
  },

  // A call in flight, cancelled in the page.
  async "call-cancel"() {
    const page = await open("tab-agents");
    const call = page.locator('[data-testid="call"]').filter({ hasText: params.marker });
    await call.waitFor({ timeout: T });
    const id = await call.getAttribute("data-call");
    check(`call ${id} listed in flight: ${JSON.stringify((await call.innerText()).replace(/\s+/g, " ").trim())}`);
    await shot(page, "call-in-flight");
    await inner(call, "call-cancel").click();
    await call.waitFor({ state: "detached", timeout: T });
    check(`call-cancel: call ${id} left the list`);
    await shot(page, "call-cancel");
    return { call: id };
  },

  // Attached after attach-confirm, what is typed in the page goes to the
  // terminal; the Go test reads it back over MCP as the agent would.
  async "terminal-attach"() {
    const page = await open("tab-agents");
    const term = page.locator(`[data-testid="terminal"][data-terminal="${params.terminal}"]`);
    await term.waitFor({ timeout: T });
    await inner(term, "terminal-attach").click();
    await page.getByTestId("attach-confirm-no").click();
    await page.getByTestId("attach-confirm").waitFor({ state: "detached", timeout: T });
    if ((await page.getByTestId("terminal-status").filter({ hasText: "attached" }).count()) !== 0) fail("attached after attach-confirm answered no");
    check("attach-confirm answered no: the dialog closed, not attached");
    await inner(term, "terminal-attach").click();
    await page.getByTestId("attach-confirm-yes").click();
    // The page says so once the host gave it the attach token.
    await page.getByTestId("terminal-status").filter({ hasText: "attached" }).waitFor({ timeout: T });
    check("attach-confirm answered yes: attached");
    await page.locator('[data-testid="terminal-view"] .xterm-screen').click();
    await page.keyboard.type(params.type);
    await page.keyboard.press("Enter");
    const rows = await page.locator('[data-testid="terminal-view"] .xterm-rows').elementHandle();
    await page.waitForFunction(({ el, want }) => el.innerText.includes(want), { el: rows, want: params.want }, { timeout: T });
    check(`typed ${JSON.stringify(params.type)} in the page; terminal-view shows ${JSON.stringify(params.want)}`);
    const r = await ask("read");
    check(`terminal_read over MCP shows it too: ${JSON.stringify(r.line)}`);
    await shot(page, "terminal-attach");
    return {};
  },

  // The logs tab: lines of the host and plugins, filtered by level.
  async logs() {
    const page = await open("tab-logs");
    const line = (text) => page.locator('[data-testid="log-line"]').filter({ hasText: text });
    for (const want of params.info) await line(want).first().waitFor({ timeout: T });
    check(`log-line rows show ${params.info.map((w) => JSON.stringify(w)).join(", ")}`);
    await page.getByTestId("logs-level").selectOption("error");
    await line(params.error).first().waitFor({ timeout: T });
    await line(params.info[0]).first().waitFor({ state: "detached", timeout: T });
    const levels = await page.locator('[data-testid="log-line"]').evaluateAll((els) => els.map((e) => e.getAttribute("data-level")));
    if (levels.some((l) => !["error", "fatal", "panic"].includes(l))) fail(`logs-level error still shows levels ${[...new Set(levels)]}`);
    check(`logs-level error: ${levels.length} lines, all error, ${JSON.stringify(params.error)} among them`);
    await shot(page, "logs");
    return {};
  },

  // An escalation waits on the console: approve or deny it in the page.
  async approval() {
    const page = await open("tab-approvals");
    const item = page.locator('[data-testid="approval"]').filter({ hasText: params.marker });
    await item.waitFor({ timeout: T });
    const count = ((await page.getByTestId("approvals-count").textContent()) ?? "").match(/\d+/)?.[0];
    if (!(Number(count) >= 1)) fail(`approvals-count shows ${count}`);
    const text = await item.innerText();
    for (const want of [params.command, params.justification]) {
      if (!text.includes(want)) fail(`the approval does not show ${JSON.stringify(want)}:\n${text}`);
    }
    check(`approval shows the command and justification; approvals-count ${count}`);
    await shot(page, `approval-${params.decision}-asked`);
    await inner(item, `approval-${params.decision}`).click();
    await item.waitFor({ state: "detached", timeout: T });
    check(`answered ${params.decision}; the approval left the list`);
    await shot(page, `approval-${params.decision}`);
    return {};
  },

  // A good edit applied from the page: written and applied as a reload.
  async "composition-apply"() {
    const page = await open("tab-composition");
    const editor = page.getByTestId("composition-editor");
    await page.waitForFunction(
      ({ el, find }) => el.value.includes(find),
      { el: await editor.elementHandle(), find: params.find },
      { timeout: T },
    );
    const text = await editor.inputValue();
    const edited = text.replace(params.find, params.replace);
    await editor.fill(edited);
    await page.getByTestId("composition-apply").click();
    await page.locator(`[data-testid="entry"][data-entry="${params.entry}"][data-state="${params.state}"]`).waitFor({ timeout: T });
    const result = ((await page.getByTestId("composition-result").textContent()) ?? "").trim();
    if ((await page.getByTestId("composition-problem").count()) !== 0) fail("problems shown after a good edit");
    check(`composition-apply: ${params.entry} shows data-state=${params.state}; composition-result ${JSON.stringify(result)}`);
    await shot(page, "composition-apply");
    return { text: edited };
  },

  // The page says whether its live stream holds: live, then reconnecting
  // once the host is gone.
  async connection() {
    const page = await open("tab-composition");
    const conn = page.getByTestId("connection");
    await conn.filter({ hasText: /^\s*live\s*$/ }).waitFor({ timeout: T });
    check("connection shows live");
    await ask("stop");
    check("dsh serve stopped (SIGTERM)");
    await conn.filter({ hasText: "reconnecting" }).waitFor({ timeout: T });
    check(`connection shows ${JSON.stringify((await conn.innerText()).trim())}`);
    await shot(page, "connection");
    return {};
  },

  // --no-auth on loopback: the page with no cookie; Origin and CSRF
  // checks still stand.
  async "no-auth"() {
    const page = await newPage(null);
    const resp = await page.goto(spec.base + "/", { timeout: T });
    if (resp.status() !== 200) fail(`GET / under --no-auth answered ${resp.status()}`);
    await page.getByTestId("tab-composition").click();
    await activeAll(page, params.entries);
    check("the page opened with no login");
    const evil = await api("GET", spec.base + "/console/api/graph", { Origin: "http://evil.example" });
    if (evil.status !== 403) fail(`Origin http://evil.example under --no-auth answered ${evil.status}: ${evil.body}`);
    check("GET with Origin http://evil.example: 403");
    const body = JSON.stringify({ text: "plugins: []\n" });
    const noCsrf = await api("POST", spec.base + "/console/api/composition/check", { "Content-Type": "application/json" }, body);
    if (noCsrf.status !== 403) fail(`a POST without X-Dsh-Csrf under --no-auth answered ${noCsrf.status}: ${noCsrf.body}`);
    const sess = JSON.parse((await api("GET", spec.base + "/console/api/session")).body);
    const withCsrf = await api("POST", spec.base + "/console/api/composition/check", { "Content-Type": "application/json", "X-Dsh-Csrf": sess.csrf }, body);
    if (withCsrf.status !== 200) fail(`the same POST with the CSRF token answered ${withCsrf.status}: ${withCsrf.body}`);
    check("POST without X-Dsh-Csrf: 403; with the session's: 200");
    await shot(page, "no-auth");
    return {};
  },

  // A broken edit: the problem with file:line, nothing written or changed.
  async "composition-broken"() {
    const page = await open("tab-composition");
    await activeAll(page, params.entries);
    const editor = page.getByTestId("composition-editor");
    await editor.waitFor({ timeout: T });
    // The editor fills from GET /console/api/composition once the page is up.
    await page.waitForFunction(
      ({ el, find }) => el.value.includes(find),
      { el: await editor.elementHandle(), find: params.find },
      { timeout: T },
    );
    const text = await editor.inputValue();
    const lines = text.split("\n");
    const n = lines.findIndex((l) => l.trim() === params.find) + 1;
    if (n === 0) fail(`the editor does not hold the line ${JSON.stringify(params.find)}:\n${text}`);
    lines[n - 1] = lines[n - 1].replace(params.find, params.replace);
    await editor.fill(lines.join("\n"));
    const want = `${params.file}:${n}`;
    for (const button of ["composition-check", "composition-apply"]) {
      // Problems shown before are taken away, so that only what this
      // button brings can satisfy the wait below.
      await page.evaluate(() => document.querySelectorAll('[data-testid="composition-problem"]').forEach((el) => el.remove()));
      await page.getByTestId(button).click();
      const problem = page.locator(`[data-testid="composition-problem"][data-line="${n}"]`).filter({ hasText: want });
      await problem.waitFor({ timeout: T });
      const ptext = (await problem.first().innerText()).trim();
      if (!ptext.includes(params.message)) fail(`the problem at line ${n} reads ${JSON.stringify(ptext)}`);
      check(`${button}: composition-problem ${JSON.stringify(ptext)}`);
    }
    const result = ((await page.getByTestId("composition-result").textContent({ timeout: T })) ?? "").trim();
    check(`composition-result after apply: ${JSON.stringify(result)}`);
    await ask("unchanged");
    check("the composition file on disk is unchanged");
    await activeAll(page, params.entries);
    await shot(page, "composition-broken");
    return { line: n };
  },
};

const name = spec.scenario;
try {
  if (!scenarios[name]) fail(`no scenario ${name}`);
  const result = await scenarios[name]();
  console.log("result: " + JSON.stringify(result));
} catch (e) {
  console.error(`scenario ${name}: ${e.stack ?? e}`);
  for (const [i, p] of pages.entries()) {
    const file = path.join(spec.shots, `${spec.name ?? name}-failed${i ? "-" + i : ""}.png`);
    try {
      await p.screenshot({ path: file, fullPage: true, timeout: 10000 });
      console.error(`screenshot ${file}; page at ${p.url()}`);
    } catch {}
  }
  process.exitCode = 1;
} finally {
  await browser.close();
  process.exit();
}
