// Runs the page against mock.mjs in chromium and fails on the first wrong
// outcome: `npm run check` (after `npm run build`). Screenshots go to
// $SHOTS (default a temporary directory).
import { spawn } from "node:child_process";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const here = new URL(".", import.meta.url).pathname;
const shots = process.env.SHOTS || (await mkdtemp(join(tmpdir(), "console-shots-")));

function startMock(extra = []) {
  const m = spawn(process.execPath, [join(here, "mock.mjs"), "--port", "0", ...extra], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error("mock did not start within 10 s")), 10000);
    createInterface({ input: m.stdout }).once("line", (l) => {
      clearTimeout(t);
      resolve({ m, url: l.match(/http:\/\/\S+/)[0] });
    });
  });
}

function run(steps, url, env = {}) {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ["--no-warnings", "--experimental-websocket", join(here, "shoot.mjs"), url, shots], {
      stdio: "inherit",
      env: { ...process.env, STEPS: steps, ...env },
    });
    const t = setTimeout(() => p.kill(), 120000);
    p.on("exit", (code) => {
      clearTimeout(t);
      resolve(code === 0);
    });
  });
}

let ok = true;
for (const [steps, scheme] of [["./steps.mjs", "light"], ["./steps-more.mjs", "dark"]]) {
  const { m, url } = await startMock();
  console.log(`== ${steps} (${scheme}) against ${url}`);
  ok = (await run(steps, url, { SCHEME: scheme, MOCK_PID: String(m.pid) })) && ok;
  m.kill();
}
{
  const { m, url } = await startMock(["--logged-out"]);
  console.log(`== logged out against ${url}`);
  ok = (await run("./steps-loggedout.mjs", url)) && ok;
  m.kill();
}
console.log(`${ok ? "PASS" : "FAIL"}; screenshots in ${shots}`);
process.exit(ok ? 0 : 1);
