// Package mcp serves opsgate to MCP clients (assistants, IDEs, agents) at
// /mcp over the Streamable HTTP transport of the Model Context Protocol.
//
// The tools mirror the HTTP API v1 and go through the same engine, so an
// agent is held to the same policy as a person: list_flows, send_message
// (a console message from the token's actor, exactly like
// POST /api/v1/messages), get_run, list_approvals, get_approval and decide.
// A risky call an agent starts still stops for a human; an agent's token
// may decide only if its actor is an approver.
//
// Authentication is the API's bearer tokens (api.tokens), compared in
// constant time; each token acts as its configured actor. The server is
// stateless (no Mcp-Session-Id), so any replica answers any request.
//
// Results are structured content with the API's run and approval shapes;
// refusals are error results that keep their code. Text that came from
// outside opsgate (tool output, chat text, reasons, previews) is returned as
// data inside an <external_content> block, never as instructions
// (docs/architecture.md, invariant 6).
package mcp
