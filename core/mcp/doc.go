// Package mcp serves opsgate to MCP clients (assistants, IDEs, agents)
// over the Streamable HTTP transport, in every protocol version the
// go-sdk speaks: 2026-07-28 (stateless: server/discover, the version in
// each request's _meta, elicitation as an input_required retry with a
// signed requestState) and the session versions before it (initialize,
// Mcp-Session-Id, elicitation/create).
//
// Four endpoints (docs/mcp.md): /mcp and
// /mcp/codex (the same tools, Codex's descriptions) for external agents
// and IDEs; /internal/mcp and /internal/mcp/studio for internal tokens
// only (api.tokens[].internal) from loopback or configured origins. A
// token of one kind is unknown on the other kind's endpoints. External
// endpoints add the agent-task tools.
//
// The tools drive the same engine as chat and the API, so an agent is
// held to the same policy as a person: flow starts a run, risky calls stop
// for people, and approvals are never answerable here
// (human_confirmation_required). Every business error is isError with
// structuredContent.error {code, message}; results are structured content
// and the same JSON as text. docs/mcp.md is the user's guide.
package mcp
