package upstream

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/tools"
)

// Upstream servers that ask (elicitation) and report progress, written
// with the go-sdk server: at 2026-07-28 a tool asks in its result (input
// requests) and is called again with the answer; at 2025-11-25 it sends
// elicitation/create during the call. Either way the question reaches the
// run's PeopleAsker, and what people answered reaches the server typed as
// its schema says.

// deploySchema is the form the test servers ask.
var deploySchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"env":      map[string]any{"type": "string", "title": "Environment", "enum": []any{"staging", "prod"}},
		"replicas": map[string]any{"type": "integer", "title": "Replicas", "minimum": 1, "maximum": 9},
		"force":    map[string]any{"type": "boolean", "title": "Skip the canary"},
		"note":     map[string]any{"type": "string", "title": "Note"},
	},
	"required": []any{"env", "replicas"},
}

// askingServer serves tools "deploy" (asks deploySchema, answers with
// what it got) and "slow" (reports progress twice, each time waiting
// until seen says the client got it, as long work reports while it runs)
// over Streamable HTTP, speaking only version.
func askingServer(t *testing.T, version string, seen ...chan struct{}) Server {
	t.Helper()
	opts := &mcp.ServerOptions{}
	if version < "2026-07-28" {
		opts.SupportedProtocolVersions = []string{version}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, opts)
	srv.AddTool(&mcp.Tool{Name: "deploy", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var res *mcp.ElicitResult
			params := &mcp.ElicitParams{Message: "Where should the deploy go?", RequestedSchema: deploySchema}
			if version >= "2026-07-28" {
				raw, ok := req.Params.InputResponses["where"]
				if !ok {
					return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"where": params}}, nil
				}
				res, _ = raw.(*mcp.ElicitResult)
				if res == nil {
					b, _ := json.Marshal(raw)
					_ = json.Unmarshal(b, &res)
				}
			} else {
				var err error
				if res, err = req.Session.Elicit(ctx, params); err != nil {
					return nil, err
				}
			}
			b, _ := json.Marshal(res.Content)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action + " " + string(b)}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "slow", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tok := req.Params.GetProgressToken()
			if tok == nil {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "no progress token"}}}, nil
			}
			for i, msg := range []string{"copying", "verifying"} {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i + 1), Total: 2, Message: msg}); err != nil {
					return nil, err
				}
				if i < len(seen) {
					select {
					case <-seen[i]:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	// 2026-07-28 is stateless: the client discovers the server instead of
	// initializing a session.
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: version >= "2026-07-28"}))
	t.Cleanup(hs.Close)
	return Server{Name: "up", URL: hs.URL, ConnectTimeout: 20 * time.Second, CallTimeout: time.Minute,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
}

// people is a PeopleAsker that answers from a script and records what
// it was asked.
type people struct {
	mu      sync.Mutex
	intros  []string
	asks    []agent.Ask
	answers []agent.PeopleAnswer
}

func (p *people) ask(_ context.Context, intro string, ask agent.Ask) (agent.PeopleAnswer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.intros, p.asks = append(p.intros, intro), append(p.asks, ask)
	if len(p.answers) == 0 {
		return agent.PeopleAnswer{Why: "nobody answered"}, nil
	}
	a := p.answers[0]
	p.answers = p.answers[1:]
	return a, nil
}

// answers is a reply to the deploy form, question by question.
func answers(by string, kv ...string) agent.PeopleAnswer {
	var r agent.Reply
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			r.Answers = append(r.Answers, agent.Answer{QuestionID: kv[i], IsSkipped: true})
			continue
		}
		r.Answers = append(r.Answers, agent.Answer{QuestionID: kv[i], Answer: kv[i+1]})
	}
	return agent.PeopleAnswer{Answered: true, Reply: r, By: by}
}

func callAsking(t *testing.T, r *Registry, name string, p *people, out tools.OutputSink) (tools.Result, error) {
	t.Helper()
	tl := lookup(t, r, name)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if p != nil {
		ctx = agent.WithPeopleAsker(ctx, p.ask)
	}
	return tl.Runner.Run(ctx, tools.Call{RunID: "run-1", IdempotencyKey: "run-1/0", Output: out})
}

// TestElicitationBecomesAQuestionToPeople: on both protocol generations
// the form becomes questions (a choice, a number, a yes-or-no, an
// optional text), the answer goes back accepted and typed as the schema
// says; an answer the schema refuses is asked again saying why; nobody
// answering declines; a run that ended cancels; a call outside a run's
// dispatch is refused, naming why.
func TestElicitationBecomesAQuestionToPeople(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			r, logs := start(t, askingServer(t, version))
			p := &people{answers: []agent.PeopleAnswer{
				answers("slack:UBOB", "env", "prod", "replicas", "12", "force", "yes", "note", ""), // 12 > maximum 9
				answers("slack:UBOB", "env", "prod", "replicas", "3", "force", "yes", "note", ""),
			}}
			res, err := callAsking(t, r, "up.deploy", p, nil)
			if err != nil || res.Output != `accept {"env":"prod","force":true,"replicas":3}` {
				t.Fatalf("deploy: %q %v", res.Output, err)
			}
			if len(p.asks) != 2 || !strings.Contains(p.intros[0], "up.deploy asks: Where should the deploy go?") ||
				!strings.Contains(p.intros[1], "did not fit") || !strings.Contains(p.intros[1], "replicas") {
				t.Fatalf("intros %q", p.intros)
			}
			qs := p.asks[0].Questions
			if len(qs) != 4 || qs[0].ID != "env" || qs[0].Kind != agent.QuestionChoice || strings.Join(qs[0].Choices, ",") != "staging,prod" ||
				qs[1].ID != "replicas" || qs[1].Kind != agent.QuestionText || qs[1].Optional ||
				qs[2].ID != "force" || qs[2].Kind != agent.QuestionConfirm || !qs[2].Optional || qs[3].ID != "note" || !qs[3].Optional {
				t.Fatalf("questions %+v", qs)
			}
			res, err = callAsking(t, r, "up.deploy", &people{}, nil)
			if err != nil || res.Output != "decline null" {
				t.Fatalf("nobody answers: %q %v", res.Output, err)
			}
			res, err = callAsking(t, r, "up.deploy", &people{answers: []agent.PeopleAnswer{{Cancelled: true, Why: "the run is cancelled"}}}, nil)
			if err != nil || res.Output != "cancel null" {
				t.Fatalf("run cancelled: %q %v", res.Output, err)
			}
			if _, err := callAsking(t, r, "up.deploy", nil, nil); err == nil || !strings.Contains(err.Error(), "nobody to ask") {
				t.Fatalf("no run to ask: %v", err)
			}
			if !strings.Contains(logs.String(), "protocol="+version) {
				t.Fatalf("the session is not at %s:\n%s", version, logs.String())
			}
		})
	}
}

