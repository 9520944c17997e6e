// Package openai is the agent.Model for `provider: openai`: Chat Completions
// streaming over github.com/openai/openai-go/v3, against OpenAI or any
// OpenAI-compatible server (vLLM, Ollama, LM Studio, LiteLLM) at base_url.
//
// Streamed tool calls are assembled here, keyed by (index, id), and
// finish_reason is not trusted: Ollama sends every parallel call at index 0,
// each with its own id, and then finish_reason "stop". A new id at an index
// starts a new call; a fragment without an id continues the index's latest
// call. The turn has tool calls when calls were assembled, whatever
// finish_reason said.
//
// The SDK's own retries are off (agent.Retrying is the one policy), and the
// client is built without the SDK's environment defaults: OPENAI_BASE_URL,
// OPENAI_API_KEY and friends reach a model only through the config.
package openai

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/opsgate/opsgate/core/agent"
)

// DefaultBaseURL is OpenAI's API, used when base_url is not configured.
const DefaultBaseURL = "https://api.openai.com/v1"

// Model streams turns from one configured model.
type Model struct {
	spec agent.ModelSpec
	svc  oai.ChatCompletionService
}

var _ agent.Model = (*Model)(nil)

// New returns the model for spec (Provider must be "openai").
func New(spec agent.ModelSpec) (*Model, error) {
	if spec.Provider != "" && spec.Provider != agent.ProviderOpenAI {
		return nil, fmt.Errorf("openai: provider is %q", spec.Provider)
	}
	if spec.Model == "" {
		return nil, errors.New("openai: no model id")
	}
	if spec.BaseURL == "" {
		spec.BaseURL = DefaultBaseURL
	}
	if u, err := url.Parse(spec.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: base_url must be an absolute http(s) URL")
	}
	client := spec.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	opts := []option.RequestOption{
		option.WithBaseURL(spec.BaseURL),
		option.WithHTTPClient(client),
		option.WithMaxRetries(0),
	}
	if spec.APIKey != "" {
		opts = append(opts, option.WithAPIKey(spec.APIKey))
	}
	// NewChatCompletionService, unlike NewClient, reads no environment.
	return &Model{spec: spec, svc: oai.NewChatCompletionService(opts...)}, nil
}

var _ agent.ImageInput = (*Model)(nil)

// TakesImages implements agent.ImageInput: Chat Completions takes image
// parts (image_url with a data URL) in user messages. A server whose model
// cannot see images refuses the request; leave "image" out of the agent's
// attachments.kinds for such a model.
func (m *Model) TakesImages() bool { return true }

