// Resumable owners through the official TypeScript SDK over streamable
// HTTP, against `dsh serve --http` with clients.owners: resumable. It
// prints one JSON object of what it saw; the Go test
// (host/cmd/dsh/node_resume_test.go) checks it.
//
//   node resume.mjs MARKER URL TOKEN OTHER_TOKEN
//
// The SDK's Client keeps only the capabilities, server info and
// instructions of the initialize result, not its _meta, so the resume
// handle is read off the wire: the transport's fetch option tees the
// response to the initialize request and parses it (JSON or SSE).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [marker, url, token, otherToken] = process.argv.slice(2);
const out = {};

const textOf = (r) => (r?.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

// The JSON-RPC messages in a response body: one JSON object, or the data
// lines of an event stream.
const messagesOf = (contentType, body) => {
  if (contentType.includes("application/json")) return [JSON.parse(body)];
  return body
    .split(/\r?\n\r?\n/)
    .map((ev) => ev.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n"))
    .filter((d) => d !== "")
    .map((d) => JSON.parse(d));
};

// connect opens a session with bearer token tok, presenting resume as the
// Dsh-Resume header when given; it returns the client, its transport and
// the initialize result's _meta as the server sent it.
const connect = async (name, tok, resume) => {
  const headers = { Authorization: `Bearer ${tok}` };
  if (resume) headers["Dsh-Resume"] = resume;
  let initMeta;
  const seen = [];
  const fetchInit = async (input, init) => {
    const res = await fetch(input, init);
    let isInit = false;
    try {
      isInit = init?.method === "POST" && JSON.parse(init.body)?.method === "initialize";
    } catch {}
    if (!isInit || !res.ok) return res;
    const body = await res.clone().text();
    for (const m of messagesOf(res.headers.get("content-type") ?? "", body)) {
      seen.push(m);
      if (m.result?.serverInfo) initMeta = m.result._meta ?? null;
    }
    return res;
  };
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers }, fetch: fetchInit });
  const client = new Client({ name, version: "1.0.0" });
  await client.connect(transport);
  if (initMeta === undefined) throw new Error(`no initialize result seen: ${JSON.stringify(seen)}`);
  return { client, transport, meta: initMeta };
};

const call = async (client, name, args) => {
  const r = await client.callTool({ name, arguments: args });
  return { text: textOf(r), isError: r.isError ?? false, structured: r.structuredContent ?? null };
};

// The session ends for the server: DELETE, then the transport closes.
const end = async ({ client, transport }) => {
  await transport.terminateSession();
  await client.close();
};

// First session: a resume handle, and a background job.
const first = await connect("dsh-node-resume", token);
out.first = { sessionId: first.transport.sessionId ?? null, meta: first.meta };
const handle = first.meta?.["dev.dsh/resume"];
const started = await call(first.client, "bash", { command: `sleep ${marker}`, description: "node resume test", run_in_background: true });
out.started = started;
const jobId = started.structured?.jobId;
out.jobId = jobId ?? null;
await end(first);
out.firstEnded = first.transport.sessionId === undefined;
// The server forgot the session: a request on it is refused.
const stale = await fetch(url, {
  method: "POST",
  headers: {
    Authorization: `Bearer ${token}`,
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    "Mcp-Session-Id": out.first.sessionId,
    "Mcp-Protocol-Version": first.transport.protocolVersion,
  },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
});
await stale.body?.cancel();
out.staleStatus = stale.status;

// Past the release grace: a resumable owner waits resumeWithin instead.
await sleep(1000);

// A new session presenting the handle gets the owner back, job and all.
const back = await connect("dsh-node-resume", token, handle);
out.back = { sessionId: back.transport.sessionId ?? null, meta: back.meta };
out.back.jobOutput = await call(back.client, "job_output", { job_id: jobId });
out.back.jobList = await call(back.client, "job_list", {});
await end(back);

// A client without the handle starts afresh.
const fresh = await connect("dsh-node-fresh", token);
out.fresh = { meta: fresh.meta, jobList: await call(fresh.client, "job_list", {}) };
await end(fresh);

// Another principal presenting the handle starts afresh too.
const other = await connect("dsh-node-other", otherToken, handle);
out.other = { meta: other.meta, jobList: await call(other.client, "job_list", {}) };
out.other.jobOutput = await call(other.client, "job_output", { job_id: jobId });
await end(other);

process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
