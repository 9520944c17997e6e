package tools

import "time"

// Call is one dispatch of a tool. Args already passed the tool's
// input_schema (defaults applied) and are the ONLY template values; RunID and
// IdempotencyKey reach the tool through its environment (exec) or headers
// (http), never through a template, so no argument can forge them.
type Call struct {
	RunID          string
	IdempotencyKey string
	Args           map[string]any
	// Output, when set, receives the tool's output as it arrives (exec:
	// stdout and stderr, in the order written), besides the capped Result:
	// the progress of long work. It is called on the tool's own goroutine,
	// must be quick, and must not keep p. Preview never calls it.
	Output OutputSink
	// Receipt is the signed receipt of the decision the call runs under
	// (approvals/receipt), "" for a call nobody decided (allowed by a rule
	// or a grant) or when no key signs receipts. Exec tools get it in
	// OPSGATE_RECEIPT, http tools in the Opsgate-Receipt header, so the
	// system that acts can verify that people approved exactly this.
	Receipt string
}

// OutputSink receives a running tool's output (Call.Output).
type OutputSink func(p []byte)

// Result is what a tool produced. Output is capped at the tool's MaxOutput
// with a "[… truncated N bytes]" note, so it can be stored and shown on a
// card without further checks.
type Result struct {
	// Output is combined stdout+stderr (exec) or the response body (http).
	Output string
	// ExitCode is the exec process's exit code (0 for http).
	ExitCode int
	// Status is the HTTP status code (0 for exec).
	Status int
	// Truncated reports that Output was cut at the cap.
	Truncated bool
	// Duration is the wall time of the dispatch.
	Duration time.Duration
}