// Stream makes one streamed Chat Completions call.
func (m *Model) Stream(ctx context.Context, req *agent.Request, sink agent.Sink) (*agent.Response, error) {
	var httpResp *http.Response
	stream := m.svc.NewStreaming(ctx, m.params(req), option.WithResponseInto(&httpResp))
	defer stream.Close()

	var (
		text     strings.Builder
		asm      assembler
		finish   string
		finished bool
		usage    agent.Usage
		model    string
		size     int
	)
	for stream.Next() {
		chunk := stream.Current()
		if chunk.Model != "" {
			model = chunk.Model
		}
		if chunk.JSON.Usage.Valid() {
			usage = agent.Usage{InputTokens: chunk.Usage.PromptTokens, OutputTokens: chunk.Usage.CompletionTokens}
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue // n is 1; another choice is not this turn
			}
			d := ch.Delta
			if s := d.Content + d.Refusal; s != "" {
				text.WriteString(s)
				size += len(s)
				if sink != nil {
					sink(agent.Delta{Text: s})
				}
			}
			for _, tc := range d.ToolCalls {
				size += len(tc.Function.Arguments)
				asm.add(tc.Index, tc.ID, tc.Function.Name, tc.Function.Arguments)
			}
			if ch.FinishReason != "" {
				finish, finished = ch.FinishReason, true
			}
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
	resp := &agent.Response{Text: text.String(), ToolCalls: asm.calls(), Usage: usage, RawStop: finish, Model: model}
	agent.EnsureCallIDs(resp.ToolCalls)
	resp.Stop = stopReason(finish, len(resp.ToolCalls) > 0)
	return resp, nil
}

func stopReason(finish string, calls bool) agent.StopReason {
	switch {
	case finish == "length":
		return agent.StopMaxTokens
	case calls:
		return agent.StopToolUse
	case finish == "stop":
		return agent.StopEnd
	case finish == "tool_calls" || finish == "function_call":
		return agent.StopEnd // said tool_calls but sent none
	case finish == "content_filter":
		return agent.StopRefusal
	}
	return agent.StopOther
}

func (m *Model) classify(err error, resp *http.Response) error {
	var apiErr *oai.Error
	if errors.As(err, &apiErr) {
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		msg := apiErr.Message
		if msg == "" {
			// Not OpenAI's {"error":{"message"}}: vLLM's {"message"}, a
			// proxy's page. The SDK put the body back for us to read.
			msg = agent.BodyMessage(body(apiErr.Response))
		}
		return agent.HTTPError(m.spec, apiErr.StatusCode, h, msg, err)
	}
	if resp != nil && resp.StatusCode >= 400 {
		// A body the SDK failed to decode at all, e.g. Ollama's
		// {"error":"model \"x\" not found"}: still an HTTP error,
		// classified by its status.
		return agent.HTTPError(m.spec, resp.StatusCode, resp.Header, agent.BodyMessage(body(resp)), err)
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		// {"error": {...}} in the middle of a stream: the server failed.
		e := agent.HTTPError(m.spec, http.StatusInternalServerError, nil, streamMessage(streamErr), err)
		e.Status = 0
		return e
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

func streamMessage(e *ssestream.StreamError) string {
	return strings.TrimPrefix(e.Message, "received error while streaming: ")
}

func (m *Model) params(req *agent.Request) oai.ChatCompletionNewParams {
	p := oai.ChatCompletionNewParams{
		Model:         shared.ChatModel(m.spec.Model),
		Messages:      messages(req),
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
	}
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = m.spec.MaxTokens
	}
	if maxTokens > 0 {
		// max_completion_tokens is what OpenAI's current models take
		// (max_tokens is refused by its reasoning models); vLLM and
		// LiteLLM read it, servers that do not ignore it.
		p.MaxCompletionTokens = param.NewOpt(int64(maxTokens))
	}
	for _, t := range req.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(t.Schema)}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, oai.ChatCompletionFunctionTool(fn))
	}
	if len(req.Tools) > 0 && req.ToolChoice == agent.ToolsNone {
		p.ToolChoice = oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt("none")}
	}
	return p
}

func messages(req *agent.Request) []oai.ChatCompletionMessageParamUnion {
	out := make([]oai.ChatCompletionMessageParamUnion, 0, len(req.Messages)+1)
	if req.System != "" {
		out = append(out, oai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		switch m.Role {
		case agent.RoleAssistant:
			a := oai.ChatCompletionAssistantMessageParam{}
			if m.Text != "" {
				a.Content.OfString = param.NewOpt(m.Text)
			}
			for _, c := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: c.Arguments},
					},
				})
			}
			out = append(out, oai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case agent.RoleTool:
			out = append(out, oai.ToolMessage(m.Text, m.ToolCallID))
		default:
			if len(m.Images) == 0 {
				out = append(out, oai.UserMessage(m.Text))
				continue
			}
			// The framed text first, then each fetched image as a data URL.
			parts := []oai.ChatCompletionContentPartUnionParam{oai.TextContentPart(m.Text)}
			for _, im := range m.Images {
				parts = append(parts, oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{
					URL: "data:" + im.MimeType + ";base64," + base64.StdEncoding.EncodeToString(im.Data)}))
			}
			out = append(out, oai.UserMessage(parts))
		}
	}
	return out
}

// assembler builds tool calls from stream fragments keyed by (index, id).
type assembler struct {
	list []*partial
	open map[int64]*partial // the latest call at each index
}

type partial struct {
	id, name string
	args     strings.Builder
}

func (a *assembler) add(index int64, id, name, args string) {
	if a.open == nil {
		a.open = map[int64]*partial{}
	}
	cur := a.open[index]
	if cur == nil || id != "" && cur.id != "" && id != cur.id {
		cur = &partial{id: id}
		a.list = append(a.list, cur)
		a.open[index] = cur
	}
	if cur.id == "" {
		cur.id = id
	}
	if cur.name == "" {
		cur.name = name // sent once; servers that repeat it repeat it whole
	}
	cur.args.WriteString(args)
}

func (a *assembler) calls() []agent.ToolCall {
	if len(a.list) == 0 {
		return nil
	}
	out := make([]agent.ToolCall, 0, len(a.list))
	for _, p := range a.list {
		out = append(out, agent.ToolCall{ID: p.id, Name: p.name, Arguments: p.args.String()})
	}
	return out
}
