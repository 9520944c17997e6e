// Package anthropic is the agent.Model for `provider: anthropic`: the
// Messages API streamed over github.com/anthropics/anthropic-sdk-go/v2
// (tool_use blocks, input_json_delta fragments, tool_result blocks).
//
// The SDK's own retries are off (agent.Retrying is the one policy) and the
// client is built WithoutEnvironmentDefaults: ANTHROPIC_API_KEY and
// ANTHROPIC_BASE_URL reach a model only through the config.
package anthropic

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/opsgate/opsgate/core/agent"
)

// DefaultBaseURL is Anthropic's API, used when base_url is not configured.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens is sent when neither the request nor the model sets
// max_tokens, which the Messages API requires.
const DefaultMaxTokens = 4096

// Model streams turns from one configured model.
type Model struct {
	spec agent.ModelSpec
	svc  ant.MessageService
}

var _ agent.Model = (*Model)(nil)

// New returns the model for spec (Provider must be "anthropic").
func New(spec agent.ModelSpec) (*Model, error) {
	if spec.Provider != "" && spec.Provider != agent.ProviderAnthropic {
		return nil, fmt.Errorf("anthropic: provider is %q", spec.Provider)
	}
	if spec.Model == "" {
		return nil, errors.New("anthropic: no model id")
	}
	if spec.BaseURL == "" {
		spec.BaseURL = DefaultBaseURL
	}
	if u, err := url.Parse(spec.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("anthropic: base_url must be an absolute http(s) URL")
	}
	client := spec.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(spec.BaseURL),
		option.WithHTTPClient(client),
		option.WithMaxRetries(0),
	}
	if spec.APIKey != "" {
		opts = append(opts, option.WithAPIKey(spec.APIKey))
	}
	c := ant.NewClient(opts...)
	return &Model{spec: spec, svc: c.Messages}, nil
}

type block struct {
	kind  string // "text", "tool_use", or another kind we skip
	id    string
	name  string
	input string // the start event's input, used when no delta came
	args  strings.Builder
	delta bool
}

var _ agent.ImageInput = (*Model)(nil)

// TakesImages implements agent.ImageInput: the Messages API takes base64
// image blocks in user messages.
func (m *Model) TakesImages() bool { return true }

// Stream makes one streamed Messages call.
func (m *Model) Stream(ctx context.Context, req *agent.Request, sink agent.Sink) (*agent.Response, error) {
	var httpResp *http.Response
	stream := m.svc.NewStreaming(ctx, m.params(req), option.WithResponseInto(&httpResp))
	defer stream.Close()

	var (
		text     strings.Builder
		blocks   = map[int64]*block{}
		order    []*block
		stop     string
		finished bool
		usage    agent.Usage
		model    string
		size     int
	)
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "message_start":
			msg := ev.Message
			model = msg.Model
			u := msg.Usage
			usage.InputTokens = u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
			usage.OutputTokens = u.OutputTokens
		case "content_block_start":
			cb := ev.ContentBlock
			b := &block{kind: cb.Type, id: cb.ID, name: cb.Name}
			if cb.Type == "tool_use" && cb.Input != nil {
				if raw, err := json.Marshal(cb.Input); err == nil {
					b.input = string(raw)
				}
			}
			if cb.Type == "text" && cb.Text != "" {
				text.WriteString(cb.Text)
				if sink != nil {
					sink(agent.Delta{Text: cb.Text})
				}
			}
			blocks[ev.Index] = b
			order = append(order, b)
		case "content_block_delta":
			b := blocks[ev.Index]
			switch ev.Delta.Type {
			case "text_delta":
				if s := ev.Delta.Text; s != "" {
					text.WriteString(s)
					size += len(s)
					if sink != nil {
						sink(agent.Delta{Text: s})
					}
				}
			case "input_json_delta":
				if b != nil && b.kind == "tool_use" {
					b.args.WriteString(ev.Delta.PartialJSON)
					b.delta = true
					size += len(ev.Delta.PartialJSON)
				}
			}
		case "message_delta":
			if s := string(ev.Delta.StopReason); s != "" {
				stop = s
			}
			// message_delta usage is cumulative for the output.
			if ev.Usage.OutputTokens > 0 {
				usage.OutputTokens = ev.Usage.OutputTokens
			}
			if in := ev.Usage.InputTokens + ev.Usage.CacheCreationInputTokens + ev.Usage.CacheReadInputTokens; in > usage.InputTokens {
				usage.InputTokens = in
			}
		case "message_stop":
			finished = true
		}
		if size > agent.MaxResponseBytes {
			return nil, agent.TooLarge(m.spec)
		}
	}
	if err := stream.Err(); err != nil {
		return nil, m.classify(err, httpResp)
	}
	if !finished {
		return nil, agent.TransportError(m.spec, agent.ErrNoFinish, true)
	}
	resp := &agent.Response{Text: text.String(), Usage: usage, RawStop: stop, Model: model}
	for _, b := range order {
		if b.kind != "tool_use" {
			continue
		}
		args := b.args.String()
		if !b.delta {
			args = b.input // no input_json_delta: the start event held it all
		}
		resp.ToolCalls = append(resp.ToolCalls, agent.ToolCall{ID: b.id, Name: b.name, Arguments: args})
	}
	agent.EnsureCallIDs(resp.ToolCalls)
	resp.Stop = stopReason(stop, len(resp.ToolCalls) > 0)
	return resp, nil
}

