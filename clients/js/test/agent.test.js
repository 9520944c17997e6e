// The client and both examples against a real opsgate server (the binary
// in $OPSGATE_BIN) whose agent talks to a scripted fake model.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { AgentClient, OpsgateError, Events } from "../src/index.js";
import { runWithApprovals, cardView } from "../examples/approval-card.js";
import { runAnswering } from "../examples/answer-questions.mjs";
import { startFakeModel } from "./fakemodel.js";
import { startOpsgate } from "./server.js";

const TOKEN = "js-app-token";
let model, og, client;

before(async () => {
  model = await startFakeModel();
  og = await startOpsgate(`
api:
  tokens:
    - {name: app, token: ${TOKEN}, actor: "console:alice", scopes: [read, request, decide, session.run], agent_concurrency: 1}
    - {name: reader, token: reader-token, actor: "api:reader", scopes: [read]}
approvers:
  groups:
    sre: ["console:alice"]
models:
  - {name: default, provider: openai, base_url: "${model.url}", model: test-model, timeout: 20s}
agents:
  - {name: ops, model: default, tools: [note, restart], max_steps: 5, default: true}
tools:
  - name: note
    risk: read
    exec: {command: [echo, noted]}
  - name: restart
    risk: reversible
    exec: {command: [echo, restarted]}
policy:
  rules:
    - {match: {tool: note}, action: allow}
    - {match: {tool: restart}, action: ask, approvers: ["group:sre"], allow_self_approval: true}
`);
  client = new AgentClient({ baseUrl: og.baseUrl, token: TOKEN });
});

after(async () => {
  await og?.stop();
  await model?.close();
});

test("a turn streams its events in order, turn.finished last", async () => {
  model.push({ calls: [{ name: "note", args: '{"reason":"to note it"}' }] }, { text: ["Noted ", "it."] });
  const seen = [];
  const res = await client.run({ text: "note this" }, (ev) => seen.push(ev.type));
  assert.equal(res.status, "finished");
  assert.equal(res.text, "Noted it.");
  assert.equal(seen[0], Events.RunQueued);
  assert.equal(seen.at(-1), Events.TurnFinished);
  for (const name of [Events.TurnStarted, Events.ToolStarted, Events.ToolFinished, Events.MessageCommitted]) {
    assert.ok(seen.includes(name), `${name} in ${seen}`);
  }
  // Without a stream: the result; the session keeps both turns.
  model.push({ text: "Still here." });
  const again = await client.run({ text: "there?", sessionId: res.sessionId });
  assert.equal(again.text, "Still here.");
  const ses = await client.session(res.sessionId);
  assert.equal(ses.turns.length, 2);
  assert.equal(ses.sessionId, res.sessionId);
  assert.match(ses.consoleUrl, new RegExp(`/runs/${again.turnId}$`));
  // The design's names only: no snake_case in results.
  for (const obj of [res, again, ses]) {
    for (const k of ["session_id", "turn_id", "pending_question", "created_at"]) assert.ok(!(k in obj), `${k} in ${JSON.stringify(obj)}`);
  }
  assert.equal(seen.filter((n) => n === Events.TurnStarted).length, 1, `one turn.started in ${seen}`);
  const firstDelta = seen.indexOf(Events.TextDelta);
  assert.ok(firstDelta === -1 || firstDelta > seen.indexOf(Events.TurnStarted), `text.delta before turn.started in ${seen}`);
  assert.equal((await client.models()).items[0].name, "default");
});

test("the approval-card example replies allowOnce and the call runs", async () => {
  model.push({ calls: [{ name: "restart", args: '{"reason":"you asked"}' }] }, { text: "Restarted." });
  const cards = [];
  const res = await runWithApprovals(client, { text: "restart api" }, {
    decide: (card) => {
      cards.push(card);
      return "allowOnce";
    },
  });
  assert.equal(cards.length, 1);
  assert.equal(cards[0].title, "restart wants to run");
  assert.equal(cards[0].reason, "you asked");
  assert.deepEqual(cards[0].actions.map((a) => a.decision), ["allowOnce", "deny"]);
  assert.equal(res.status, "finished");
  assert.equal(res.text, "Restarted.");
  const last = model.requests.at(-1);
  assert.match(JSON.stringify(last.messages), /restarted/);
});

