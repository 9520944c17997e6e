// @opsgate/agent-client — opsgate's Agent API (docs/agent-api.md) over
// fetch() and Server-Sent Events. No dependencies: Node 18+ and browsers.
//
//   const og = new AgentClient({ baseUrl: "http://127.0.0.1:8080", token });
//   const result = await og.run({ text: "is api healthy?" }, (ev) => {
//     if (ev.type === "text.delta") process.stdout.write(ev.data.text);
//   });
//
// Events arrive in order; turn.finished is always last and carries the
// same {sessionId, turnId, status, text, error, pendingQuestion} as the
// result. Event names this client does not know are passed on as they are:
// handle the ones you know and ignore the rest, new ones may be added.

import { parseSSE } from "./sse.js";

export { parseSSE };

/** The event names of the Agent API (more may be added; ignore unknown ones). */
export const Events = Object.freeze({
  RunQueued: "run.queued",
  TurnStarted: "turn.started",
  TextDelta: "text.delta",
  MessageCommitted: "message.committed",
  ToolStarted: "tool.started",
  ToolFinished: "tool.finished",
  PermissionRequested: "permission.requested",
  PermissionDecided: "permission.decided",
  QuestionRequested: "question.requested",
  TurnFinished: "turn.finished",
});

/** The error code of a turn that may have run a tool whose outcome is unknown. */
export const OUTCOME_UNKNOWN = "AGENT_OUTCOME_UNKNOWN";

/** An error answer of the API: {"error":{"code","message"}} with its HTTP status. */
export class OpsgateError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.name = "OpsgateError";
    this.status = status;
    this.code = e.code || "http_" + status;
    this.field = e.field;
    this.retryAfter = undefined;
  }
}

export class AgentClient {
  /**
   * @param {{baseUrl: string, token: string, fetch?: typeof fetch}} opts
   */
  constructor({ baseUrl, token, fetch: f } = {}) {
    if (!baseUrl || !token) throw new TypeError("AgentClient needs baseUrl and token");
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = token;
    this.fetch = f || globalThis.fetch.bind(globalThis);
  }

  async #request(method, path, body, { stream = false, signal } = {}) {
    const headers = { Authorization: `Bearer ${this.token}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (stream) headers.Accept = "text/event-stream";
    const res = await this.fetch(this.baseUrl + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
    if (!res.ok) {
      let parsed;
      try {
        parsed = await res.json();
      } catch {
        parsed = undefined;
      }
      const err = new OpsgateError(res.status, parsed);
      const ra = res.headers.get("Retry-After");
      if (ra) err.retryAfter = Number(ra);
      throw err;
    }
    return res;
  }

  async #json(method, path, body, opts) {
    const res = await this.#request(method, path, body, opts);
    return res.json();
  }

  /** POST /api/v1/agent/sessions → {sessionId, agent, createdAt, consoleUrl} */
  createSession({ agent } = {}) {
    return this.#json("POST", "/api/v1/agent/sessions", agent ? { agent } : {});
  }

  /**
   * GET /api/v1/agent/sessions/{id} → {sessionId, agent, createdAt, consoleUrl, turns}: the session
   * with its turns (read it before re-sending a turn); consoleUrl is where a person continues it.
   */
  session(id) {
    return this.#json("GET", `/api/v1/agent/sessions/${encodeURIComponent(id)}`);
  }

  /** GET /api/v1/agent/sessions → {items, nextCursor}: this token's sessions. */
  sessions({ cursor, limit } = {}) {
    const q = new URLSearchParams();
    if (cursor) q.set("cursor", cursor);
    if (limit) q.set("limit", String(limit));
    const qs = q.toString();
    return this.#json("GET", "/api/v1/agent/sessions" + (qs ? "?" + qs : ""));
  }

  /** GET /api/v1/agent/turns/{id} → the turn's result (status queued|running while it goes on). */
  turn(id) {
    return this.#json("GET", `/api/v1/agent/turns/${encodeURIComponent(id)}`);
  }

  /** GET /api/v1/agent/models → {items: [{name, provider, model}]} */
  models() {
    return this.#json("GET", "/api/v1/agent/models");
  }

  /** GET /api/v1/agent/agents → {items: [{name, model, default, tools}]} */
  agents() {
    return this.#json("GET", "/api/v1/agent/agents");
  }

  /**
   * Runs one turn: POST /api/v1/agent/runs. With onEvent, the turn's events
   * stream to it (Server-Sent Events) and the result is turn.finished's
   * data; without, the server answers with the result when the turn ends —
   * and, since nobody can see a permission request then, every approval it
   * needs is denied at once.
   *
   * Creating a turn is not idempotent: after a lost answer, read the
   * session (session(id)) before sending the text again.
   *
   * @param {{text: string, sessionId?: string, agent?: string, model?: string, signal?: AbortSignal}} turn
   * @param {(ev: {type: string, data: any}) => void | Promise<void>} [onEvent]
   */
  run({ text, sessionId, agent, model, signal }, onEvent) {
    const body = { text };
    if (sessionId) body.sessionId = sessionId;
    if (agent) body.agent = agent;
    if (model) body.model = model;
    return this.#turn("/api/v1/agent/runs", body, onEvent, signal);
  }

  /**
   * Answers the question a turn stopped at (its pendingQuestion, or a
   * question.requested event) and follows the continued turn like run();
   * model, when given, switches the rest of the turn to that model.
   * @param {{sessionId: string, requestId: string, answers: Array<{questionId: string, isSkipped: boolean, answer?: string}>, model?: string, signal?: AbortSignal}} a
   */
  answer({ sessionId, requestId, answers, model, signal }, onEvent) {
    const body = { sessionId, requestId, answers };
    if (model) body.model = model;
    return this.#turn("/api/v1/agent/answer", body, onEvent, signal);
  }

  /**
   * Decides a permission.requested: "allowOnce" runs this one call, "deny"
   * refuses it. It is a decision by this token's actor and passes every
   * check a decision passes (scope decide, an eligible person, not the
   * requester of a high-impact call, never an agent).
   */
  reply({ sessionId, requestId, decision, reason }) {
    const body = { sessionId, requestId, decision };
    if (reason) body.reason = reason;
    return this.#json("POST", "/api/v1/agent/reply", body);
  }

  /** POST /api/v1/agent/turns/{id}/cancel → the result (status aborted). */
  cancel(turnId) {
    return this.#json("POST", `/api/v1/agent/turns/${encodeURIComponent(turnId)}/cancel`);
  }

  async #turn(path, body, onEvent, signal) {
    if (!onEvent) return this.#json("POST", path, body, { signal });
    const res = await this.#request("POST", path, body, { stream: true, signal });
    let result;
    for await (const { event, data } of parseSSE(res.body)) {
      let parsed;
      try {
        parsed = JSON.parse(data);
      } catch {
        continue; // not JSON: not an event this client understands
      }
      if (event === Events.TurnFinished) result = parsed;
      await onEvent({ type: event, data: parsed });
    }
    if (!result) {
      const err = new OpsgateError(0, { error: { code: "stream_closed", message: "the event stream closed before turn.finished; read the session before retrying" } });
      throw err;
    }
    return result;
  }
}
