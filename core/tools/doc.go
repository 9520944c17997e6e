// Package tools runs the two kinds of tool opsgate dispatches: exec (a
// program started from an argv built from templates, never through a shell)
// and http (one templated request).
//
// The engine hands a tool a Call whose Args already passed the tool's
// input_schema; those arguments are the only template values, so a chat
// message can never reach a template except through a validated argument.
// Every template element renders to exactly one argv element, URL, header
// value or body, which keeps an argument like "x; rm -rf /" a single literal
// string. Output is captured into a capped buffer so a chatty tool cannot
// exhaust memory or flood a chat thread.
//
// Exec and HTTP are configuration values: build them once (from config), call
// Validate at load time, then share them between goroutines. Their fields must
// not change after the first Validate, Run or Preview, because the compiled
// templates are cached on first use.
package tools