test("turn.started comes once, also around an approval's wait", async () => {
  model.push({ calls: [{ name: "restart", args: '{"reason":"around a wait"}' }] }, { text: ["Re", "started."] });
  const seen = [];
  const res = await client.run({ text: "restart api" }, async (ev) => {
    seen.push(ev.type);
    if (ev.type === Events.PermissionRequested) {
      await client.reply({ sessionId: ev.data.sessionId, requestId: ev.data.requestId, decision: "allowOnce" });
    }
  });
  assert.equal(res.text, "Restarted.");
  assert.equal(seen.filter((n) => n === Events.TurnStarted).length, 1, `${seen}`);
  assert.ok(seen.indexOf(Events.TurnStarted) < seen.indexOf(Events.PermissionRequested), `${seen}`);
  const firstDelta = seen.indexOf(Events.TextDelta);
  assert.ok(firstDelta === -1 || firstDelta > seen.indexOf(Events.TurnStarted), `${seen}`);
});

test("deny refuses the call and the model is told", async () => {
  model.push({ calls: [{ name: "restart", args: '{"reason":"again"}' }] }, { text: "Not restarted." });
  const res = await runWithApprovals(client, { text: "restart api" }, { decide: () => "deny" });
  assert.equal(res.text, "Not restarted.");
  assert.match(JSON.stringify(model.requests.at(-1).messages), /Rejected by console:alice/);
});

test("the answer-questions example answers and the turn continues", async () => {
  model.push(
    { calls: [{ name: "ask_user", args: '{"questions":[{"id":"env","kind":"choice","text":"Which environment?","choices":["staging","prod"]}]}' }] },
    { text: "Going with staging." },
  );
  const asked = [];
  const res = await runAnswering(client, { text: "deploy" }, (q) => {
    asked.push(q.text);
    return q.choices[0];
  });
  assert.deepEqual(asked, ["Which environment?"]);
  assert.equal(res.status, "finished");
  assert.equal(res.pendingQuestion, null);
  assert.equal(res.text, "Going with staging.");
});

test("errors are OpsgateError with the API's code", async () => {
  const reader = new AgentClient({ baseUrl: og.baseUrl, token: "reader-token" });
  await assert.rejects(reader.createSession(), (err) => err instanceof OpsgateError && err.status === 403 && err.code === "missing_scope");
  await assert.rejects(client.reply({ sessionId: "nope", requestId: "x", decision: "allowAlways" }), (err) => err.status === 422 && err.field === "decision");
  await assert.rejects(client.session("not-mine"), (err) => err.status === 404);
});

test("cancel aborts a queued-behind turn's predecessor and 429 comes as queue_full", async () => {
  // agent_concurrency 1, so the queue holds 4. The model hangs the first
  // turn by calling restart, which waits for an approval nobody gives.
  model.push({ calls: [{ name: "restart", args: '{"reason":"hold"}' }] }, { text: "after" });
  let turnId;
  const waiting = new Promise((resolve) => {
    client.run({ text: "restart and hold" }, (ev) => {
      if (ev.type === Events.RunQueued) turnId = ev.data.turnId;
      if (ev.type === Events.PermissionRequested) resolve();
    }).catch(() => {});
  });
  await waiting;
  const ctl = new AbortController();
  const queued = [];
  for (let i = 0; i < 4; i++) {
    model.push({ text: `turn ${i}` });
    queued.push(new Promise((resolve, reject) => {
      client.run({ text: `hello ${i}`, signal: ctl.signal }, (ev) => {
        if (ev.type === Events.RunQueued && ev.data.position > 0) resolve(ev.data.position);
      }).catch(reject);
    }));
  }
  assert.deepEqual((await Promise.all(queued)).sort(), [1, 2, 3, 4]);
  await assert.rejects(client.run({ text: "one too many" }), (err) => err.status === 429 && err.code === "queue_full");
  const aborted = await client.cancel(turnId);
  assert.equal(aborted.status, "aborted");
  ctl.abort();
});

test("cardView shows the call's input", () => {
  const c = cardView({ sessionId: "s", requestId: "r", toolName: "deploy", reason: "", toolInput: { service: "api" } });
  assert.equal(c.reason, "(no reason given)");
  assert.match(c.input, /"service": "api"/);
});
