// The MCP Tasks extension (io.modelcontextprotocol/tasks) against a real
// opsgate server, driven by the official TypeScript SDK at protocol
// 2026-07-28 (@modelcontextprotocol/client) and the official Tasks
// requester (@modelcontextprotocol/ext-tasks), both pinned in
// package-lock.json: core/mcp's TestTypeScriptTasks runs it. It creates a
// task (flow waiting for an approval), hands it off, resumes it on another
// server over the same store (a restart, another replica) and polls it to
// its end; then, as the approver, gets the approval's console page as a
// URL elicitation. Each check prints one line; any failure exits 1.
//
// Protocol: it prints "TASK <id>" when a task exists, "RESUMED <id>" when
// the Go side should approve that task's run and "URL <url>" when the
// approver was offered an approval's console page, where the Go side then
// decides as that person would (the requester may reject their own call,
// not approve it); the script never decides anything itself.
//
// Environment: OPSGATE_MCP_URL and OPSGATE_MCP_URL_B (two servers over one
// store), OPSGATE_TOKEN (an agent token), OPSGATE_APPROVER_TOKEN (the
// token of the person who may approve deploy).
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};

let failures = 0;
function check(name, ok, detail) {
  console.log(`${ok ? "ok" : "FAIL"} ${name}${ok ? "" : ": " + JSON.stringify(detail)}`);
  if (!ok) failures++;
}

// canonical is JSON with object keys sorted: equal values, equal strings.
const canonical = (v) =>
  JSON.stringify(v, (_, x) => (x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x));

const PROTOCOL = "2026-07-28";
const TASKS = "io.modelcontextprotocol/tasks";
const capabilities = { elicitation: { form: {}, url: {} }, extensions: { [TASKS]: {} } };

// rawDispatch carries the requests the SDK's codecs do not (tasks/*, a
// CreateTaskResult) over Streamable HTTP with the 2026-07-28 headers.
let nextId = 1;
function rawDispatch(url, token) {
  return async (req) => {
    const request = { jsonrpc: "2.0", id: req.id ?? `raw-${nextId++}`, ...req };
    const p = request.params ?? {};
    const headers = {
      Authorization: `Bearer ${token}`,
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": PROTOCOL,
      "Mcp-Method": request.method,
    };
    const name = request.method === "tools/call" ? p.name : p.taskId;
    if (name) headers["Mcp-Name"] = name;
    const res = await fetch(url, { method: "POST", headers, body: JSON.stringify(request) });
    const text = await res.text();
    if (process.env.OPSGATE_TRACE) console.error(`>> ${JSON.stringify(request).slice(0, 300)}\n<< ${res.status} ${text.slice(0, 600)}`);
    try {
      return JSON.parse(text);
    } catch {
      throw new Error(`${request.method}: HTTP ${res.status}: ${text.slice(0, 300)} (sent ${JSON.stringify(request).slice(0, 500)})`);
    }
  };
}

async function open(url, token, onInputRequest) {
  const client = new Client({ name: "opsgate-ts-tasks", version: "1.0.0" }, { capabilities, versionNegotiation: { mode: { pin: PROTOCOL } } });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  const session = createTaskSessionFromClient(client, {
    endpointId: "opsgate-test",
    rawDispatch: rawDispatch(url, token),
    v2RequestFraming: { protocolVersion: PROTOCOL, clientInfo: { name: "opsgate-ts-tasks", version: "1.0.0" }, clientCapabilities: capabilities },
    onInputRequest,
  });
  return { client, session };
}

// 1. A task is created, handed off, resumed on another server, settled.
const a = await open(env("OPSGATE_MCP_URL"), env("OPSGATE_TOKEN"));
check("server/discover negotiated 2026-07-28", a.client.getProtocolEra() === "modern", a.client.getProtocolEra());
const exec = await a.session.callTool("flow", { flowName: "deploy", intent: "ts-task 1.0" });
check("flow waiting for an approval is a task", exec.kind === "task", exec.kind);
const taskId = exec.handle?.taskId;
console.log(`TASK ${taskId}`);
let ref;
await exec.handoff((r) => {
  ref = r;
});
check("the reference is serializable", ref && ref.taskId === taskId && JSON.parse(JSON.stringify(ref)).taskId === taskId, ref);
// The first client goes away as a crashed or restarted host would (a
// session's close() would cancel what it started).
await a.client.close();

const b = await open(env("OPSGATE_MCP_URL_B"), env("OPSGATE_TOKEN"));
const resumed = await b.session.resumeTask(JSON.parse(JSON.stringify(ref)));
check("resumed on another server", resumed.kind === "task" && resumed.handle.taskId === taskId, resumed.kind);
const seen = [];
const watch = (async () => {
  for await (const ev of resumed.updates()) seen.push(ev);
})().catch(() => {});
console.log(`RESUMED ${taskId}`);
const { outcome } = await resumed.settle();
await watch;
const result = resultFromTaskOutcome(outcome);
const run = result?.structuredContent?.run;
check("the task completed with the run's end", run?.status === "succeeded" && run?.flow === "deploy", result);
check("the text is the structured JSON", canonical(JSON.parse(result.content[0].text)) === canonical(result.structuredContent), { text: result.content, structured: result.structuredContent });
await b.session.close();
await b.client.close();

// 2. The approver's client gets the approval's console page as a URL
// elicitation; the person decides there (the Go side plays the console).
const asked = [];
const c = await open(env("OPSGATE_MCP_URL"), env("OPSGATE_APPROVER_TOKEN"), async (request) => {
  asked.push(request);
  const params = request.params ?? request.request?.params ?? request;
  if (params.mode === "url") console.log(`URL ${params.url}`);
  return { action: "accept" };
});
const exec2 = await c.session.callTool("flow", { flowName: "deploy", intent: "ts-url 1.0" });
check("flow for the approver is a task", exec2.kind === "task", exec2.kind);
const done = await exec2.settle();
const r2 = resultFromTaskOutcome(done.outcome);
check("the approver's task completed with the person's rejection", r2?.structuredContent?.run?.status === "rejected", r2);
const urls = asked.map((q) => q.params ?? q.request?.params ?? q).filter((p) => p.mode === "url");
check("the approval came as a URL elicitation of its console page", urls.length >= 1 && /\/approvals\/[^/]+$/.test(urls[0].url), asked);
await c.session.close();
await c.client.close();

console.log(`${failures === 0 ? "PASS" : "FAIL"} (${failures} failed)`);
process.exit(failures === 0 ? 0 : 1);
