#!/usr/bin/env node
// Example: a terminal loop that talks to an agent and answers its
// questions. Each line you type is a turn in one session; when a turn
// stops at a question (pendingQuestion), every question is asked on the
// terminal and the answers continue the turn.
//
//   OPSGATE_URL=http://127.0.0.1:8080 OPSGATE_TOKEN=… node answer-questions.mjs

import { createInterface } from "node:readline/promises";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { AgentClient, Events, OUTCOME_UNKNOWN } from "../src/index.js";

/**
 * Runs a turn and answers its questions with ask(question) → answer
 * string ("" skips an optional question), until the turn ends without one
 * (at most maxRounds questions). Resolves with the final result.
 */
export async function runAnswering(client, turn, ask, { onEvent = () => {}, maxRounds = 20 } = {}) {
  let result = await client.run(turn, onEvent);
  for (let i = 0; result.pendingQuestion && i < maxRounds; i++) {
    const q = result.pendingQuestion;
    const answers = [];
    for (const question of q.questions) {
      const answer = await ask(question);
      answers.push(answer === "" && question.optional
        ? { questionId: question.id, isSkipped: true }
        : { questionId: question.id, isSkipped: false, answer });
    }
    result = await client.answer({ sessionId: result.sessionId, requestId: q.requestId, answers }, onEvent);
  }
  return result;
}

async function main() {
  const client = new AgentClient({ baseUrl: process.env.OPSGATE_URL || "http://127.0.0.1:8080", token: process.env.OPSGATE_TOKEN || "" });
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  const ask = async (q) => {
    const hint = q.kind === "choice" ? ` [${q.choices.join("/")}]` : q.kind === "confirm" ? " [yes/no]" : "";
    return (await rl.question(`? ${q.text}${hint}${q.optional ? " (optional)" : ""} `)).trim();
  };
  const onEvent = (ev) => {
    if (ev.type === Events.TextDelta) process.stdout.write(ev.data.text);
    else if (ev.type === Events.RunQueued && ev.data.position > 0) console.log(`(queued, position ${ev.data.position})`);
    else if (ev.type === Events.PermissionRequested) console.log(`\n(${ev.data.toolName} waits for an approval: ${ev.data.reason})`);
  };
  let sessionId;
  for (;;) {
    const text = (await rl.question("> ")).trim();
    if (!text) break;
    try {
      const result = await runAnswering(client, { text, sessionId }, ask, { onEvent });
      sessionId = result.sessionId;
      console.log();
      if (result.status !== "finished") {
        console.log(`turn ${result.status}: ${result.error?.code}: ${result.error?.message}`);
        if (result.error?.code === OUTCOME_UNKNOWN) console.log("read the session before you send that again");
      }
    } catch (err) {
      console.log(`${err.code || "error"}: ${err.message}`);
    }
  }
  rl.close();
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main();
}
