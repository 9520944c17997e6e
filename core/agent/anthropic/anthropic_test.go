package anthropic_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/agent/anthropic"
	"github.com/opsgate/opsgate/internal/fakellm"
)

var srv *fakellm.Server

func TestMain(m *testing.M) {
	srv = fakellm.NewServer()
	code := m.Run()
	srv.Close()
	os.Exit(code)
}

func setup(t *testing.T) (*fakellm.Script, *anthropic.Model) {
	t.Helper()
	sc := srv.Script(t)
	m, err := anthropic.New(agent.ModelSpec{Name: "claude", Provider: "anthropic", BaseURL: sc.AnthropicURL(), APIKey: "sk-ant-test-key", Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	return sc, m
}

func noSleep(waits *[]time.Duration) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		*waits = append(*waits, d)
		return ctx.Err()
	}
}

func toolbox(t *testing.T) *agent.Toolbox {
	t.Helper()
	tb, err := agent.NewToolbox([]agent.Tool{
		{Name: "deploy", Description: "Deploy a service", Schema: map[string]any{"type": "object", "required": []any{"service"},
			"additionalProperties": false, "properties": map[string]any{"service": map[string]any{"type": "string"}}}},
		{Name: "fs.read_file"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func request(t *testing.T, text string) *agent.Request {
	req, _ := agent.BuildRequest(agent.SystemPrompt(""), []agent.Message{
		agent.UserMessage(time.Now(), agent.External("console", "console:admin", text)),
	}, toolbox(t), agent.Window{})
	return req
}

func TestStreamsTextAndUsage(t *testing.T) {
	t.Parallel()
	sc, m := setup(t)
	sc.Push(fakellm.Turn{Text: []string{"Hi", ", ", "there"}, InputTokens: 30, OutputTokens: 9})
	var deltas []string
	resp, err := m.Stream(context.Background(), request(t, "hello"), func(d agent.Delta) { deltas = append(deltas, d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hi, there" || strings.Join(deltas, "|") != "Hi|, |there" || resp.Stop != agent.StopEnd || resp.RawStop != "end_turn" {
		t.Errorf("resp = %+v, deltas %q", resp, deltas)
	}
	if resp.Usage != (agent.Usage{InputTokens: 30, OutputTokens: 9}) || resp.Model != "claude-test" {
		t.Errorf("usage %+v model %q", resp.Usage, resp.Model)
	}
	r := sc.Requests()[0]
	if r.Path != "/v1/messages" || r.Header.Get("Authorization") != "Bearer sk-ant-test-key" || r.Header.Get("Anthropic-Version") == "" {
		t.Errorf("path %q headers %v", r.Path, r.Header)
	}
	body := r.JSON()
	if body["model"] != "claude-test" || body["stream"] != true || body["max_tokens"] != float64(anthropic.DefaultMaxTokens) {
		t.Errorf("body = %v", body)
	}
	sys := body["system"].([]any)[0].(map[string]any)["text"].(string)
	if !strings.HasPrefix(sys, "You are an assistant inside opsgate") {
		t.Errorf("system = %q", sys)
	}
	tools := body["tools"].([]any)
	deploy := tools[0].(map[string]any)
	schema := deploy["input_schema"].(map[string]any)
	req := schema["required"].([]any)
	if deploy["name"] != "deploy" || schema["type"] != "object" || schema["additionalProperties"] != false || len(req) != 2 || req[1] != "reason" {
		t.Errorf("deploy tool = %v", deploy)
	}
	if tools[1].(map[string]any)["name"] != "fs__read_file" {
		t.Errorf("dotted tool name not mapped: %v", tools[1])
	}
}

func TestToolUseWithInputJSONDeltas(t *testing.T) {
	t.Parallel()
	sc, m := setup(t)
	a := `{"service":"api","reason":"asked to deploy"}`
	b := `{"path":"/srv/runbooks/api.md","reason":"read the runbook"}`
	sc.Push(fakellm.Turn{Text: []string{"Let me check."}, Calls: []fakellm.Call{{ID: "toolu_A", Name: "deploy", Args: a}, {ID: "toolu_B", Name: "fs__read_file", Args: b}}, Fragment: 4})
	resp, err := m.Stream(context.Background(), request(t, "deploy api"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Stop != agent.StopToolUse || len(resp.ToolCalls) != 2 || resp.Text != "Let me check." {
		t.Fatalf("resp = %+v", resp)
	}
	if resp.ToolCalls[0] != (agent.ToolCall{ID: "toolu_A", Name: "deploy", Arguments: a}) || resp.ToolCalls[1] != (agent.ToolCall{ID: "toolu_B", Name: "fs__read_file", Arguments: b}) {
		t.Errorf("calls = %+v", resp.ToolCalls)
	}
	c := toolbox(t).Resolve(resp.ToolCalls[1])
	if c.Tool != "fs.read_file" || c.Reason != "read the runbook" || c.Args["path"] != "/srv/runbooks/api.md" || len(c.Args) != 1 {
		t.Errorf("resolved = %+v", c)
	}
}

func TestToolUseWithoutDeltasUsesStartInput(t *testing.T) {
	t.Parallel()
	sc, m := setup(t)
	body := `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"deploy","input":{"service":"api"}}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":3}}

event: message_stop
data: {"type":"message_stop"}

`
	sc.Push(fakellm.Raw{Body: body})
	resp, err := m.Stream(context.Background(), request(t, "x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Arguments != `{"service":"api"}` || resp.Usage.OutputTokens != 3 {
		t.Errorf("resp = %+v", resp)
	}
}

func TestMalformedInputIsAValue(t *testing.T) {
	t.Parallel()
	sc, m := setup(t)
	sc.Push(fakellm.Turn{Calls: []fakellm.Call{{ID: "toolu_1", Name: "deploy", Args: `{"service": `}}})
	resp, err := m.Stream(context.Background(), request(t, "x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := toolbox(t).Resolve(resp.ToolCalls[0])
	if !strings.Contains(c.Problem, "not valid JSON") {
		t.Errorf("problem = %q", c.Problem)
	}
	// The botched call replays as {} next turn, which the API accepts.
	hist := []agent.Message{
		agent.UserMessage(time.Now(), agent.External("console", "", "x")),
		{Role: agent.RoleAssistant, Calls: []agent.Call{c}},
		agent.Outcome{Kind: agent.OutcomeInvalid}.Result(c, time.Now()),
	}
	req, _ := agent.BuildRequest("s", hist, toolbox(t), agent.Window{})
	sc.Push(fakellm.Say("sorry"))
	if _, err := m.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	msgs := sc.Requests()[1].JSON()["messages"].([]any)
	use := msgs[1].(map[string]any)["content"].([]any)[0].(map[string]any)
	if use["type"] != "tool_use" || len(use["input"].(map[string]any)) != 0 {
		t.Errorf("replayed tool_use = %v", use)
	}
	res := msgs[2].(map[string]any)["content"].([]any)[0].(map[string]any)
	if res["type"] != "tool_result" || res["is_error"] != true || res["tool_use_id"] != "toolu_1" {
		t.Errorf("tool_result = %v", res)
	}
}

func TestResultsAndNextMessageShareOneUserMessage(t *testing.T) {
	t.Parallel()
	sc, m := setup(t)
	tb := toolbox(t)
	c1 := tb.Resolve(agent.ToolCall{ID: "toolu_1", Name: "deploy", Arguments: `{"service":"a","reason":"r"}`})
	c2 := tb.Resolve(agent.ToolCall{ID: "toolu_2", Name: "deploy", Arguments: `{"service":"b","reason":"r"}`})
	hist := []agent.Message{
		agent.UserMessage(time.Now(), agent.External("slack", "slack:U1", "deploy a and b")),
		{Role: agent.RoleAssistant, Text: "Both.", Calls: []agent.Call{c1, c2}},
		agent.Outcome{Kind: agent.OutcomeRan, Output: "ok a"}.Result(c1, time.Now()),
		agent.Outcome{Kind: agent.OutcomeDenied, Rule: "policy.rules[2]"}.Result(c2, time.Now()),
		agent.UserMessage(time.Now(), agent.External("slack", "slack:U1", "why was b denied?")),
	}
	req, _ := agent.BuildRequest("s", hist, tb, agent.Window{})
	sc.Push(fakellm.Say("policy"))
	if _, err := m.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	msgs := sc.Requests()[0].JSON()["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("messages = %v", msgs)
	}
	last := msgs[2].(map[string]any)
	content := last["content"].([]any)
	kinds := []string{}
	for _, b := range content {
		kinds = append(kinds, b.(map[string]any)["type"].(string))
	}
	if last["role"] != "user" || strings.Join(kinds, ",") != "tool_result,tool_result,text" {
		t.Errorf("last = %v", last)
	}
	if !strings.Contains(strings.Join(sc.Requests()[0].Texts(), "\n"), "Denied by policy (rule policy.rules[2])") {
		t.Errorf("denied result = %v", content[1])
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		replies []fakellm.Reply
		kind    agent.ErrorKind
		status  int
		reqs    int
		waits   []time.Duration
		msg     string
	}{
		"RateLimitRetryAfter": {[]fakellm.Reply{fakellm.RateLimited("2")}, agent.ErrRateLimited, 429, 4, []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}, "rate limit"},
		"Overloaded529":       {[]fakellm.Reply{fakellm.HTTPError{Status: 529}}, agent.ErrServer, 529, 4, nil, "Overloaded"},
		"Internal500":         {[]fakellm.Reply{fakellm.HTTPError{Status: 500}}, agent.ErrServer, 500, 4, nil, "Internal server error"},
		"OverloadedEvent":     {[]fakellm.Reply{fakellm.Turn{Text: []string{"a"}, ErrorEvent: true}}, agent.ErrServer, 0, 4, nil, "Overloaded"},
		"Auth401":             {[]fakellm.Reply{fakellm.HTTPError{Status: 401}}, agent.ErrAuth, 401, 1, nil, "invalid x-api-key"},
		"TooLong400":          {[]fakellm.Reply{fakellm.HTTPError{Status: 400}}, agent.ErrRequest, 400, 1, nil, "prompt is too long"},
		"Broken":              {[]fakellm.Reply{fakellm.Turn{Text: []string{"a", "b"}, CutAfter: 4}}, agent.ErrStream, 0, 4, nil, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc, m := setup(t)
			for range 4 {
				sc.Push(tc.replies...)
			}
			var waits []time.Duration
			_, err := agent.Retrying(m, agent.RetryPolicy{Sleep: noSleep(&waits)}).Stream(context.Background(), request(t, "x"), nil)
			e := agent.AsError(err)
			if e == nil || e.Kind != tc.kind || e.Status != tc.status || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("err = %v (%+v)", err, e)
			}
			if n := len(sc.Requests()); n != tc.reqs {
				t.Errorf("%d requests, want %d", n, tc.reqs)
			}
			if tc.waits != nil && len(waits) != len(tc.waits) {
				t.Errorf("waits = %v, want %v", waits, tc.waits)
			}
			for i := range tc.waits {
				if waits[i] != tc.waits[i] {
					t.Errorf("wait %d = %v, want %v", i, waits[i], tc.waits[i])
				}
			}
			if strings.Contains(e.Error()+e.ThreadMessage(), "sk-ant-test-key") {
				t.Error("key leaked")
			}
			// The unused replies stay queued; drain them so the script ends clean.
			for sc.Pending() > 0 {
				_, _ = m.Stream(context.Background(), request(t, "x"), nil)
			}
		})
	}
}

func TestOverloadedThenSuccess(t *testing.T) {
	t.Parallel()
	sc, m := setup(t)
	sc.Push(fakellm.Turn{Text: []string{"lost"}, ErrorEvent: true}, fakellm.Say("kept"))
	var waits []time.Duration
	var deltas []agent.Delta
	resp, err := agent.Retrying(m, agent.RetryPolicy{Sleep: noSleep(&waits)}).Stream(context.Background(), request(t, "x"), func(d agent.Delta) { deltas = append(deltas, d) })
	if err != nil || resp.Text != "kept" {
		t.Fatalf("resp %+v err %v", resp, err)
	}
	if len(deltas) != 3 || !deltas[1].Restart || len(waits) != 1 {
		t.Errorf("deltas %+v waits %v", deltas, waits)
	}
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	m, err := anthropic.New(agent.ModelSpec{Name: "claude", BaseURL: strings.TrimSuffix(fakellm.RefusedURL(), "/v1"), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Stream(context.Background(), request(t, "x"), nil)
	e := agent.AsError(err)
	if e == nil || e.Kind != agent.ErrUnreachable || !strings.Contains(e.ThreadMessage(), "could not be reached") {
		t.Fatalf("err = %v", err)
	}
}

func TestIgnoresSDKEnvironment(t *testing.T) {
	sc := srv.Script(t)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	m, err := anthropic.New(agent.ModelSpec{BaseURL: sc.AnthropicURL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	sc.Push(fakellm.Say("ok"))
	if _, err := m.Stream(context.Background(), request(t, "x"), nil); err != nil {
		t.Fatal(err)
	}
	if h := sc.Requests()[0].Header; h.Get("X-Api-Key") != "" || h.Get("Authorization") != "" {
		t.Errorf("environment leaked into the request: %v", h)
	}
}

func TestToolsNone(t *testing.T) {
	t.Parallel()
	sc, m := setup(t)
	sc.Push(fakellm.Say("final"))
	req := request(t, "x")
	req.ToolChoice = agent.ToolsNone
	if _, err := m.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	if tc, _ := sc.Requests()[0].JSON()["tool_choice"].(map[string]any); tc["type"] != "none" {
		t.Errorf("tool_choice = %v", sc.Requests()[0].JSON()["tool_choice"])
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	sc, m := setup(t)
	sc.Push(fakellm.Hang{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := m.Stream(ctx, request(t, "x"), nil); done <- err }()
	for len(sc.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestNonStandardErrorBody(t *testing.T) {
	t.Parallel()
	sc, m := setup(t)
	sc.Push(fakellm.Raw{Status: 502, Header: http.Header{"Content-Type": {"text/html"}}, Body: "<html>502 Bad Gateway</html>"})
	_, err := m.Stream(context.Background(), request(t, "x"), nil)
	if e := agent.AsError(err); e == nil || e.Kind != agent.ErrServer || e.Status != 502 || !strings.Contains(e.Message, "502 Bad Gateway") {
		t.Fatalf("err = %v", err)
	}
}
