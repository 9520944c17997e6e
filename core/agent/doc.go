// Package agent is the foundation of opsgate's agent runs: an LLM that works
// in a thread, with every tool call it makes behind the same gate as flow
// steps (issue 12, docs/agents.md).
//
// This package holds what the loop needs and nothing that waits on the
// engine or a store:
//
//   - the provider seam: Model streams one model turn (Request → Response,
//     text deltas to a Sink); core/agent/openai and core/agent/anthropic
//     implement it over the official SDKs, and Retrying wraps any Model with
//     the retry policy (429 honours Retry-After, 5xx backs off, bounded) and
//     the per-turn timeout;
//   - conversation state as storable data: Message and Part serialize to
//     JSON, and BuildRequest turns a stored history into a bounded provider
//     request (oldest trimmed, long tool output truncated with a note);
//   - the tool-call convention: Toolbox adds a required one-line reason to
//     every tool's schema, maps dotted names (github.search) to wire-safe
//     ones, and Resolve strips the reason before the gate sees the arguments;
//     malformed arguments become an error result for the model, never a panic;
//   - external content framing: every byte that did not come from the
//     operator's config reaches the model only inside an escaped
//     <external_content source="…" actor="…"> block (Frame, Preamble);
//   - gate outcomes rendered into the tool result the model receives
//     (Outcome.Result), the max_steps budget (Steps), and the ask_user
//     built-in tool (Ask, ParseAsk, Ask.ParseReply).
//
// The engine integration (agent runs in threads, suspend/resume, cards,
// streaming into chat) plugs these pieces together; see docs/agents.md.
package agent
