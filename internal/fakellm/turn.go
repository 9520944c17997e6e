package fakellm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Turn is a scripted model turn, streamed in the wire format of the path it
// is requested on (Chat Completions or Messages).
type Turn struct {
	// Text is streamed as these deltas, in order.
	Text []string
	// Calls are the tool calls, after the text.
	Calls []Call
	// InputTokens and OutputTokens are the usage reported.
	InputTokens, OutputTokens int64
	// Stop overrides the finish_reason / stop_reason; default "stop" or
	// "tool_calls" (OpenAI), "end_turn" or "tool_use" (Anthropic).
	Stop string
	// Fragment is the size of the argument fragments; default 7 bytes.
	Fragment int
	// Interleave streams the fragments of parallel calls alternately
	// (OpenAI), which only (index, id) keying assembles right.
	Interleave bool
	// Ollama renders like Ollama's OpenAI-compatible API: every call at
	// index 0 with its own id and its whole arguments in one chunk, then
	// finish_reason "stop".
	Ollama bool
	// CutAfter drops the connection after that many SSE events, before the
	// turn finishes (a broken stream); 0 sends everything.
	CutAfter int
	// ErrorEvent ends the stream with the provider's error event after the
	// text (OpenAI: {"error":…}; Anthropic: event: error, overloaded_error).
	ErrorEvent bool
}

// Call is one scripted tool call. Args is sent verbatim, so it may be
// malformed on purpose. An empty ID is generated.
type Call struct {
	ID, Name, Args string
}

// Say is a Turn that streams text, one delta per argument.
func Say(deltas ...string) Turn { return Turn{Text: deltas, InputTokens: 10, OutputTokens: 5} }

// CallTool is a Turn with one tool call.
func CallTool(name, args string) Turn {
	return Turn{Calls: []Call{{Name: name, Args: args}}, InputTokens: 10, OutputTokens: 5}
}

type sse struct {
	w     http.ResponseWriter
	n     int
	limit int
	cut   bool
}

// event writes one SSE event; name "" writes a data-only event (OpenAI).
func (s *sse) event(name string, data any) {
	if s.cut {
		return
	}
	if s.limit > 0 && s.n >= s.limit {
		s.cut = true
		if hj, ok := s.w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close() // an abrupt end, not a clean chunked close
			}
		}
		return
	}
	s.n++
	var b []byte
	if raw, ok := data.(string); ok {
		b = []byte(raw)
	} else {
		b, _ = json.Marshal(data)
	}
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	s.w.(http.Flusher).Flush()
}

func fragments(s string, n int) []string {
	if n <= 0 {
		n = 7
	}
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

func (t Turn) serve(w http.ResponseWriter, r *http.Request, format string) {
	for i := range t.Calls {
		if t.Calls[i].ID == "" {
			if format == "anthropic" {
				t.Calls[i].ID = fmt.Sprintf("toolu_%02d%s", i, "fake")
			} else {
				t.Calls[i].ID = fmt.Sprintf("call_%02dfake", i)
			}
		}
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, limit: t.CutAfter}
	model := "fake-model"
	var req struct {
		Model string `json:"model"`
	}
	if b, err := io.ReadAll(r.Body); err == nil && json.Unmarshal(b, &req) == nil && req.Model != "" {
		model = req.Model
	}
	if format == "anthropic" {
		t.anthropic(s, model)
	} else {
		t.openai(s, model)
	}
}

func (t Turn) openai(s *sse, model string) {
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": model,
			"system_fingerprint": "fp_fake",
			"choices":            []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		}
	}
	s.event("", chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil))
	for _, d := range t.Text {
		s.event("", chunk(map[string]any{"content": d}, nil))
	}
	if t.ErrorEvent {
		s.event("", map[string]any{"error": map[string]any{"message": "The server had an error while processing your request. Sorry about that!", "type": "server_error", "param": nil, "code": nil}})
		return
	}
	switch {
	case t.Ollama:
		for _, c := range t.Calls {
			s.event("", chunk(map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{
				"id": c.ID, "index": 0, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Args}}}}, nil))
		}
	case t.Interleave:
		frags := make([][]string, len(t.Calls))
		for i, c := range t.Calls {
			s.event("", chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil))
			frags[i] = fragments(c.Args, t.Fragment)
		}
		for more := true; more; {
			more = false
			for i := range frags {
				if len(frags[i]) == 0 {
					continue
				}
				more = true
				s.event("", chunk(map[string]any{"tool_calls": []any{map[string]any{
					"index": i, "function": map[string]any{"arguments": frags[i][0]}}}}, nil))
				frags[i] = frags[i][1:]
			}
		}
	default:
		for i, c := range t.Calls {
			s.event("", chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil))
			for _, f := range fragments(c.Args, t.Fragment) {
				s.event("", chunk(map[string]any{"tool_calls": []any{map[string]any{
					"index": i, "function": map[string]any{"arguments": f}}}}, nil))
			}
		}
	}
	stop := t.Stop
	if stop == "" {
		stop = "stop"
		if len(t.Calls) > 0 && !t.Ollama {
			stop = "tool_calls"
		}
	}
	s.event("", chunk(map[string]any{}, stop))
	s.event("", map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": model,
		"choices": []any{},
		"usage":   map[string]any{"prompt_tokens": t.InputTokens, "completion_tokens": t.OutputTokens, "total_tokens": t.InputTokens + t.OutputTokens},
	})
	s.event("", "[DONE]")
}

