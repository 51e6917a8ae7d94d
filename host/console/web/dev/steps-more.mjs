// Apply, errors and reconnection against mock.mjs. Run with
// STEPS=./steps-more.mjs; MOCK_PID names the mock to stop and start again.
import { spawn } from "node:child_process";
const q = (testid) => `[data-testid="${testid}"]`;
const text = (sel) => `document.querySelector('${sel}')?.textContent`;

export default async function ({ url, cdp, evaluate, shot, click, waitFor, sleep, expect }) {
  await cdp("Page.navigate", { url });
  await waitFor(`document.querySelectorAll('${q("entry")}').length > 0`);
  await waitFor(`document.querySelector('${q("composition-editor")}').value.includes("entries:")`);
  const setText = (f) => evaluate(`(() => { const t = document.querySelector('${q("composition-editor")}'); t.value = (${f})(t.value); t.dispatchEvent(new Event("input")); })()`);

  await setText(`(v) => v.replace("plugins/shell-env", "plugins/missing-env")`);
  await click(q("composition-apply"));
  await waitFor(`/Not applied/.test(${text(q("composition-result"))})`);
  expect((await evaluate(text(q("composition-problem")))).startsWith("/etc/dsh/composition.yaml:4: "), "apply with a problem: not applied, the problem at line 4");
  await setText(`(v) => v.replace("plugins/missing-env", "plugins/shell-env")`);
  await click(q("composition-apply"));
  await waitFor(`${text(q("composition-result"))} === "Applied."`);
  expect((await evaluate(`document.querySelectorAll('${q("composition-problem")}').length`)) === 0, "a clean apply: Applied., no problems left");

  // An action the host refuses: its sentence in a toast.
  await click(`${q("entry")}[data-entry="kube"] ${q("entry-reload")}`);
  await waitFor(`[...document.querySelectorAll('${q("toast")}')].some(t => /kube is disabled/.test(t.textContent))`);
  expect(true, "a refused reload shows the host's error in a toast");
  await shot("toast");

  // A job output stream that cannot be opened stops and says so.
  await click(q("tab-agents"));
  await click(`${q("job")}[data-job="j-gone"] ${q("job-open")}`);
  await waitFor(`/cannot open/.test(${text(q("job-output-status"))})`, 30000);
  expect(true, "a job output that cannot be opened gives up and says so");

  // The live stream drops: reconnecting, then live again when the host is back.
  if (process.env.MOCK_PID) {
    const [node, script, port] = [process.execPath, new URL("./mock.mjs", import.meta.url).pathname, new URL(url).port];
    process.kill(Number(process.env.MOCK_PID));
    await waitFor(`${text(q("connection"))} === "reconnecting"`);
    expect(true, "connection shows reconnecting when the stream drops");
    await shot("reconnecting");
    const m = spawn(node, [script, "--port", port], { stdio: "ignore" });
    try {
      await waitFor(`${text(q("connection"))} === "live"`, 20000);
      expect(true, "connection is live again once the host is back");
    } finally {
      m.kill();
    }
  }
}
