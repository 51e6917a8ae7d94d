// An independent MCP client: the official TypeScript SDK, driven against
// `dsh serve` over stdio or streamable HTTP. It prints one JSON object of
// what it saw; the Go test (host/cmd/dsh/node_test.go) checks it.
//
//   node client.mjs stdio MARKER DSH ARGS...
//   node client.mjs http  MARKER URL TOKEN
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, marker, ...rest] = process.argv.slice(2);
const out = { mode };

let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({ command: rest[0], args: rest.slice(1), env: process.env, stderr: "ignore" });
} else {
  transport = new StreamableHTTPClientTransport(new URL(rest[0]), {
    requestInit: { headers: { Authorization: `Bearer ${rest[1]}` } },
  });
}
const client = new Client({ name: "dsh-node-test", version: "1.0.0" });
await client.connect(transport);
out.protocolVersion = transport.protocolVersion ?? null;
out.sessionId = transport.sessionId ?? null;

const tools = await client.listTools();
out.tools = tools.tools.map((t) => t.name).sort();

const textOf = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("");
const bash = (args, opts) => client.callTool({ name: "bash", arguments: { description: "node test", ...args } }, undefined, opts);

const r3 = await bash({ command: "echo hi; exit 3" });
out.exit3 = { text: textOf(r3), isError: r3.isError ?? false, exitCode: r3.structuredContent?.exitCode };

// A background job, read to completion.
const started = await bash({ command: "for i in 1 2 3 4 5; do echo n$i; sleep 0.1; done", run_in_background: true });
const jobId = started.structuredContent.jobId;
let all = "";
for (let i = 0; i < 100; i++) {
  const r = await client.callTool({ name: "job_output", arguments: { job_id: jobId } });
  const t = textOf(r);
  all += t + "\n";
  if (t.includes("finished]")) break;
  await new Promise((res) => setTimeout(res, 100));
}
out.job = { id: jobId, output: all };

// A cancelled call: the command must be gone afterwards (the Go test looks).
const ac = new AbortController();
const pending = bash({ command: `sleep ${marker}` }, { signal: ac.signal, timeout: 60000 });
await new Promise((res) => setTimeout(res, 500));
ac.abort();
try {
  await pending;
  out.cancelled = "completed";
} catch (e) {
  out.cancelled = "aborted";
}

// A spill file, read as a resource.
const big = await bash({ command: "seq 1 30000" });
const link = big.content.find((c) => c.type === "resource_link");
out.spillLink = link?.uri ?? null;
if (link) {
  const rr = await client.readResource({ uri: link.uri });
  const t = rr.contents[0].text ?? "";
  out.spill = { bytes: t.length, first: t.slice(0, 4), last: t.slice(-6) };
}

// An empty spill file, read as a resource: a valid, empty text content.
const spillDir = big.structuredContent?.stdout?.spillPath?.replace(/\/[^/]*$/, "");
if (link && spillDir) {
  await bash({ command: `: > '${spillDir}/empty.stdout'` });
  try {
    const rr = await client.readResource({ uri: link.uri.replace(/[^/]*$/, "empty.stdout") });
    out.emptySpill = { text: rr.contents[0].text ?? null, blob: rr.contents[0].blob ?? null };
  } catch (e) {
    out.emptySpill = { error: String(e) };
  }
}

await client.close();
console.log(JSON.stringify(out));