func stopReason(stop string, calls bool) agent.StopReason {
	switch {
	case stop == "max_tokens" || stop == "model_context_window_exceeded":
		return agent.StopMaxTokens
	case calls:
		return agent.StopToolUse
	case stop == "end_turn" || stop == "stop_sequence" || stop == "tool_use":
		return agent.StopEnd
	case stop == "refusal":
		return agent.StopRefusal
	}
	return agent.StopOther
}

func (m *Model) classify(err error, resp *http.Response) error {
	var apiErr *ant.Error
	if errors.As(err, &apiErr) {
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		msg := apiErr.Message
		if msg == "" && apiErr.StatusCode >= 400 {
			msg = agent.BodyMessage(body(apiErr.Response)) // a proxy's page, not Anthropic's JSON
		}
		status := apiErr.StatusCode
		if status < 400 {
			// An error event inside a 200 stream (overloaded_error, …):
			// classify by its type; the server failed mid-turn.
			e := agent.HTTPError(m.spec, statusOfType(string(apiErr.Type())), nil, msg, err)
			e.Status = 0
			return e
		}
		return agent.HTTPError(m.spec, status, h, msg, err)
	}
	if resp != nil && resp.StatusCode >= 400 {
		return agent.HTTPError(m.spec, resp.StatusCode, resp.Header, agent.BodyMessage(body(resp)), err)
	}
	return agent.TransportError(m.spec, err, resp != nil)
}

func body(resp *http.Response) []byte {
	if resp == nil || resp.Body == nil {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return b
}

// statusOfType maps an error event's type to the status Anthropic gives the
// same error on a plain response.
func statusOfType(t string) int {
	switch t {
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "authentication_error":
		return http.StatusUnauthorized
	case "permission_error":
		return http.StatusForbidden
	case "invalid_request_error", "not_found_error", "billing_error":
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError // api_error, overloaded_error, timeout_error, unknown
}

func (m *Model) params(req *agent.Request) ant.MessageNewParams {
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = m.spec.MaxTokens
	}
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	p := ant.MessageNewParams{
		Model:     m.spec.Model,
		MaxTokens: int64(maxTokens),
		Messages:  messages(req),
	}
	if req.System != "" {
		p.System = []ant.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		tp := &ant.ToolParam{Name: t.Name, InputSchema: inputSchema(t.Schema)}
		if t.Description != "" {
			tp.Description = ant.String(t.Description)
		}
		p.Tools = append(p.Tools, ant.ToolUnionParam{OfTool: tp})
	}
	if len(req.Tools) > 0 && req.ToolChoice == agent.ToolsNone {
		p.ToolChoice = ant.ToolChoiceUnionParam{OfNone: &ant.ToolChoiceNoneParam{}}
	}
	return p
}

// inputSchema splits a JSON Schema into the SDK's fields; everything but
// type, properties and required travels as extra fields, unchanged.
func inputSchema(s map[string]any) ant.ToolInputSchemaParam {
	out := ant.ToolInputSchemaParam{Properties: s["properties"]}
	if out.Properties == nil {
		out.Properties = map[string]any{}
	}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				out.Required = append(out.Required, name)
			}
		}
	}
	for k, v := range s {
		switch k {
		case "type", "properties", "required":
		default:
			if out.ExtraFields == nil {
				out.ExtraFields = map[string]any{}
			}
			out.ExtraFields[k] = v
		}
	}
	return out
}

// messages maps the history. Tool results are user-role blocks in this API,
// and consecutive messages of one role are merged into one message, which
// also puts every result of a turn into the one user message that must
// follow it, results first.
func messages(req *agent.Request) []ant.MessageParam {
	var out []ant.MessageParam
	var role agent.Role
	var blocks []ant.ContentBlockParamUnion
	flush := func() {
		if len(blocks) == 0 {
			return
		}
		if role == agent.RoleAssistant {
			out = append(out, ant.NewAssistantMessage(blocks...))
		} else {
			out = append(out, ant.NewUserMessage(blocks...))
		}
		blocks = nil
	}
	for _, m := range req.Messages {
		r := m.Role
		if r == agent.RoleTool {
			r = agent.RoleUser
		}
		if r != role {
			flush()
			role = r
		}
		switch m.Role {
		case agent.RoleAssistant:
			if m.Text != "" {
				blocks = append(blocks, ant.NewTextBlock(m.Text))
			}
			for _, c := range m.ToolCalls {
				blocks = append(blocks, ant.NewToolUseBlock(safeID(c.ID), json.RawMessage(objectOrEmpty(c.Arguments)), c.Name))
			}
		case agent.RoleTool:
			blocks = append(blocks, ant.NewToolResultBlock(safeID(m.ToolCallID), m.Text, m.IsError))
		default:
			blocks = append(blocks, ant.NewTextBlock(m.Text))
			for _, im := range m.Images {
				blocks = append(blocks, ant.NewImageBlockBase64(im.MimeType, base64.StdEncoding.EncodeToString(im.Data)))
			}
		}
	}
	flush()
	return out
}

func objectOrEmpty(raw string) string {
	var v map[string]any
	if json.Unmarshal([]byte(raw), &v) != nil || v == nil {
		return "{}"
	}
	return raw
}

// safeID maps a call id from another provider's history to the pattern
// tool_use ids must match, ^[a-zA-Z0-9_-]+$, the same way each time.
func safeID(id string) string {
	if id == "" {
		return "call_"
	}
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}
