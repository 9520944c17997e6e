// The peer opsgate-bench slack measures opsgate against: Vercel's Chat SDK
// (chat, @chat-adapter/slack) with its in-memory state, answering each
// signed Slack app_mention with one line from the same exec'd command
// opsgate's ping flow runs. Nothing is durable: an event is acknowledged
// once verified and deduplicated in memory, and its reply is posted from
// memory. It serves POST /slack/events, GET /readyz and GET /metrics
// (process_resident_memory_bytes), which is all the bench reads.
//
//   PEER_LISTEN=127.0.0.1:18191 SLACK_SIGNING_SECRET=… SLACK_API_URL=http://127.0.0.1:18099/api/ \
//     PEER_COMMAND=true node bot.mjs
import { execFile } from "node:child_process";
import http from "node:http";
import { Chat } from "chat";
import { createSlackAdapter } from "@chat-adapter/slack";
import { createMemoryState } from "@chat-adapter/state-memory";

const [host, port] = (process.env.PEER_LISTEN || "127.0.0.1:18191").split(":");
if (host !== "127.0.0.1" && host !== "localhost" && host !== "::1") {
  throw new Error(`PEER_LISTEN ${host}: loopback only`);
}
const command = (process.env.PEER_COMMAND || "true").split(" ");

const bot = new Chat({
  userName: "opsgate",
  adapters: {
    slack: createSlackAdapter({
      botToken: process.env.SLACK_BOT_TOKEN || "xoxb-bench",
      signingSecret: process.env.SLACK_SIGNING_SECRET,
      apiUrl: process.env.SLACK_API_URL,
      logger: { debug() {}, info() {}, warn: console.warn, error: console.error, child() { return this; } },
    }),
  },
  state: createMemoryState(),
  logger: "error",
});

bot.onNewMention(async (thread) => {
  const out = await new Promise((resolve, reject) =>
    execFile(command[0], command.slice(1), { timeout: 10_000 }, (err, stdout) => (err ? reject(err) : resolve(stdout))));
  await thread.post(`${command.join(" ")}: ${out.split("\n")[0] || "ok"}`);
});

const server = http.createServer(async (req, res) => {
  if (req.method === "GET" && req.url === "/readyz") {
    res.end("ok\n");
    return;
  }
  if (req.method === "GET" && req.url === "/metrics") {
    res.setHeader("Content-Type", "text/plain");
    res.end(`process_resident_memory_bytes ${process.memoryUsage().rss}\n`);
    return;
  }
  if (req.method !== "POST" || req.url !== "/slack/events") {
    res.statusCode = 404;
    res.end();
    return;
  }
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const request = new Request(`http://${req.headers.host}${req.url}`, {
    method: "POST", headers: req.headers, body: Buffer.concat(chunks),
  });
  try {
    const response = await bot.webhooks.slack(request, {
      waitUntil: (p) => p.catch((err) => console.error("handler:", err)),
    });
    res.statusCode = response.status;
    res.end(Buffer.from(await response.arrayBuffer()));
  } catch (err) {
    console.error("webhook:", err);
    res.statusCode = 500;
    res.end();
  }
});
server.listen(Number(port), host);
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => server.close(() => process.exit(0)));
