package openai_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/agent/openai"
	"github.com/opsgate/opsgate/internal/fakellm"
)

var srv *fakellm.Server

func TestMain(m *testing.M) {
	srv = fakellm.NewServer()
	code := m.Run()
	srv.Close()
	os.Exit(code)
}

type bundle struct {
	sc     *fakellm.Script
	model  *openai.Model
	sleeps *[]time.Duration
}

func setup(t *testing.T, key string) bundle {
	t.Helper()
	sc := srv.Script(t)
	m, err := openai.New(agent.ModelSpec{Name: "default", Provider: "openai", BaseURL: sc.OpenAIURL(), APIKey: key, Model: "gpt-test", MaxTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	return bundle{sc: sc, model: m, sleeps: new([]time.Duration)}
}

// retrying wraps the model with a policy whose waits are recorded, not slept.
func (b bundle) retrying(p agent.RetryPolicy) agent.Model {
	var mu sync.Mutex
	p.Sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		*b.sleeps = append(*b.sleeps, d)
		mu.Unlock()
		return ctx.Err()
	}
	return agent.Retrying(b.model, p)
}

func toolbox(t *testing.T) *agent.Toolbox {
	t.Helper()
	tb, err := agent.NewToolbox([]agent.Tool{
		{Name: "deploy", Description: "Deploy a service", Schema: map[string]any{"type": "object", "required": []any{"service"},
			"properties": map[string]any{"service": map[string]any{"type": "string"}}}},
		{Name: "github.search", Description: "Search GitHub"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func request(t *testing.T, text string) *agent.Request {
	req, _ := agent.BuildRequest(agent.SystemPrompt("Be brief."), []agent.Message{
		agent.UserMessage(time.Now(), agent.External("console", "console:admin", text)),
	}, toolbox(t), agent.Window{})
	return req
}

func TestStreamsTextAndUsage(t *testing.T) {
	t.Parallel()
	b := setup(t, "sk-test-key")
	b.sc.Push(fakellm.Turn{Text: []string{"Hel", "lo", " there"}, InputTokens: 42, OutputTokens: 7})
	var deltas []string
	resp, err := b.model.Stream(context.Background(), request(t, "hi"), func(d agent.Delta) { deltas = append(deltas, d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hello there" || strings.Join(deltas, "|") != "Hel|lo| there" {
		t.Errorf("text = %q, deltas = %q", resp.Text, deltas)
	}
	if resp.Usage != (agent.Usage{InputTokens: 42, OutputTokens: 7}) || resp.Stop != agent.StopEnd || resp.Model != "gpt-test" {
		t.Errorf("resp = %+v", resp)
	}
	reqs := b.sc.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test-key" {
		t.Errorf("Authorization = %q", got)
	}
	body := r.JSON()
	if body["model"] != "gpt-test" || body["stream"] != true || body["max_completion_tokens"] != float64(512) {
		t.Errorf("body = %v", body)
	}
	if so, _ := body["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("stream_options = %v", body["stream_options"])
	}
	msgs := body["messages"].([]any)
	if len(msgs) != 2 || msgs[0].(map[string]any)["role"] != "system" || msgs[1].(map[string]any)["role"] != "user" {
		t.Fatalf("messages = %v", msgs)
	}
	tools := body["tools"].([]any)
	var names []string
	for _, tl := range tools {
		fn := tl.(map[string]any)["function"].(map[string]any)
		names = append(names, fn["name"].(string))
		params := fn["parameters"].(map[string]any)
		if fn["name"] != "ask_user" && params["properties"].(map[string]any)["reason"] == nil {
			t.Errorf("tool %v has no reason property: %v", fn["name"], params)
		}
	}
	if strings.Join(names, ",") != "deploy,github__search,ask_user" {
		t.Errorf("tool names = %v", names)
	}
	if _, ok := body["tool_choice"]; ok {
		t.Errorf("tool_choice sent by default: %v", body["tool_choice"])
	}
}

func TestNoAPIKeySendsNoAuthorization(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.sc.Push(fakellm.Say("ok"))
	if _, err := b.model.Stream(context.Background(), request(t, "hi"), nil); err != nil {
		t.Fatal(err)
	}
	if got := b.sc.Requests()[0].Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none (Ollama needs no key)", got)
	}
}

func TestIgnoresSDKEnvironment(t *testing.T) {
	// Not parallel: it sets the SDK's environment variables.
	sc := srv.Script(t)
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_ORG_ID", "org-env")
	m, err := openai.New(agent.ModelSpec{BaseURL: sc.OpenAIURL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	sc.Push(fakellm.Say("ok"))
	if _, err := m.Stream(context.Background(), request(t, "hi"), nil); err != nil {
		t.Fatal(err)
	}
	h := sc.Requests()[0].Header
	if h.Get("Authorization") != "" || h.Get("OpenAI-Organization") != "" {
		t.Errorf("environment leaked into the request: %v", h)
	}
}

func TestAssemblesFragmentedToolCall(t *testing.T) {
	t.Parallel()
	b := setup(t, "k")
	args := `{"service":"api","reason":"the user asked for a deploy of api"}`
	b.sc.Push(fakellm.Turn{Text: []string{"Deploying."}, Calls: []fakellm.Call{{ID: "call_1", Name: "deploy", Args: args}}, Fragment: 3})
	resp, err := b.model.Stream(context.Background(), request(t, "deploy api"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0] != (agent.ToolCall{ID: "call_1", Name: "deploy", Arguments: args}) {
		t.Fatalf("calls = %+v", resp.ToolCalls)
	}
	if resp.Stop != agent.StopToolUse || resp.RawStop != "tool_calls" || resp.Text != "Deploying." {
		t.Errorf("resp = %+v", resp)
	}
	c := toolbox(t).Resolve(resp.ToolCalls[0])
	if c.Problem != "" || c.Reason != "the user asked for a deploy of api" || len(c.Args) != 1 || c.Args["service"] != "api" {
		t.Errorf("resolved = %+v", c)
	}
}

func TestParallelCalls(t *testing.T) {
	t.Parallel()
	calls := []fakellm.Call{
		{ID: "call_a", Name: "deploy", Args: `{"service":"api","reason":"one"}`},
		{ID: "call_b", Name: "github__search", Args: `{"q":"flaky test","reason":"two"}`},
		{ID: "call_c", Name: "deploy", Args: `{"service":"web","reason":"three"}`},
	}
	for name, turn := range map[string]fakellm.Turn{
		"Sequential":  {Calls: calls, Fragment: 5},
		"Interleaved": {Calls: calls, Fragment: 4, Interleave: true},
		// Ollama: every call at index 0 with its own id, finish_reason "stop".
		"OllamaIndexZeroAndStop": {Calls: calls, Ollama: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "")
			b.sc.Push(turn)
			resp, err := b.model.Stream(context.Background(), request(t, "go"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.ToolCalls) != len(calls) {
				t.Fatalf("got %d calls: %+v", len(resp.ToolCalls), resp.ToolCalls)
			}
			for i, c := range calls {
				if got := resp.ToolCalls[i]; got != (agent.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Args}) {
					t.Errorf("call %d = %+v, want %+v", i, got, c)
				}
			}
			if resp.Stop != agent.StopToolUse {
				t.Errorf("stop = %q (raw %q), want tool_use from the calls themselves", resp.Stop, resp.RawStop)
			}
			if tb := toolbox(t); tb.Resolve(resp.ToolCalls[1]).Tool != "github.search" {
				t.Errorf("wire name not mapped back: %+v", tb.Resolve(resp.ToolCalls[1]))
			}
		})
	}
}

func TestCallsWithoutIDsGetUniqueOnes(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	body := "data: " + `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"type":"function","function":{"name":"deploy","arguments":"{}"}}]},"finish_reason":null}]}` + "\n\n" +
		"data: " + `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"type":"function","function":{"name":"deploy","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	b.sc.Push(fakellm.Raw{Body: body})
	resp, err := b.model.Stream(context.Background(), request(t, "go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 2 || resp.ToolCalls[0].ID == "" || resp.ToolCalls[0].ID == resp.ToolCalls[1].ID {
		t.Errorf("calls = %+v", resp.ToolCalls)
	}
}

func TestMalformedArgumentsAreAValue(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.sc.Push(fakellm.Turn{Calls: []fakellm.Call{
		{ID: "c1", Name: "deploy", Args: `{"service": "api", "reason": "x"`},
		{ID: "c2", Name: "deploy", Args: `["api"]`},
		{ID: "c3", Name: "nosuch", Args: `{}`},
	}})
	resp, err := b.model.Stream(context.Background(), request(t, "go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tb := toolbox(t)
	want := []string{"not valid JSON", "must be a JSON object, not an array", `no tool named "nosuch"`}
	for i, tc := range resp.ToolCalls {
		c := tb.Resolve(tc)
		if !strings.Contains(c.Problem, want[i]) || c.Args != nil {
			t.Errorf("call %d: problem %q, want %q", i, c.Problem, want[i])
		}
		res := agent.Outcome{Kind: agent.OutcomeInvalid}.Result(c, time.Now())
		if !res.IsError || res.CallID != tc.ID {
			t.Errorf("result = %+v", res)
		}
	}
}

func TestHistoryShape(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	tb := toolbox(t)
	call := tb.Resolve(agent.ToolCall{ID: "call_9", Name: "github__search", Arguments: `{"q":"x","reason":"look"}`})
	hist := []agent.Message{
		agent.UserMessage(time.Now(), agent.External("slack", "slack:U1", "find x")),
		{Role: agent.RoleAssistant, Text: "Searching.", Calls: []agent.Call{call}},
		agent.Outcome{Kind: agent.OutcomeRan, Output: "found 3"}.Result(call, time.Now()),
	}
	req, _ := agent.BuildRequest("sys", hist, tb, agent.Window{})
	req.ToolChoice = agent.ToolsNone
	b.sc.Push(fakellm.Say("done"))
	if _, err := b.model.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	body := b.sc.Requests()[0].JSON()
	if body["tool_choice"] != "none" {
		t.Errorf("tool_choice = %v", body["tool_choice"])
	}
	msgs := body["messages"].([]any)
	asst := msgs[2].(map[string]any)
	tc := asst["tool_calls"].([]any)[0].(map[string]any)
	fn := tc["function"].(map[string]any)
	if asst["role"] != "assistant" || asst["content"] != "Searching." || tc["id"] != "call_9" || fn["name"] != "github__search" || fn["arguments"] != `{"q":"x","reason":"look"}` {
		t.Errorf("assistant = %v", asst)
	}
	tool := msgs[3].(map[string]any)
	if tool["role"] != "tool" || tool["tool_call_id"] != "call_9" || !strings.Contains(tool["content"].(string), `<external_content source="tool:github.search">`) {
		t.Errorf("tool = %v", tool)
	}
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.sc.Push(fakellm.RateLimited("3"), fakellm.Say("ok"))
	resp, err := b.retrying(agent.RetryPolicy{}).Stream(context.Background(), request(t, "hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "ok" || len(b.sc.Requests()) != 2 {
		t.Errorf("text %q after %d requests", resp.Text, len(b.sc.Requests()))
	}
	if len(*b.sleeps) != 1 || (*b.sleeps)[0] != 3*time.Second {
		t.Errorf("waits = %v, want exactly the Retry-After of 3s", *b.sleeps)
	}
}

func TestRateLimitBeyondMaxEndsTheTurn(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.sc.Push(fakellm.RateLimited("120"))
	_, err := b.retrying(agent.RetryPolicy{MaxRetryAfter: time.Minute}).Stream(context.Background(), request(t, "hi"), nil)
	e := agent.AsError(err)
	if e == nil || e.Kind != agent.ErrRateLimited || e.RetryAfter != 2*time.Minute || e.Status != 429 {
		t.Fatalf("err = %v (%+v)", err, e)
	}
	if len(b.sc.Requests()) != 1 || len(*b.sleeps) != 0 {
		t.Errorf("retried early: %d requests, waits %v", len(b.sc.Requests()), *b.sleeps)
	}
	if !strings.Contains(e.Message, "Rate limit reached") || !strings.Contains(e.ThreadMessage(), "rate limited") {
		t.Errorf("message = %q / %q", e.Message, e.ThreadMessage())
	}
}

func TestServerErrorsBackOffThenSucceed(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.sc.Push(fakellm.HTTPError{Status: 500}, fakellm.HTTPError{Status: 503}, fakellm.Say("ok"))
	resp, err := b.retrying(agent.RetryPolicy{BaseDelay: 100 * time.Millisecond}).Stream(context.Background(), request(t, "hi"), nil)
	if err != nil || resp.Text != "ok" {
		t.Fatalf("resp %+v, err %v", resp, err)
	}
	w := *b.sleeps
	if len(w) != 2 || w[0] > 100*time.Millisecond || w[0] < 75*time.Millisecond || w[1] > 200*time.Millisecond || w[1] < 150*time.Millisecond {
		t.Errorf("waits = %v, want ~100ms then ~200ms", w)
	}
}

func TestServerErrorsAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	for range 3 {
		b.sc.Push(fakellm.HTTPError{Status: 500})
	}
	_, err := b.retrying(agent.RetryPolicy{MaxAttempts: 3}).Stream(context.Background(), request(t, "hi"), nil)
	e := agent.AsError(err)
	if e == nil || e.Kind != agent.ErrServer || e.Status != 500 || !strings.Contains(e.Message, "The server had an error") {
		t.Fatalf("err = %v", err)
	}
	if len(b.sc.Requests()) != 3 {
		t.Errorf("%d requests, want 3", len(b.sc.Requests()))
	}
}

func TestAuthErrorIsNotRetriedAndScrubbed(t *testing.T) {
	t.Parallel()
	b := setup(t, "sk-secret-12345")
	b.sc.Push(fakellm.HTTPError{Status: 401, Message: "Incorrect API key provided: sk-secret-12345."})
	_, err := b.retrying(agent.RetryPolicy{}).Stream(context.Background(), request(t, "hi"), nil)
	e := agent.AsError(err)
	if e == nil || e.Kind != agent.ErrAuth || len(b.sc.Requests()) != 1 {
		t.Fatalf("err = %v after %d requests", err, len(b.sc.Requests()))
	}
	for _, s := range []string{e.Error(), e.ThreadMessage(), e.Message} {
		if strings.Contains(s, "sk-secret-12345") {
			t.Errorf("key leaked: %q", s)
		}
	}
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	base := fakellm.RefusedURL()
	m, err := openai.New(agent.ModelSpec{Name: "local", BaseURL: base, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	r := agent.Retrying(m, agent.RetryPolicy{MaxAttempts: 2, Sleep: func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	}})
	_, err = r.Stream(context.Background(), request(t, "hi"), nil)
	e := agent.AsError(err)
	if e == nil || e.Kind != agent.ErrUnreachable || len(waits) != 1 {
		t.Fatalf("err = %v, waits %v", err, waits)
	}
	msg := e.ThreadMessage()
	if !strings.Contains(msg, `The model "local" could not be reached at 127.0.0.1:`) || !strings.Contains(msg, "connection refused") {
		t.Errorf("thread message = %q", msg)
	}
}

func TestBrokenStreamIsRetriedWithRestart(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.sc.Push(fakellm.Turn{Text: []string{"par", "tial", "never"}, CutAfter: 3}, fakellm.Say("whole"))
	var got []agent.Delta
	resp, err := b.retrying(agent.RetryPolicy{}).Stream(context.Background(), request(t, "hi"), func(d agent.Delta) { got = append(got, d) })
	if err != nil {
		t.Fatal(err)
	}
	want := []agent.Delta{{Text: "par"}, {Text: "tial"}, {Restart: true}, {Text: "whole"}}
	if resp.Text != "whole" || len(got) != len(want) {
		t.Fatalf("text %q, deltas %+v", resp.Text, got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("delta %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestStreamWithoutFinishIsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.sc.Push(fakellm.Raw{Body: "data: " + `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"half"},"finish_reason":null}]}` + "\n\n"})
	_, err := b.model.Stream(context.Background(), request(t, "hi"), nil)
	if e := agent.AsError(err); e == nil || e.Kind != agent.ErrStream || !errors.Is(err, agent.ErrNoFinish) {
		t.Fatalf("err = %v", err)
	}
}

func TestErrorEventMidStream(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.sc.Push(fakellm.Turn{Text: []string{"a"}, ErrorEvent: true})
	_, err := b.model.Stream(context.Background(), request(t, "hi"), nil)
	if e := agent.AsError(err); e == nil || e.Kind != agent.ErrServer || !e.Retryable() || !strings.Contains(e.Message, "server had an error") {
		t.Fatalf("err = %v", err)
	}
}

func TestMalformedChunkIsAStreamError(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.sc.Push(fakellm.Raw{Body: "data: {not json\n\n"})
	_, err := b.model.Stream(context.Background(), request(t, "hi"), nil)
	if e := agent.AsError(err); e == nil || e.Kind != agent.ErrStream {
		t.Fatalf("err = %v", err)
	}
}

func TestTurnTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.sc.Push(fakellm.Hang{})
	_, err := agent.Retrying(b.model, agent.RetryPolicy{Timeout: 100 * time.Millisecond}).Stream(context.Background(), request(t, "hi"), nil)
	e := agent.AsError(err)
	if e == nil || e.Kind != agent.ErrTimeout || !strings.Contains(e.ThreadMessage(), "did not answer in time") {
		t.Fatalf("err = %v", err)
	}
}

func TestCancelIsNotAModelError(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.sc.Push(fakellm.Hang{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.retrying(agent.RetryPolicy{}).Stream(ctx, request(t, "hi"), nil)
		done <- err
	}()
	for len(b.sc.Requests()) == 0 {
		time.Sleep(time.Millisecond) // wait for the request to arrive, then cancel
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || agent.AsError(err) != nil {
		t.Fatalf("err = %v", err)
	}
}

// Error bodies that are not OpenAI's own shape are still HTTP errors,
// classified by status, with the server's words.
func TestCompatibleServersErrorBodies(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		reply fakellm.Raw
		kind  agent.ErrorKind
		msg   string
	}{
		"OllamaModelNotFound": {fakellm.Raw{Status: 404, Header: jsonHeader, Body: `{"error":"model \"qwen3:8b\" not found, try pulling it first"}`}, agent.ErrRequest, `model "qwen3:8b" not found, try pulling it first`},
		"VLLMError":           {fakellm.Raw{Status: 400, Header: jsonHeader, Body: `{"object":"error","message":"This model's maximum context length is 8192 tokens.","type":"BadRequestError","param":null,"code":400}`}, agent.ErrRequest, "maximum context length is 8192"},
		"ProxyHTML502":        {fakellm.Raw{Status: 502, Header: http.Header{"Content-Type": {"text/html"}}, Body: "<html><body><h1>502 Bad Gateway</h1></body></html>"}, agent.ErrServer, "502 Bad Gateway"},
		"PlainText503":        {fakellm.Raw{Status: 503, Header: http.Header{"Content-Type": {"text/plain"}}, Body: "upstream connect error"}, agent.ErrServer, "upstream connect error"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "")
			b.sc.Push(tc.reply)
			_, err := b.model.Stream(context.Background(), request(t, "hi"), nil)
			e := agent.AsError(err)
			if e == nil || e.Kind != tc.kind || e.Status != tc.reply.Status || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("err = %v (%+v)", err, e)
			}
		})
	}
}

var jsonHeader = http.Header{"Content-Type": {"application/json"}}
