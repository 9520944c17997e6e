package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// The benchmarks measure the agent foundation's own cost, with the model
// at zero latency: what the integration adds per tool call before the gate
// and the store. Run:
//
//	go test -run '^$' -bench . -benchmem ./core/agent/

// BenchmarkToolCallStep is one tool call of an agent loop minus the engine:
// render the history, one zero-latency model turn, resolve the call (reason
// stripped), render its outcome, append both to the history.
func BenchmarkToolCallStep(b *testing.B) {
	for _, n := range []int{1, 20} {
		b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) {
			tb, _ := agent.NewToolbox([]agent.Tool{{Name: "service_status", Schema: map[string]any{"type": "object",
				"properties": map[string]any{"service": map[string]any{"type": "string"}}}}})
			m := fakellm.Looping(agent.ToolCall{Name: "service_status", Arguments: `{"service":"api","reason":"check it"}`}, 1<<30, "done")
			base := []agent.Message{agent.UserMessage(t0, agent.External("slack", "slack:U1", "is api healthy?"))}
			out := strings.Repeat("api: healthy, p99 41ms\n", 40) // ~1 KiB of tool output
			hist := append([]agent.Message(nil), base...)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				req, _ := agent.BuildRequest(agent.SystemPrompt(""), hist, tb, agent.Window{})
				resp, err := m.Stream(ctx, req, nil)
				if err != nil {
					b.Fatal(err)
				}
				c := tb.Resolve(resp.ToolCalls[0])
				hist = append(hist, agent.Message{Role: agent.RoleAssistant, Calls: []agent.Call{c}},
					agent.Outcome{Kind: agent.OutcomeRan, Output: out}.Result(c, t0))
				if len(hist) > 1+2*n {
					hist = append(hist[:0], base...)
				}
			}
		})
	}
}

func BenchmarkFrame64KiB(b *testing.B) {
	text := strings.Repeat("log line with <tags> & \"quotes\"\n", 2048)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		_ = agent.Frame("tool:logs", "", text)
	}
}

func BenchmarkBuildRequest200(b *testing.B) {
	tb, _ := agent.NewToolbox([]agent.Tool{{Name: "fs.read"}})
	var hist []agent.Message
	for i := range 50 {
		hist = append(hist, exchange(tb, i, strings.Repeat("x", 2000))...)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = agent.BuildRequest("s", hist, tb, agent.Window{MaxBytes: 64 << 10})
	}
}
