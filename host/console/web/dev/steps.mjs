// What shoot.mjs does by default: every tab and its main interactions
// against mock.mjs, each outcome checked, with a screenshot of each view.
const q = (testid) => `[data-testid="${testid}"]`;
const text = (sel) => `document.querySelector('${sel}')?.textContent`;

export default async function ({ url, cdp, evaluate, shot, click, waitFor, sleep, expect }) {
  await cdp("Page.navigate", { url });
  await waitFor(`document.querySelectorAll('${q("entry")}').length === 6`);
  await waitFor(`${text(q("connection"))} === "live"`);
  const entry = (id) => `${q("entry")}[data-entry="${id}"]`;
  expect((await evaluate(`document.querySelector('${entry("terminal")}').dataset.state`)) === "pending", "entry terminal has data-state=pending");
  expect((await evaluate(text(`${entry("terminal")} ${q("entry-reason")}`))).includes("waiting for pty"), "entry terminal says why it is pending");
  const err = await evaluate(text(`${entry("approval-ui")} ${q("entry-error")}`));
  expect(err.includes("unknown flag --bogus") && err.includes("/etc/dsh/composition.yaml:14"), "entry-error holds the message and file:line");
  expect(await evaluate(`document.querySelector('${entry("kube")}').classList.contains("off")`), "a disabled entry is greyed");
  // bash-local→shell-env, tool-bash→bash-local, tool-bash→approval-ui
  // (optional, dashed), terminal→bash-local; terminal's pty has no provider.
  await waitFor(`document.querySelectorAll('[data-testid="graph"] path.arrow').length === 4`);
  expect((await evaluate(`document.querySelectorAll('[data-testid="graph"] path.arrow.optional').length`)) === 1, "four consumer→provider arrows, one optional");
  // Providers sit left of their consumers.
  const x = (id) => evaluate(`document.querySelector('${entry(id)}').getBoundingClientRect().left`);
  expect((await x("shell-env")) < (await x("bash-local")) && (await x("bash-local")) < (await x("tool-bash")), "columns by dependency depth");
  // Host text never becomes markup.
  expect((await evaluate(`document.querySelectorAll('img, script:not([src])').length`)) === 0, "no element made from the host's text");
  await sleep(300);
  await shot("composition");

  // Check with a problem, then click it: the cursor goes to its line.
  await evaluate(`(() => { const t = document.querySelector('${q("composition-editor")}'); t.value = t.value.replace("plugins/terminal", "plugins/missing-terminal"); t.dispatchEvent(new Event("input")); })()`);
  await click(q("composition-check"));
  await waitFor(`document.querySelectorAll('${q("composition-problem")}').length > 0`);
  const line = Number(await evaluate(`document.querySelector('${q("composition-problem")}').dataset.line`));
  expect(line === 12, `the problem is at line 12 (got ${line})`);
  expect((await evaluate(text(q("composition-problem")))) === "/etc/dsh/composition.yaml:12: binary plugins/missing-terminal: no such file", "the problem reads FILE:LINE: MESSAGE");
  await click(q("composition-problem"));
  const cursorLine = await evaluate(`(() => { const t = document.querySelector('${q("composition-editor")}'); return t.value.slice(0, t.selectionStart).split("\\n").length; })()`);
  expect(cursorLine === 12, `clicking the problem puts the cursor on line 12 (got ${cursorLine})`);
  expect((await evaluate(`document.querySelector(".gutter .bad")?.textContent`)) === "12", "the gutter marks line 12");
  await evaluate(`window.scrollTo(0, document.body.scrollHeight)`);
  await shot("composition-problems");

  await click(q("tab-agents"));
  await waitFor(`document.querySelectorAll('${q("job")}').length > 0`);
  const elapsedSel = `${q("call")} [data-testid="call-elapsed"]`;
  const e1 = await evaluate(text(elapsedSel));
  await waitFor(`${text(elapsedSel)} !== ${JSON.stringify(e1)}`, 5000);
  expect(true, `a call's elapsed time ticks (${e1} → ${await evaluate(text(elapsedSel))})`);
  await click(`${q("job")}[data-job="j-1"] ${q("job-open")}`);
  await waitFor(`/compiling step/.test(${text(q("job-output"))})`);
  const n1 = (await evaluate(text(q("job-output")))).split("\n").length;
  await waitFor(`${text(q("job-output"))}.split("\\n").length > ${n1}`, 5000);
  expect(true, `job-output streams (${n1} lines, then more)`);
  await click(`${q("terminal")} ${q("terminal-open")}`);
  await waitFor(`/README\\.md/.test(document.querySelector('${q("terminal-view")} .xterm-rows')?.textContent || "")`);
  expect(true, "terminal-view shows the repainted screen");
  await shot("agents");

  // Attach asks first; no leaves it read-only.
  await click(`${q("terminal")} ${q("terminal-attach")}`);
  await waitFor(`!!document.querySelector('${q("attach-confirm")}')`);
  await shot("attach-confirm");
  await click(q("attach-confirm-no"));
  await evaluate(`(() => { window.__sent = []; const f = window.fetch; window.fetch = (u, o) => { window.__sent.push(String(u)); return f(u, o); }; })()`);
  await evaluate(`document.querySelector('${q("terminal-view")} textarea').focus()`);
  await cdp("Input.insertText", { text: "nottyped" });
  await sleep(600);
  const sent = await evaluate(`window.__sent.join(" ")`);
  expect(!/\/attach|\/input/.test(sent) && !(await evaluate(text(`${q("terminal-view")} .xterm-rows`))).includes("nottyped"), `a read-only terminal sends no typing (sent: ${sent || "nothing"})`);
  await click(`${q("terminal")} ${q("terminal-attach")}`);
  await waitFor(`!!document.querySelector('${q("attach-confirm")}')`);
  await click(q("attach-confirm-yes"));
  await waitFor(`${text(`${q("terminal")} ${q("terminal-attach")}`)} === "Detach"`);
  await cdp("Input.insertText", { text: "echo typed-here" });
  await cdp("Input.dispatchKeyEvent", { type: "keyDown", key: "Enter", code: "Enter", windowsVirtualKeyCode: 13, text: "\r" });
  await waitFor(`/echo typed-here/.test(${text(`${q("terminal-view")} .xterm-rows`)})`);
  expect(true, "after attach-confirm-yes, typing goes through .../input");

  // Kill asks first.
  await click(`${q("job")}[data-job="j-1"] ${q("job-kill")}`);
  await waitFor(`!!document.querySelector('${q("kill-confirm")}')`);
  await click(q("kill-confirm-yes"));
  await waitFor(`document.querySelector('${q("job")}[data-job="j-1"]').dataset.state === "killed"`);
  await waitFor(`/ended: killed/.test(${text(q("job-output-status"))})`);
  expect(true, "job-kill after kill-confirm-yes: the job shows killed and its output ended");
  await shot("agents-killed");

  await click(q("tab-approvals"));
  await waitFor(`document.querySelectorAll('${q("approval")}').length === 2`);
  expect((await evaluate(text(q("approvals-count")))) === "2", "approvals-count shows 2");
  const leftSel = `${q("approval")}[data-approval="q-1"] [data-testid="approval-time-left"]`;
  const left1 = await evaluate(text(leftSel));
  await waitFor(`${text(leftSel)} !== ${JSON.stringify(left1)}`, 5000);
  const left2 = await evaluate(text(leftSel));
  expect(/left$/.test(left2), `time left counts down (${left1} → ${left2})`);
  expect((await evaluate(text(`${q("approval")} [data-testid="approval-hosts"]`))).includes("<script>"), "hosts shown as text");
  await shot("approvals");
  const id = await evaluate(`document.querySelector('${q("approval")}').dataset.approval`);
  await click(`${q("approval")}[data-approval="${id}"] ${q("approval-approve")}`);
  await waitFor(`!document.querySelector('${q("approval")}[data-approval="${id}"]')`);
  expect((await evaluate(text(q("approvals-count")))) === "1", "approving takes the question away and the count to 1");

  await click(q("tab-logs"));
  await waitFor(`document.querySelectorAll('${q("log-line")}').length > 0`);
  const levels = await evaluate(`[...new Set([...document.querySelectorAll('${q("log-line")}')].map(e => e.dataset.level))].sort().join(",")`);
  expect(levels === "error,info,warn", `the default filter is info and above (${levels})`);
  const before = await evaluate(`document.querySelectorAll('${q("log-line")}').length`);
  await waitFor(`document.querySelectorAll('${q("log-line")}').length > ${before}`, 8000);
  expect(true, `live lines are appended (${before}, then more)`);
  await shot("logs");
  await evaluate(`(() => { const s = document.querySelector('${q("logs-level")}'); s.value = "error"; s.dispatchEvent(new Event("change")); })()`);
  await waitFor(`[...document.querySelectorAll('${q("log-line")}')].every(e => e.dataset.level === "error")`);
  await evaluate(`(() => { const s = document.querySelector('${q("logs-entry")}'); s.value = "tool-bash"; s.dispatchEvent(new Event("change")); const l = document.querySelector('${q("logs-level")}'); l.value = "trace"; l.dispatchEvent(new Event("change")); })()`);
  await waitFor(`(() => { const r = [...document.querySelectorAll('${q("log-line")}')]; return r.length > 0 && r.every(e => e.dataset.entry === "tool-bash"); })()`);
  expect(true, "logs-level and logs-entry filter the lines");
  await shot("logs-filtered");

  // A burst past the cap: the page keeps the newest 2000 rows.
  await evaluate(`(() => { const s = document.querySelector('${q("logs-entry")}'); s.value = ""; s.dispatchEvent(new Event("change")); })()`);
  await sleep(500);
  await evaluate(`fetch("/dev/flood?n=2500", { method: "POST" })`);
  await waitFor(`document.querySelectorAll('${q("log-line")}').length === 2000`, 15000);
  await sleep(1000);
  const rows = await evaluate(`document.querySelectorAll('${q("log-line")}').length`);
  const last = await evaluate(`document.querySelector('${q("log-line")}:last-child .message').textContent`);
  expect(rows === 2000 && /message number \d{4}|not html/.test(last), `logs hold at most 2000 rows, the newest last (${rows}, last: ${last})`);
}
