// MCP tasks (2025-11-25) through the official TypeScript SDK's own
// experimental tasks API, against `dsh serve` over stdio or streamable
// HTTP. It prints one JSON object of what it saw; the Go test
// (host/cmd/dsh/node_tasks_test.go) checks it.
//
//   node tasks.mjs stdio MARKER DSH ARGS...
//   node tasks.mjs http  MARKER URL TOKEN
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, marker, ...rest] = process.argv.slice(2);
const out = { mode };

const transportFor = () =>
  mode === "stdio"
    ? new StdioClientTransport({ command: rest[0], args: rest.slice(1), env: process.env, stderr: "ignore" })
    : new StreamableHTTPClientTransport(new URL(rest[0]), {
        requestInit: { headers: { Authorization: `Bearer ${rest[1]}` } },
      });

const textOf = (r) => (r?.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
const bashArgs = (command) => ({ name: "bash", arguments: { command, description: "node tasks test" } });

// A client that declares tasks.
const client = new Client({ name: "dsh-node-tasks", version: "1.0.0" }, { capabilities: { tasks: { list: {}, cancel: {} } } });
await client.connect(transportFor());
out.serverTasks = client.getServerCapabilities()?.tasks ?? null;
const tools = await client.listTools();
out.taskSupport = Object.fromEntries(tools.tools.map((t) => [t.name, t.execution?.taskSupport ?? null]));

// A task that runs to its end: created, polled, its result fetched.
const run = { messages: [], statuses: [] };
for await (const m of client.experimental.tasks.callToolStream(bashArgs("sleep 1; echo done"))) {
  run.messages.push(m.type);
  if (m.type === "taskCreated") run.taskId = m.task.taskId;
  if (m.type === "taskStatus") run.statuses.push(m.task.status);
  if (m.type === "result") run.text = textOf(m.result);
  if (m.type === "error") run.error = String(m.error?.message ?? m.error);
}
out.run = run;

// A background command as a task: it works until the job ends, and its
// result is the job's output.
const background = { messages: [], statuses: [] };
const bgArgs = { name: "bash", arguments: { command: "for i in 1 2 3; do echo bg$i; sleep 0.4; done", description: "node tasks test", run_in_background: true } };
for await (const m of client.experimental.tasks.callToolStream(bgArgs)) {
  background.messages.push(m.type);
  if (m.type === "taskCreated") background.taskId = m.task.taskId;
  if (m.type === "taskStatus") background.statuses.push(m.task.status);
  if (m.type === "result") {
    background.text = textOf(m.result);
    background.status = m.result.structuredContent?.status ?? null;
  }
  if (m.type === "error") background.error = String(m.error?.message ?? m.error);
}
out.background = background;

// A task cancelled while its command runs: the Go test checks the
// command is gone.
const cancel = { messages: [], statuses: [] };
for await (const m of client.experimental.tasks.callToolStream(bashArgs(`sleep ${marker}`))) {
  cancel.messages.push(m.type);
  if (m.type === "taskCreated") {
    cancel.taskId = m.task.taskId;
    await sleep(700); // the command starts
    const c = await client.experimental.tasks.cancelTask(m.task.taskId);
    cancel.cancelStatus = c.status;
  }
  if (m.type === "taskStatus") cancel.statuses.push(m.task.status);
  if (m.type === "error") cancel.error = String(m.error?.message ?? m.error);
}
out.cancel = cancel;

const list = await client.experimental.tasks.listTasks();
out.list = list.tasks.map((t) => ({ taskId: t.taskId, status: t.status }));

// Another session does not know this one's tasks.
const other = new Client({ name: "dsh-node-tasks-other", version: "1.0.0" }, { capabilities: { tasks: { list: {}, cancel: {} } } });
await other.connect(transportFor());
try {
  const t = await other.experimental.tasks.getTask(run.taskId);
  out.otherGet = `found: ${t.status}`;
} catch (e) {
  out.otherGet = String(e.message);
}
out.otherList = (await other.experimental.tasks.listTasks()).tasks.length;
await other.close();

// A client that does not declare tasks is offered none, and its calls are
// plain calls.
const plain = new Client({ name: "dsh-node-plain", version: "1.0.0" });
await plain.connect(transportFor());
out.plainTasks = plain.getServerCapabilities()?.tasks ?? null;
const plainTools = await plain.listTools();
out.plainTaskSupport = plainTools.tools.filter((t) => t.execution).length;
out.plainText = textOf(await plain.callTool(bashArgs("echo plain")));
await plain.close();

await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
