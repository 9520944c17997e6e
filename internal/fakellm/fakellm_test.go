package fakellm_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/internal/fakellm"
)

func TestScriptsAreSeparateAndRecorded(t *testing.T) {
	srv := fakellm.NewServer()
	defer srv.Close()
	a, b := srv.Script(t), srv.Script(t)
	a.Push(fakellm.Say("from a"))
	b.Push(fakellm.HTTPError{Status: 429, RetryAfter: "3"})
	resp, err := http.Post(b.OpenAIURL()+"/chat/completions", "application/json", strings.NewReader(`{"model":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" || !strings.Contains(string(body), `"code":"rate_limit_exceeded"`) {
		t.Errorf("b got %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if len(a.Requests()) != 0 || len(b.Requests()) != 1 || b.Requests()[0].Format != "openai" || a.Pending() != 1 {
		t.Errorf("a %d requests (%d pending), b %d", len(a.Requests()), a.Pending(), len(b.Requests()))
	}
	resp, err = http.Post(a.AnthropicURL()+"/v1/messages", "application/json", strings.NewReader(`{"model":"claude"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, ev := range []string{"event: message_start", "event: content_block_delta", `"text":"from a"`, "event: message_stop", `"model":"claude"`} {
		if !strings.Contains(string(body), ev) {
			t.Errorf("anthropic stream lacks %q:\n%s", ev, body)
		}
	}
}

func TestOpenAIWireFormat(t *testing.T) {
	srv := fakellm.NewServer()
	defer srv.Close()
	sc := srv.Script(t)
	sc.Push(fakellm.Turn{Calls: []fakellm.Call{{ID: "call_1", Name: "deploy", Args: `{"service":"api"}`}}, Fragment: 5, InputTokens: 3, OutputTokens: 4})
	resp, err := http.Post(sc.OpenAIURL()+"/chat/completions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s := string(body)
	for _, want := range []string{
		`"tool_calls":[{"function":{"arguments":"","name":"deploy"},"id":"call_1","index":0,"type":"function"}]`,
		`"tool_calls":[{"function":{"arguments":"{\"ser"},"index":0}]`,
		`"finish_reason":"tool_calls"`,
		`"usage":{"completion_tokens":4,"prompt_tokens":3,"total_tokens":7}`,
		"data: [DONE]\n\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("stream lacks %s:\n%s", want, s)
		}
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Errorf("content type %q", resp.Header.Get("Content-Type"))
	}
}

type stubTB struct {
	cleanups []func()
	errors   []string
}

func (s *stubTB) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }
func (s *stubTB) Errorf(format string, args ...any) {
	s.errors = append(s.errors, fmt.Sprintf(format, args...))
}

func TestUnscriptedRequestsAreReported(t *testing.T) {
	srv := fakellm.NewServer()
	defer srv.Close()
	stub := &stubTB{}
	sc := srv.Script(stub)
	resp, err := http.Post(sc.OpenAIURL()+"/chat/completions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 || sc.Unscripted() != 1 {
		t.Errorf("status %d, unscripted %d", resp.StatusCode, sc.Unscripted())
	}
	for _, f := range stub.cleanups {
		f()
	}
	if len(stub.errors) != 1 || !strings.Contains(stub.errors[0], "1 request(s) found no scripted reply") {
		t.Errorf("errors = %q", stub.errors)
	}
	// After cleanup the script's URLs are gone.
	resp, err = http.Post(sc.OpenAIURL()+"/chat/completions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("after cleanup: %d", resp.StatusCode)
	}
}

func TestModelLoopingIsStatelessAndConcurrent(t *testing.T) {
	t.Parallel()
	m := fakellm.Looping(agent.ToolCall{Name: "status", Arguments: `{}`}, 3, "done")
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs := []agent.RequestMessage{{Role: agent.RoleUser, Text: "go"}}
			for turn := 0; ; turn++ {
				resp, err := m.Stream(context.Background(), &agent.Request{Messages: msgs}, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if len(resp.ToolCalls) == 0 {
					if turn != 3 || resp.Text != "done" {
						t.Errorf("ended after %d turns with %q", turn, resp.Text)
					}
					return
				}
				c := resp.ToolCalls[0]
				msgs = append(msgs, agent.RequestMessage{Role: agent.RoleAssistant, ToolCalls: resp.ToolCalls},
					agent.RequestMessage{Role: agent.RoleTool, ToolCallID: c.ID, Text: "ok"})
			}
		}()
	}
	wg.Wait()
	if m.Calls() != 8*4 {
		t.Errorf("calls = %d", m.Calls())
	}
}

func TestModelReplies(t *testing.T) {
	t.Parallel()
	m := fakellm.Replies(&agent.Response{Text: "one"})
	var got []string
	resp, err := m.Stream(context.Background(), &agent.Request{System: "s"}, func(d agent.Delta) { got = append(got, d.Text) })
	if err != nil || resp.Text != "one" || resp.Stop != agent.StopEnd || len(got) != 1 || len(m.Requests()) != 1 {
		t.Fatalf("resp %+v err %v deltas %v", resp, err, got)
	}
	if _, err := m.Stream(context.Background(), &agent.Request{}, nil); !errors.Is(err, fakellm.ErrNoReply) {
		t.Errorf("err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Stream(ctx, &agent.Request{}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
