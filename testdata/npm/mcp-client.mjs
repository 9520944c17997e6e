// An MCP client written with the official TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in package-lock.json) that drives a
// real opsgate server: core/mcp's TestTypeScriptClient runs it. It checks
// the tool list, calls each tool, does an agent task end to end, answers a
// question through an elicitation form, and sees an approval refused.
// Each check prints one line; any failure exits 1.
//
// Environment: OPSGATE_MCP_URL (the /mcp endpoint), OPSGATE_TOKEN (an
// agent token), OPSGATE_QUESTION_RUN and OPSGATE_QUESTION_ID (a run waiting
// on a question), OPSGATE_APPROVAL_RUN and OPSGATE_APPROVAL_ID (a run
// waiting on an approval).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

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

let elicited = 0;
const client = new Client({ name: "opsgate-ts-test", version: "1.0.0" }, { capabilities: { elicitation: { form: {} } } });
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  elicited++;
  const props = req.params.requestedSchema?.properties ?? {};
  const content = {};
  for (const [k, s] of Object.entries(props)) content[k] = s.type === "boolean" ? true : (s.enum ? s.enum[0] : "from the form");
  return { action: "accept", content };
});
const transport = new StreamableHTTPClientTransport(new URL(env("OPSGATE_MCP_URL")), {
  requestInit: { headers: { Authorization: `Bearer ${env("OPSGATE_TOKEN")}` } },
});
await client.connect(transport);
check("session has an id", !!transport.sessionId, transport.sessionId);

// The SDK validates every structuredContent against the tool's declared
// outputSchema inside callTool (a mismatch throws "Structured content does
// not match the tool's output schema", as Claude Code reports it): each
// tool and each run status seen here passed that check.
const validated = new Set();
const runStates = new Set();
const call = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  validated.add(name);
  const sc = r.structuredContent ?? {};
  for (const run of [sc.run, ...(sc.runs ?? [])]) if (run?.status) runStates.add(run.status);
  const text = r.content?.[0]?.text;
  const same = text !== undefined && JSON.stringify(JSON.parse(text)) === JSON.stringify(r.structuredContent);
  if (!same) check(`${name}: text is the structured JSON`, false, r);
  return r;
};
const ok = async (name, args) => {
  const r = await call(name, args);
  check(`${name}`, !r.isError, r.structuredContent);
  return r.structuredContent;
};
const refused = async (code, name, args) => {
  const r = await call(name, args);
  check(`${name} refused ${code}`, r.isError === true && r.structuredContent?.error?.code === code, r.structuredContent);
  return r.structuredContent;
};
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
async function waitRun(runId, statuses) {
  for (let i = 0; i < 300; i++) {
    const r = (await call("get_run", { runId })).structuredContent.run;
    if (statuses.includes(r.status)) return r;
    await sleep(50);
  }
  throw new Error(`run ${runId} never reached ${statuses}`);
}

// The tool list.
const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
const want = ["answer_ask", "call_agent_tool", "cancel_run", "claim_agent_call", "complete_agent_call", "fail_agent_call", "flow",
  "get_agent_call", "get_artifact", "get_record", "get_run", "interact", "list_artifacts", "list_runs", "list_workflows",
  "read_agent_asset", "status"];
check("tool list", JSON.stringify(names) === JSON.stringify(want), names);
check("every tool has an output schema", tools.every((t) => t.outputSchema?.type === "object"), tools.filter((t) => !t.outputSchema));

// Each workflow and result tool.
const service = (await ok("status", {})).service;
check("status names the endpoint", service?.endpoint === "/mcp" && service?.readsAll === false, service);
const workflows = (await ok("list_workflows", {})).workflows;
check("workflows", workflows.some((w) => w.name === "triage"), workflows);
const st = (await ok("flow", { flowName: "status", intent: "ts" })).run;
await waitRun(st.id, ["succeeded"]);
await ok("list_runs", { flowName: "status" });
const art = (await ok("get_artifact", { artifactId: `${st.id}/status` })).artifact;
check("artifact content", art?.content === "api is green", art);
check("missing artifact is null", (await ok("get_artifact", { artifactId: "nope/none" })).artifact === null);
await ok("list_artifacts", { flowName: "status", limit: 5 });
// An agent token without scopes reads only its own runs: no audit log.
await refused("forbidden", "get_record", { recordId: "999999999" });
await refused("invalid_input", "get_run", { runId: 7 });
await refused("not_found", "flow", { flowName: "nope", intent: "x" });

