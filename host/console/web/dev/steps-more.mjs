// More of the page's behaviour against mock.mjs: apply, approve, logs
// filters, typing into an attached terminal. Run with STEPS=./steps-more.mjs.
const q = (testid) => `[data-testid="${testid}"]`;
const text = (sel) => `document.querySelector('${sel}')?.textContent`;

export default async function ({ url, cdp, evaluate, shot, click, waitFor, sleep }) {
  await cdp("Page.navigate", { url });
  await waitFor(`document.querySelectorAll('${q("entry")}').length > 0`);
  const setText = (f) => evaluate(`(() => { const t = document.querySelector('${q("composition-editor")}'); t.value = (${f})(t.value); t.dispatchEvent(new Event("input")); })()`);

  await setText(`(v) => v.replace("plugins/shell-env", "plugins/missing-env")`);
  await click(q("composition-apply"));
  await waitFor(`/Not applied/.test(${text(q("composition-result"))})`);
  console.log("apply with problem:", await evaluate(text(q("composition-result"))), "|", await evaluate(text(q("composition-problem"))));
  await setText(`(v) => v.replace("plugins/missing-env", "plugins/shell-env")`);
  await click(q("composition-apply"));
  await waitFor(`${text(q("composition-result"))} === "Applied."`);
  console.log("apply clean:", await evaluate(text(q("composition-result"))), "problems:", await evaluate(`document.querySelectorAll('${q("composition-problem")}').length`));

  await click(q("tab-approvals"));
  const before = Number(await evaluate(text(q("approvals-count"))));
  const id = await evaluate(`document.querySelector('${q("approval")}').dataset.approval`);
  await click(`${q("approval")}[data-approval="${id}"] ${q("approval-approve")}`);
  await waitFor(`!document.querySelector('${q("approval")}[data-approval="${id}"]')`);
  console.log("approved", id, "badge", before, "->", await evaluate(text(q("approvals-count"))));

  await click(q("tab-logs"));
  await evaluate(`(() => { const s = document.querySelector('${q("logs-level")}'); s.value = "error"; s.dispatchEvent(new Event("change")); })()`);
  await sleep(800);
  console.log("levels shown at error:", await evaluate(`[...new Set([...document.querySelectorAll('${q("log-line")}')].map(e => e.dataset.level))].join(",")`));
  await evaluate(`(() => { const s = document.querySelector('${q("logs-entry")}'); s.value = "tool-bash"; s.dispatchEvent(new Event("change")); const l = document.querySelector('${q("logs-level")}'); l.value = "trace"; l.dispatchEvent(new Event("change")); })()`);
  await sleep(800);
  console.log("entries shown for tool-bash:", await evaluate(`[...new Set([...document.querySelectorAll('${q("log-line")}')].map(e => e.dataset.entry))].join(",")`));
  await shot("logs-filtered");

  await click(q("tab-agents"));
  await click(`${q("terminal")} ${q("terminal-open")}`);
  await sleep(800);
  await click(`${q("terminal")} ${q("terminal-attach")}`);
  await waitFor(`!!document.querySelector('${q("attach-confirm")}')`);
  await click(q("attach-confirm-no"));
  await sleep(300);
  await cdp("Input.insertText", { text: "x" });
  console.log("after no:", await evaluate(text(`${q("terminal")} ${q("terminal-attach")}`)));
  await click(`${q("terminal")} ${q("terminal-attach")}`);
  await waitFor(`!!document.querySelector('${q("attach-confirm")}')`);
  await click(q("attach-confirm-yes"));
  await sleep(500);
  await cdp("Input.insertText", { text: "echo typed-here" });
  await cdp("Input.dispatchKeyEvent", { type: "keyDown", key: "Enter", code: "Enter", windowsVirtualKeyCode: 13, text: "\r" });
  await sleep(1200);
  const rows = await evaluate(`document.querySelector('${q("terminal-view")} .xterm-rows').textContent`);
  console.log("terminal shows typed text:", rows.includes("echo typed-here"));
  await shot("terminal-attached");
}
