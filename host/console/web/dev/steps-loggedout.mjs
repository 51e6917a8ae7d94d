// Without a session, the page shows login-required and stops.
const q = (testid) => `[data-testid="${testid}"]`;
export default async function ({ url, cdp, evaluate, shot, waitFor, expect }) {
  await cdp("Page.navigate", { url });
  await waitFor(`!!document.querySelector('${q("login-required")}')`);
  expect((await evaluate(`document.querySelector('${q("connection")}').textContent`)) === "logged out", "a 401 shows login-required");
  await shot("logged-out");
}
