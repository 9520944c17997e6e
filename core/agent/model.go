package agent

import "context"

// Model is the provider seam the loop declares: one call streams one model
// turn. Implementations (core/agent/openai, core/agent/anthropic) translate
// Request to their wire format, call sink for every text delta as it arrives
// (sink may be nil), and return the assembled turn. They make one attempt
// and report failures as *Error so Retrying can decide what to try again.
//
// Stream must not retain req or call sink after it returns. sink is called
// on the goroutine that called Stream and should be quick.
type Model interface {
	Stream(ctx context.Context, req *Request, sink Sink) (*Response, error)
}

// Sink receives a turn's streamed output.
type Sink func(Delta)

// Delta is one piece of streamed output. Restart means the text streamed so
// far is void: the turn failed mid-stream and is being retried, so a
// streaming view should drop what it showed (Retrying sends it).
type Delta struct {
	Text    string
	Restart bool
}

// Request is one model call, already in the neutral shape every provider
// maps: the system prompt, the bounded history (see BuildRequest) and the
// tool definitions with wire-safe names (see Toolbox).
type Request struct {
	System   string
	Messages []RequestMessage
	Tools    []ToolDef
	// ToolChoice is ToolsAuto (default) or ToolsNone: the tools stay
	// declared (Anthropic refuses a history with tool calls otherwise) but
	// the model must answer in text, e.g. once max_steps is reached.
	ToolChoice ToolChoice
	// MaxTokens bounds the output; 0 lets the provider choose its default.
	MaxTokens int
}

// ToolChoice says whether the model may call tools in this turn.
type ToolChoice string

// The tool choices.
const (
	ToolsAuto ToolChoice = ""
	ToolsNone ToolChoice = "none"
)

// RequestMessage is one rendered message of a request: external content is
// already framed, tool names are wire names.
type RequestMessage struct {
	Role Role
	// Text is the user text, the assistant's text, or the tool result.
	Text string
	// ToolCalls are the calls an assistant message made (Role assistant).
	ToolCalls []ToolCall
	// ToolCallID is the call a tool result answers (Role tool).
	ToolCallID string
	// IsError marks a tool result that reports a failure (Anthropic sends
	// is_error; Chat Completions has no such flag, the text says so).
	IsError bool
	// Images follow Text in a user message (files fetched for a model that
	// takes images); the text's framed blocks say what each one is.
	Images []Image
}

// ToolDef declares one tool to the model.
type ToolDef struct {
	// Name is the wire name: letters, digits, '_' and '-', at most 64.
	Name        string
	Description string
	// Schema is the JSON Schema (an object) of the arguments.
	Schema map[string]any
}

// ToolCall is one call the model asked for, as the model produced it.
type ToolCall struct {
	ID string
	// Name is the wire name; Toolbox.Resolve maps it back.
	Name string
	// Arguments is the raw JSON text the model produced. It may be
	// malformed: a string, not json.RawMessage, so it survives storage.
	Arguments string
}

// Response is one assembled model turn.
type Response struct {
	// Text is the assistant's text (all text blocks, in order).
	Text      string
	ToolCalls []ToolCall
	Usage     Usage
	// Stop is why the turn ended, normalized. It is StopToolUse whenever
	// ToolCalls is not empty, whatever the provider said (Ollama reports
	// "stop" with tool calls).
	Stop StopReason
	// RawStop is the provider's own stop reason, for logs.
	RawStop string
	// Model is the model that answered, as the provider reports it.
	Model string
}

// Usage counts the tokens of one turn (or, summed, of a run).
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens}
}

// StopReason is why a model turn ended.
type StopReason string

// The normalized stop reasons.
const (
	StopEnd       StopReason = "end_turn"   // the model finished its answer
	StopToolUse   StopReason = "tool_use"   // the model asked for tool calls
	StopMaxTokens StopReason = "max_tokens" // the output hit MaxTokens
	StopRefusal   StopReason = "refusal"    // the model (or its filter) refused
	StopOther     StopReason = "other"      // anything else the provider said
)