// The agent-task round trip.
const tri = (await ok("flow", { flowName: "triage", intent: "ts-svc" })).run;
const waiting = await waitRun(tri.id, ["waiting_input"]);
const callId = waiting.pendingAgentCall?.id;
check("pendingAgentCall", !!callId && waiting.pending_actions.some((a) => a.kind === "agent_call" && a.id === callId), waiting);
await ok("get_agent_call", { runId: tri.id, callId });
const claim = await ok("claim_agent_call", { runId: tri.id, callId, claimId: "ts-claim" });
const ownerToken = claim.ownerToken;
const ref = { runId: tri.id, callId, ownerToken };
const out = (await ok("call_agent_tool", { ...ref, toolCallId: "ts-1", toolId: "status", input: { service: "ts-svc" } })).output;
check("agent tool output", out?.status === "succeeded" && out?.output === "api is green", out);
const asset = (await ok("read_agent_asset", { ...ref, assetId: "context" })).asset;
check("agent asset", asset?.content === "service=ts-svc" && asset?.encoding === "utf-8", asset);
await refused("invalid_result", "complete_agent_call", { ...ref, result: { nope: 1 } });
const after = (await ok("complete_agent_call", { ...ref, result: { summary: "from TypeScript" } })).run;
check("complete returns the run", after?.id === tri.id, after);
const done = await waitRun(tri.id, ["succeeded"]);
check("the agent's result is the step's output", done.steps[0].output === '{"summary":"from TypeScript"}', done.steps);

// A second task, failed.
const tri2 = (await ok("flow", { flowName: "triage", intent: "ts-fail" })).run;
const w2 = await waitRun(tri2.id, ["waiting_input"]);
const c2 = await ok("claim_agent_call", { runId: tri2.id, callId: w2.pendingAgentCall.id, claimId: "ts-claim-2" });
await ok("fail_agent_call", { runId: tri2.id, callId: w2.pendingAgentCall.id, ownerToken: c2.ownerToken, message: "cannot" });
await waitRun(tri2.id, ["failed"]);

// An elicitation round trip (the form is answered by the handler above).
const qRun = env("OPSGATE_QUESTION_RUN");
check("a run waiting on a question", (await ok("get_run", { runId: qRun })).run?.pending_actions?.some((a) => a.kind === "question"));
const inter = await ok("interact", { runId: qRun, actionId: env("OPSGATE_QUESTION_ID") });
check("interact elicited", elicited === 1 && inter.interaction?.mode === "elicitation" && inter.interaction?.outcome === "accept", { elicited, inter });

// The approval refusal: visible, never answerable.
const aRun = env("OPSGATE_APPROVAL_RUN");
const aID = env("OPSGATE_APPROVAL_ID");
const r = (await ok("get_run", { runId: aRun })).run;
check("approval visible", r.pending_actions.some((a) => a.kind === "approval" && a.id === aID && a.answerable === false), r.pending_actions);
const ref1 = await refused("human_confirmation_required", "interact", { runId: aRun, actionId: aID });
check("refusal links the card", ref1.error?.link?.endsWith(`/approvals/${aID}`), ref1);
await refused("human_confirmation_required", "answer_ask", { runId: aRun, actionId: aID, answer: { isConfirmed: true } });
await ok("cancel_run", { runId: aRun });
await waitRun(aRun, ["cancelled"]);
await ok("list_runs", {});
await ok("get_agent_call", { runId: tri.id, callId });
await refused("not_found", "get_run", { runId: "no-such-run" });

// Every tool's result, and a run in every state a client meets, passed the
// SDK's output-schema validation.
check("every tool validated", names.every((n) => validated.has(n)), names.filter((n) => !validated.has(n)));
const states = ["queued", "running", "waiting_approval", "waiting_input", "succeeded", "failed", "cancelled"];
check("runs validated in every state", ["waiting_approval", "waiting_input", "succeeded", "failed", "cancelled"].every((s) => runStates.has(s)),
  [...runStates]);
console.log(`validated: ${[...validated].sort().join(" ")}; run states: ${states.filter((s) => runStates.has(s)).join(" ")}`);

await client.close();
console.log(`${failures === 0 ? "PASS" : "FAIL"} (${failures} failed)`);
process.exit(failures === 0 ? 0 : 1);
