// The bare baseline of `make bench`: an MCP server on the official
// TypeScript SDK (McpServer over stdio) with one tool that runs the command
// with bash and returns its output and exit code as text. No cgroup, no
// timeout, no tree kill: what a minimal server costs per call.
//
//   node bare-server.mjs
import { execFile } from "node:child_process";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "bare-bash", version: "1.0.0" });
server.registerTool(
  "bash",
  {
    description: "Runs a command with bash -c.",
    inputSchema: { command: z.string(), description: z.string().optional() },
  },
  ({ command }) =>
    new Promise((resolve) => {
      execFile("bash", ["-c", command], (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
        resolve({
          content: [{ type: "text", text: `${stdout}${stderr}\n[exit code ${code}]` }],
          isError: code !== 0,
        });
      });
    }),
);
await server.connect(new StdioServerTransport());