func (t Turn) anthropic(s *sse, model string) {
	s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": t.InputTokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1},
	}})
	idx := 0
	if len(t.Text) > 0 {
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		s.event("ping", map[string]any{"type": "ping"})
		for _, d := range t.Text {
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": d}})
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	if t.ErrorEvent {
		s.event("error", map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}})
		return
	}
	for _, c := range t.Calls {
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{
			"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
		// Anthropic opens with an empty fragment.
		s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
		for _, f := range fragments(c.Args, t.Fragment) {
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": f}})
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	stop := t.Stop
	if stop == "" {
		stop = "end_turn"
		if len(t.Calls) > 0 {
			stop = "tool_use"
		}
	}
	s.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": t.OutputTokens}})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}

// HTTPError answers with a status and the provider's real error body for it
// (chosen by the request's format), plus Retry-After when set.
type HTTPError struct {
	Status int
	// RetryAfter is the Retry-After header value ("2", an HTTP date); "" for none.
	RetryAfter string
	// Message overrides the provider's usual message.
	Message string
}

// RateLimited is a 429 with Retry-After.
func RateLimited(retryAfter string) HTTPError {
	return HTTPError{Status: http.StatusTooManyRequests, RetryAfter: retryAfter}
}

func (e HTTPError) serve(w http.ResponseWriter, _ *http.Request, format string) {
	w.Header().Set("Content-Type", "application/json")
	if e.RetryAfter != "" {
		w.Header().Set("Retry-After", e.RetryAfter)
	}
	var body map[string]any
	if format == "anthropic" {
		typ, msg := anthropicError(e.Status)
		if e.Message != "" {
			msg = e.Message
		}
		w.Header().Set("Request-Id", "req_011fake")
		body = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}, "request_id": "req_011fake"}
	} else {
		typ, code, msg := openaiError(e.Status)
		if e.Message != "" {
			msg = e.Message
		}
		body = map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}}
	}
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(body)
}

func openaiError(status int) (typ string, code any, msg string) {
	switch {
	case status == 429:
		return "requests", "rate_limit_exceeded", "Rate limit reached for fake-model in organization org-fake on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s. Visit https://platform.openai.com/account/rate-limits to learn more."
	case status == 401:
		return "invalid_request_error", "invalid_api_key", "Incorrect API key provided: sk-fake****1234. You can find your API key at https://platform.openai.com/account/api-keys."
	case status == 404:
		return "invalid_request_error", "model_not_found", "The model `fake-model` does not exist or you do not have access to it."
	case status == 400:
		return "invalid_request_error", "context_length_exceeded", "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages."
	case status == 503:
		return "server_error", nil, "The engine is currently overloaded, please try again later."
	case status >= 500:
		return "server_error", nil, "The server had an error while processing your request. Sorry about that!"
	}
	return "invalid_request_error", nil, strings.ToLower(http.StatusText(status))
}

func anthropicError(status int) (typ, msg string) {
	switch status {
	case 429:
		return "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit (https://docs.claude.com/en/api/rate-limits); see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later."
	case 401:
		return "authentication_error", "invalid x-api-key"
	case 403:
		return "permission_error", "Your API key does not have permission to use the specified resource."
	case 404:
		return "not_found_error", "model: fake-model"
	case 400:
		return "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
	case 529:
		return "overloaded_error", "Overloaded"
	}
	if status >= 500 {
		return "api_error", "Internal server error"
	}
	return "invalid_request_error", strings.ToLower(http.StatusText(status))
}