// TestProgressReachesTheCallOutput: opsgate sends a progressToken with
// every call, and the server's progress notifications reach the call's
// output sink (the engine shows it in the run's events and status line).
func TestProgressReachesTheCallOutput(t *testing.T) {
	t.Parallel()
	seen := []chan struct{}{make(chan struct{}), make(chan struct{})}
	r, _ := start(t, askingServer(t, "2025-11-25", seen[0], seen[1]))
	var mu sync.Mutex
	var lines []string
	res, err := callAsking(t, r, "up.slow", nil, func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, string(b))
		if len(lines) <= len(seen) {
			close(seen[len(lines)-1])
		}
	})
	if err != nil || res.Output != "done" {
		t.Fatalf("slow: %q %v", res.Output, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(lines, "") != "progress 1/2: copying\nprogress 2/2: verifying\n" {
		t.Fatalf("progress lines %q", lines)
	}
}

// TestFormsOpsgateCannotAskAreRefused: a schema that is not a flat form
// is refused before anyone is asked.
func TestFormsOpsgateCannotAskAreRefused(t *testing.T) {
	t.Parallel()
	for _, raw := range []any{
		nil,
		map[string]any{"type": "array"},
		map[string]any{"type": "object"},
		map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "object"}}},
		map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}},
	} {
		if _, err := newForm("s", raw); err == nil {
			t.Errorf("form %v accepted", raw)
		}
	}
	f, err := newForm("s", map[string]any{"type": "object", "properties": map[string]any{
		"size":      map[string]any{"type": "string", "oneOf": []any{map[string]any{"const": "s", "title": "Small"}, map[string]any{"const": "l", "title": "Large"}}},
		"tags":      map[string]any{"type": "array", "items": map[string]any{"enum": []any{"a", "b", "c"}}},
		"odd name!": map[string]any{"type": "number"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.content(agent.Reply{Answers: []agent.Answer{{QuestionID: "field1", Answer: "2.5"}, {QuestionID: "size", Answer: "Large"}, {QuestionID: "tags", Answer: "a, c"}}})
	if b, _ := json.Marshal(c); err != nil || string(b) != `{"odd name!":2.5,"size":"l","tags":["a","c"]}` {
		t.Fatalf("content %s %v", b, err)
	}
	if _, err := f.content(agent.Reply{Answers: []agent.Answer{{QuestionID: "tags", Answer: "a, z"}}}); err == nil {
		t.Fatal("an array item outside the enum was accepted")
	}
}

// TestElicitationWithSeveralCallsInFlightIsRefused: an older server's
// elicitation/create names no call, and the SDK's client hands it over
// without the request whose stream carried it; with a second call to the
// server in flight opsgate cannot tell which asked, so nobody is asked,
// the server gets an error naming why and what to do, and the call that
// asked fails with it. The other call is unharmed.
func TestElicitationWithSeveralCallsInFlightIsRefused(t *testing.T) {
	t.Parallel()
	seen := []chan struct{}{make(chan struct{}), make(chan struct{})}
	r, logs := start(t, askingServer(t, "2025-11-25", seen...))
	progressed := make(chan struct{})
	slow := make(chan error, 1)
	go func() {
		_, err := callAsking(t, r, "up.slow", nil, func([]byte) {
			select {
			case <-progressed:
			default:
				close(progressed) // the first progress: slow is in flight
			}
		})
		slow <- err
	}()
	<-progressed
	p := &people{answers: []agent.PeopleAnswer{answers("slack:UBOB", "env", "prod", "replicas", "3")}}
	res, err := callAsking(t, r, "up.deploy", p, nil)
	got := res.Output
	if err != nil {
		got += err.Error()
	}
	if !strings.Contains(got, "cannot tell which of the 2 calls in flight to server up asked") || !strings.Contains(got, "input requests, protocol 2026-07-28") {
		t.Fatalf("deploy with slow in flight: %q %v", res.Output, err)
	}
	if len(p.asks) != 0 {
		t.Fatalf("people were asked %d times", len(p.asks))
	}
	close(seen[0])
	close(seen[1])
	if err := <-slow; err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	if !strings.Contains(logs.String(), "calls_in_flight=2") {
		t.Fatalf("the refusal is not logged:\n%s", logs.String())
	}
}
