// Example: a page that talks to an agent and renders every
// permission.requested as an approval card with "Allow once" and "Deny",
// posting the choice with reply(). Open approval-card.html from the same
// origin as opsgate (the API sends no CORS headers), e.g. behind the
// reverse proxy that serves opsgate.
//
// The logic is in runWithApprovals, which knows nothing of the DOM, so
// it runs (and is tested) in Node as well.

import { AgentClient, Events } from "../src/index.js";

/** What a card shows for one permission.requested event's data. */
export function cardView(data) {
  return {
    sessionId: data.sessionId,
    requestId: data.requestId,
    title: `${data.toolName} wants to run`,
    reason: data.reason || "(no reason given)",
    input: JSON.stringify(data.toolInput ?? {}, null, 2),
    actions: [
      { label: "Allow once", decision: "allowOnce" },
      { label: "Deny", decision: "deny" },
    ],
  };
}

/**
 * Runs one turn; for every permission request asks decide(card) for
 * "allowOnce" or "deny" and replies. onText gets the model's text as it
 * streams. Unknown events are ignored. Resolves with the turn's result.
 */
export async function runWithApprovals(client, turn, { decide, onText = () => {}, onEvent = () => {} }) {
  const replies = [];
  const result = await client.run(turn, async (ev) => {
    onEvent(ev);
    switch (ev.type) {
      case Events.TextDelta:
        onText(ev.data.text, { restart: !!ev.data.restart });
        break;
      case Events.PermissionRequested: {
        const card = cardView(ev.data);
        // Decide without blocking the stream: the turn's next events
        // (other calls, the text) keep arriving while a person thinks.
        replies.push(
          Promise.resolve(decide(card)).then((decision) =>
            client.reply({ sessionId: card.sessionId, requestId: card.requestId, decision }),
          ),
        );
        break;
      }
      default:
      // run.queued, turn.started, tool.*, message.committed, and names
      // added later: nothing to do here.
    }
  });
  await Promise.allSettled(replies);
  return result;
}

// The page: only when there is a DOM.
if (typeof document !== "undefined") {
  const $ = (sel) => document.querySelector(sel);
  const log = $("#transcript");
  const line = (cls, text) => {
    const p = document.createElement("p");
    p.className = cls;
    p.textContent = text;
    log.append(p);
    return p;
  };
  let sessionId;
  $("#ask").addEventListener("submit", async (e) => {
    e.preventDefault();
    const client = new AgentClient({ baseUrl: $("#server").value || location.origin, token: $("#token").value });
    const text = $("#text").value;
    $("#text").value = "";
    line("you", text);
    let live = line("agent", "");
    try {
      const result = await runWithApprovals(client, { text, sessionId }, {
        onText: (t, { restart }) => {
          live.textContent = restart ? t : live.textContent + t;
        },
        decide: (card) =>
          new Promise((resolve) => {
            const el = document.createElement("section");
            el.className = "card";
            const h = document.createElement("h3");
            h.textContent = card.title;
            const why = document.createElement("p");
            why.textContent = "Why: " + card.reason;
            const pre = document.createElement("pre");
            pre.textContent = card.input;
            el.append(h, why, pre);
            for (const a of card.actions) {
              const b = document.createElement("button");
              b.textContent = a.label;
              b.onclick = () => {
                el.querySelectorAll("button").forEach((x) => (x.disabled = true));
                el.append(document.createTextNode(` → ${a.label}`));
                resolve(a.decision);
              };
              el.append(b);
            }
            log.append(el);
            live = line("agent", "");
          }),
      });
      sessionId = result.sessionId;
      if (result.status !== "finished") line("error", `${result.status}: ${result.error?.code} ${result.error?.message}`);
      else if (!live.textContent) live.textContent = result.text;
    } catch (err) {
      line("error", `${err.code || "error"}: ${err.message}`);
    }
  });
}
