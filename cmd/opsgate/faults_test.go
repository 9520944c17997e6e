package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/internal/fakellm"
	"github.com/opsgate/opsgate/internal/mcpfake"
)

// TestAgentRidesOutModelAndUpstreamFaults is issue 32's hostile week in
// small, on the real binary: the model answers 429, then cuts its stream,
// then asks for an upstream tool that hangs past its timeout, then for one
// whose server dies mid-call, then for one on the restarted server, then
// answers. Every fault reaches the model as what it is (a tool error), the
// run succeeds, and the model is asked once per turn plus once per retried
// fault — never twice for an answer it gave. A model that stalls ends its
// turn with "did not answer in time" in the thread, and the next turn works.
func TestAgentRidesOutModelAndUpstreamFaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sc := llmServer().Script(t)
	fakeDir := t.TempDir()
	envYAML, _ := json.Marshal(mcpfake.Env(mcpfake.ModeOK, fakeDir, "fake-secret-123"))
	e.writeConfig(e.storeYAML(""), fmt.Sprintf(`
engine: {poll_interval: 100ms}
mcp_servers:
  - {name: fake, command: [%q], env: %s, timeout: 1s}
policy:
  rules:
    - {match: {tool: "fake.*"}, action: allow}
models:
  - {name: default, provider: openai, base_url: %q, model: test-model, timeout: 8s}
agents:
  - {name: ops, model: default, tools: ["fake.hang", "fake.crash", "fake.echo"], default: true}
`, os.Args[0], envYAML, sc.OpenAIURL()))
	sc.Push(
		fakellm.RateLimited("1"),
		fakellm.Turn{Text: []string{"par", "tial", "never"}, CutAfter: 2},
		fakellm.CallTool("fake__hang", `{}`),
		fakellm.CallTool("fake__crash", `{}`),
		fakellm.CallTool("fake__echo", `{"text":"still here"}`),
		fakellm.Say("Done, despite it all."),
	)
	e.start()
	run := e.message("t-faults", "ride it out")
	done := e.waitRun(run.ID, "final", func(r testRun) bool {
		return r.Status == "succeeded" || r.Status == "failed" || r.Status == "interrupted"
	})
	if done.Status != "succeeded" {
		t.Fatalf("run %s, want succeeded: %+v", done.Status, done.Steps)
	}
	reqs := sc.Requests()
	if len(reqs) != 6 {
		t.Fatalf("the model was asked %d times, want 6 (a 429, a cut stream, four turns)", len(reqs))
	}
	// What the model was told of each tool: the last tool result of the
	// turn after it.
	for i, want := range map[int]string{3: "fake.hang tool timed out after 1s (outcome unknown", 4: "fake.crash: calling \"tools/call\": EOF (outcome unknown)", 5: "echo: still here"} {
		if got := lastToolResult(t, reqs[i]); !strings.Contains(got, want) {
			t.Errorf("turn %d: the model was told %q, want %q", i, got, want)
		}
	}
	if sc.Pending() != 0 {
		t.Errorf("%d scripted answers left unasked", sc.Pending())
	}

	// A model that stalls: the turn ends with a message in the thread.
	sc.Push(fakellm.Hang{})
	stalled := e.message("t-faults", "and now?")
	if r := e.waitRun(stalled.ID, "final", func(r testRun) bool { return r.Status == "failed" || r.Status == "succeeded" }); r.Status != "failed" {
		t.Errorf("stalled turn: run %s, want failed", r.Status)
	}
	var msgs struct {
		Items []struct {
			Text string `json:"text"`
		} `json:"items"`
	}
	if code := e.api("GET", "/api/v1/messages?thread=console:t-faults", nil, &msgs); code != 200 {
		t.Fatalf("GET messages: HTTP %d", code)
	}
	var said []string
	for _, m := range msgs.Items {
		said = append(said, m.Text)
	}
	if !strings.Contains(strings.Join(said, "\n"), "did not answer in time") {
		t.Errorf("the thread was not told the model stalled: %q", said)
	}
	sc.Push(fakellm.Say("Back."))
	next := e.message("t-faults", "hello again")
	e.waitStatus(next.ID, "succeeded")
	e.stop()
}

// lastToolResult is the content of the last tool message of an OpenAI
// chat request.
func lastToolResult(t *testing.T, r fakellm.Request) string {
	t.Helper()
	msgs, _ := r.JSON()["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		m, _ := msgs[i].(map[string]any)
		if m["role"] == "tool" {
			c, _ := m["content"].(string)
			return c
		}
	}
	return ""
}
