// A scripted OpenAI-compatible model server (Chat Completions, streamed)
// for the client's tests: each request takes the next scripted reply.
import http from "node:http";

/** Starts the server; returns {url, push(...replies), requests, close()}. */
export async function startFakeModel() {
  const queue = [];
  const requests = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      try {
        requests.push(JSON.parse(body));
      } catch {
        requests.push(null);
      }
      const reply = queue.shift() || { text: "(unscripted)" };
      res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
      const chunk = (delta, finish) =>
        res.write(
          "data: " +
            JSON.stringify({
              id: "chatcmpl-js", object: "chat.completion.chunk", created: 1700000000, model: "test-model",
              choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
            }) + "\n\n",
        );
      chunk({ role: "assistant", content: "" }, null);
      for (const t of [].concat(reply.text || [])) chunk({ content: t }, null);
      (reply.calls || []).forEach((c, i) => {
        chunk({ tool_calls: [{ index: i, id: c.id || `call_${i}js`, type: "function", function: { name: c.name, arguments: c.args } }] }, null);
      });
      chunk({}, reply.calls ? "tool_calls" : "stop");
      res.write("data: " + JSON.stringify({ id: "chatcmpl-js", object: "chat.completion.chunk", created: 1700000000, model: "test-model",
        choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } }) + "\n\n");
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/v1`,
    push: (...replies) => queue.push(...replies),
    requests,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
