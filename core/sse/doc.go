// Package sse holds both ends of a text/event-stream (Server-Sent Events,
// the WHATWG EventSource format): the Stream every streaming endpoint
// writes through (headers, framing, flushing, the ": ping" heartbeat, the
// wait between passes that coalesces bursts of wake-ups, where a client
// resumes) and the Reader the Go clients parse it with. One writer keeps
// the five streams opsgate serves framed the same way; the reader is the
// one parser of a server's (or an impostor's) bytes, fuzzed for that.
// README.md and docs/agent-api.md describe the streams themselves.
package sse
