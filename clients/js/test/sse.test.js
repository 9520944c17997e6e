import { test } from "node:test";
import assert from "node:assert/strict";
import { parseSSE, AgentClient } from "../src/index.js";

function bodyOf(...chunks) {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const ch of chunks) c.enqueue(enc.encode(ch));
      c.close();
    },
  });
}

async function collect(body) {
  const out = [];
  for await (const ev of parseSSE(body)) out.push(ev);
  return out;
}

test("parses events split across chunks, CRLF, CR, comments and multi-line data", async () => {
  const evs = await collect(bodyOf("event: a\r\nda", "ta: {\"x\":1}\r\n\r\n: ping\n\n", "event: b\rdata: l1\rdata: l2\r\r", "data: plain\n\n"));
  assert.deepEqual(evs, [
    { event: "a", data: '{"x":1}' },
    { event: "b", data: "l1\nl2" },
    { event: "message", data: "plain" },
  ]);
});

test("an event cut off by the end of the stream is not dispatched", async () => {
  assert.deepEqual(await collect(bodyOf("event: a\ndata: 1\n\nevent: b\ndata: 2\n")), [{ event: "a", data: "1" }]);
});

test("the client passes unknown events on and returns turn.finished", async () => {
  const stream = "event: run.queued\ndata: {\"position\":0}\n\nevent: brand.new\ndata: {\"x\":1}\n\n" +
    "event: turn.finished\ndata: {\"status\":\"finished\",\"text\":\"ok\"}\n\n";
  const fetch = async () => new Response(bodyOf(stream), { status: 200, headers: { "Content-Type": "text/event-stream" } });
  const c = new AgentClient({ baseUrl: "http://x", token: "t", fetch });
  const seen = [];
  const res = await c.run({ text: "hi" }, (ev) => seen.push(ev.type));
  assert.deepEqual(seen, ["run.queued", "brand.new", "turn.finished"]);
  assert.equal(res.text, "ok");
});

test("a stream that ends before turn.finished is an error telling to read the session", async () => {
  const fetch = async () => new Response(bodyOf("event: run.queued\ndata: {}\n\n"), { status: 200 });
  const c = new AgentClient({ baseUrl: "http://x", token: "t", fetch });
  await assert.rejects(c.run({ text: "hi" }, () => {}), (err) => err.code === "stream_closed" && /read the session/.test(err.message));
});
