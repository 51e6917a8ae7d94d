// The console's HTTP API (see CONSOLE.md). Every non-GET carries the
// session's CSRF token; a 401 anywhere means the login is gone.

const BASE = "/console/api";
let csrf = "";
let onUnauthorized = () => {};

// ApiError carries the server's own sentence ({"error": "..."}) when it gave one.
export class ApiError extends Error {
  constructor(message, status, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

export function whenUnauthorized(f) {
  onUnauthorized = f;
}

async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-Dsh-Csrf"] = csrf;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res;
  try {
    res = await fetch(BASE + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      cache: "no-store",
    });
  } catch (e) {
    throw new ApiError(`cannot reach the host (${e.message})`, 0, null);
  }
  let data = null;
  const text = await res.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (res.status === 401) {
    onUnauthorized();
    throw new ApiError((data && data.error) || "login required", 401, data);
  }
  if (!res.ok) {
    // The caller says what failed; the host's sentence says why.
    const why = (data && data.error) || text.trim().slice(0, 300) || `the host answered ${res.status} ${res.statusText}`;
    throw new ApiError(why, res.status, data);
  }
  return data ?? {};
}

const get = (path) => call("GET", path);
const post = (path, body) => call("POST", path, body ?? {});
const seg = encodeURIComponent;

export async function session() {
  const s = await get("/session");
  csrf = s.csrf || "";
  return s;
}

export const api = {
  graph: () => get("/graph"),
  reload: (id) => post(`/entries/${seg(id)}/reload`),
  composition: () => get("/composition"),
  check: (text) => post("/composition/check", { text }),
  apply: (text) => post("/composition/apply", { text }),
  agents: () => get("/agents"),
  cancelCall: (id) => post(`/calls/${seg(id)}/cancel`),
  killJob: (owner, id) => post(`/jobs/${seg(owner)}/${seg(id)}/kill`),
  attach: (owner, id) => post(`/terminals/${seg(owner)}/${seg(id)}/attach`),
  input: (owner, id, attach, data) => post(`/terminals/${seg(owner)}/${seg(id)}/input`, { attach, data }),
  approvals: () => get("/approvals"),
  answer: (id, decision) => post(`/approvals/${seg(id)}`, { decision }),
  logs: (entry, level) => get(`/logs?entry=${seg(entry)}&level=${seg(level)}`),
};

export const urls = {
  events: `${BASE}/events`,
  jobOutput: (owner, id) => `${BASE}/jobs/${seg(owner)}/${seg(id)}/output`,
  terminalStream: (owner, id) => `${BASE}/terminals/${seg(owner)}/${seg(id)}/stream`,
};
