// Package upstream offers the tools of upstream MCP servers (a GitHub MCP
// server, a filesystem of runbooks, a cloud provider's) as opsgate tools,
// behind the same gate as exec and http tools.
//
// A Registry holds one MCP client per configured server, over stdio (a
// process opsgate starts and restarts) or Streamable HTTP. Each server's
// tools/list is cached, refreshed when the server sends
// notifications/tools/list_changed and every RefreshInterval, and each
// offered tool becomes a tools.Tool named "<server>.<tool>" whose
// input_schema is the server's own, so arguments and edits are validated
// like any tool's. The Registry is a tools.ToolLookup: the engine
// resolves these names when a step runs, since the list may change.
//
// Annotations set a tool's defaults (readOnlyHint → risk read,
// destructiveHint → destructive, idempotentHint → idempotent,
// openWorldHint → risk external); the operator can narrow the offered
// tools with globs and override risk, destructive and idempotent per tool.
// There is no dry run: the card's preview says so.
//
// Every failure of a server — down, a crashed process, a timeout, a
// protocol version opsgate does not speak, a malformed or oversized
// message, an isError result — is a tool error with a clear message, never
// a crash or a hung run. Each call carries its idempotency key and run id
// in _meta (MetaIdempotencyKey, MetaRunID). Configured credentials (header
// values, env values, the URL's password and query values) are masked in
// every error, log line, output and description this package produces.
package upstream
