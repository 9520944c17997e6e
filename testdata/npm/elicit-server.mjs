// An upstream MCP server written with the official TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in package-lock.json) that asks its
// client while a tool runs: cmd/opsgate's TestTypeScriptUpstreamElicits
// runs it over stdio behind opsgate. Its tool "deploy" reports progress
// (when the call carries a progressToken), then asks with
// elicitation/create for an environment and a replica count — the SDK
// validates the answer against the requested schema — and answers with
// what it got: "<action> <content as JSON>".
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "ts-elicit", version: "1.0.0" });

server.registerTool(
  "deploy",
  {
    description: "Deploy a service; asks where.",
    inputSchema: { service: z.string() },
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
  },
  async ({ service }, extra) => {
    const progressToken = extra._meta?.progressToken;
    if (progressToken !== undefined) {
      await extra.sendNotification({ method: "notifications/progress", params: { progressToken, progress: 1, total: 2, message: "asking where" } });
    }
    const res = await server.server.elicitInput(
      {
        mode: "form",
        message: `Deploy ${service}: where to?`,
        requestedSchema: {
          type: "object",
          properties: {
            env: { type: "string", title: "Environment", enum: ["staging", "prod"] },
            replicas: { type: "integer", title: "Replicas", minimum: 1, maximum: 9 },
          },
          required: ["env", "replicas"],
        },
      },
      // A person answers: wait as long as opsgate's call may.
      { timeout: 10 * 60 * 1000 },
    );
    return { content: [{ type: "text", text: `${res.action} ${JSON.stringify(res.content ?? null)}` }] };
  },
);

await server.connect(new StdioServerTransport());
