// The TypeScript-client rows of `make bench`: one node process holds an
// official-SDK client (stdio) to every server in the spec and calls them
// round-robin, with a direct execFile of bash from this process as the
// floor, so every server sees the same machine. Prints one JSON line:
// {"servers": {name: {"nanos": [...]} | {"error": "..."}}, "direct": [...]}.
//
//   node bench.mjs N SPEC.json
//
// SPEC.json: [{name, command, args, env, tool, arguments, maxCalls}]; a
// server with maxCalls below N (a slow one) is called that often, spread
// over the N rounds.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const n = Number(process.argv[2]);
const spec = JSON.parse(readFileSync(process.argv[3], "utf8"));
const warmup = 10;
const out = { servers: {}, direct: [] };

const live = [];
for (const s of spec) {
  const client = new Client({ name: "dsh-bench", version: "1.0.0" });
  try {
    const transport = new StdioClientTransport({
      command: s.command,
      args: s.args ?? [],
      env: s.env ?? process.env,
      stderr: "ignore",
    });
    await client.connect(transport, { timeout: 60000 });
    const call = async () => {
      const r = await client.callTool({ name: s.tool, arguments: s.arguments }, undefined, { timeout: 60000 });
      if (r.isError) throw new Error(`${s.tool} answered isError: ${JSON.stringify(r.content)}`);
    };
    for (let i = 0; i < warmup; i++) await call();
    live.push({ s, client, call, max: Math.min(n, s.maxCalls ?? n), nanos: [] });
  } catch (e) {
    out.servers[s.name] = { error: String(e?.message ?? e) };
    await client.close().catch(() => {});
  }
}

const direct = () =>
  new Promise((resolve, reject) => execFile("bash", ["-c", "true"], (err) => (err ? reject(err) : resolve())));
const timed = async (f) => {
  const t = process.hrtime.bigint();
  await f();
  return Number(process.hrtime.bigint() - t);
};

for (let i = 0; i < n; i++) {
  out.direct.push(await timed(direct));
  for (const l of live) {
    // A capped server's calls are spread over the whole run.
    if (l.error || Math.floor(((i + 1) * l.max) / n) === Math.floor((i * l.max) / n)) continue;
    try {
      l.nanos.push(await timed(l.call));
    } catch (e) {
      l.error = String(e?.message ?? e);
    }
  }
}

for (const l of live) {
  out.servers[l.s.name] = l.error ? { error: l.error, nanos: l.nanos } : { nanos: l.nanos };
  await l.client.close().catch(() => {});
}
console.log(JSON.stringify(out));
// A server that ignores the close must not keep this process waiting.
process.exit(0);
