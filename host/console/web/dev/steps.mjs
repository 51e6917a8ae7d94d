// What shoot.mjs does by default: every tab, and the main interactions.
const q = (testid) => `[data-testid="${testid}"]`;

export default async function ({ url, cdp, evaluate, shot, click, waitFor, sleep }) {
  await cdp("Page.navigate", { url });
  await waitFor(`document.querySelectorAll('${q("entry")}').length > 0`);
  await sleep(500);
  await shot("composition");

  // Check with a problem, then click it.
  await evaluate(`(() => { const t = document.querySelector('${q("composition-editor")}'); t.value = t.value.replace("plugins/terminal", "plugins/missing-terminal"); t.dispatchEvent(new Event("input")); })()`);
  await click(q("composition-check"));
  await waitFor(`document.querySelectorAll('${q("composition-problem")}').length > 0`);
  await click(q("composition-problem"));
  console.log("cursor at", await evaluate(`document.querySelector('${q("composition-editor")}').selectionStart`), "result:", await evaluate(`document.querySelector('${q("composition-result")}').textContent`));
  await evaluate(`window.scrollTo(0, document.body.scrollHeight)`);
  await shot("composition-problems");
  await evaluate(`window.scrollTo(0, 0)`);

  await click(q("tab-agents"));
  await waitFor(`document.querySelectorAll('${q("job")}').length > 0`);
  await click(`${q("job")}[data-job="j-1"] ${q("job-open")}`);
  await click(`${q("terminal")} ${q("terminal-open")}`);
  await sleep(2500);
  await shot("agents");
  await click(`${q("terminal")} ${q("terminal-attach")}`);
  await waitFor(`!!document.querySelector('${q("attach-confirm")}')`);
  await shot("attach-confirm");
  await click(q("attach-confirm-yes"));
  await sleep(500);
  await click(`${q("job")}[data-job="j-1"] ${q("job-kill")}`);
  await waitFor(`!!document.querySelector('${q("kill-confirm")}')`);
  await click(q("kill-confirm-yes"));
  await waitFor(`document.querySelector('${q("job")}[data-job="j-1"]').dataset.state === "killed"`);
  await sleep(800);
  await shot("agents-killed");

  await click(q("tab-approvals"));
  await sleep(300);
  await shot("approvals");
  console.log("badge:", await evaluate(`document.querySelector('${q("approvals-count")}').textContent`));

  await click(q("tab-logs"));
  await sleep(2000);
  await shot("logs");
  console.log("log lines:", await evaluate(`document.querySelectorAll('${q("log-line")}').length`));
  console.log("toasts:", await evaluate(`[...document.querySelectorAll('${q("toast")}')].map(t => t.textContent).join(" | ")`));
}
