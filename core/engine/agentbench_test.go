package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/tools"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// stampRunner records when each call reached the tool: the gap between two
// calls of one session is opsgate's whole cost of one gated tool call of an
// agent turn (store the result for the model, render the next request,
// the zero-latency model, store its answer, the gate, the dispatch record),
// with nothing of a real model's or tool's.
type stampRunner struct {
	mu    sync.Mutex
	stamp map[string][]time.Time
}

func (s *stampRunner) Run(_ context.Context, c tools.Call) (tools.Result, error) {
	s.mu.Lock()
	s.stamp[c.RunID] = append(s.stamp[c.RunID], time.Now())
	s.mu.Unlock()
	return tools.Result{Output: "ok"}, nil
}

func (s *stampRunner) Preview(context.Context, tools.Call) (string, error) { return "", nil }

func (s *stampRunner) gaps() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for _, ts := range s.stamp {
		for i := 1; i < len(ts); i++ {
			out = append(out, ts[i].Sub(ts[i-1]))
		}
	}
	slices.Sort(out)
	return out
}

func pct(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	return float64(d[min(len(d)-1, int(float64(len(d))*p))].Microseconds()) / 1000
}

// agentBench starts an engine whose default agent calls "status" (allowed
// by a rule) calls times per turn, then answers; the fake model is
// in-process and answers at once.
func agentBench(b *testing.B, be backend, calls, concurrency int) (*harness, *stampRunner) {
	st := &stampRunner{stamp: map[string][]time.Time{}}
	m := fakellm.Looping(llm.ToolCall{Name: "status", Arguments: `{"service":"api","reason":"bench"}`}, calls, "done")
	h := setup(b, be, func(o *Options) {
		for i, t := range o.Tools {
			if t.Name == "status" {
				cp := *t
				cp.Runner = st
				o.Tools[i] = &cp
			}
		}
		o.Agents = []Agent{{Name: "ops", ModelName: "fake", Model: m, Tools: []string{"status"}, MaxSteps: 1000, Default: true}}
		o.Concurrency = concurrency
	})
	return h, st
}

// BenchmarkAgentGatedCall: one op is one gated tool call of an agent turn
// (turns of 50 calls, one session at a time). Reports p50/p99 of the gap
// between consecutive calls: opsgate's own cost per call.
func BenchmarkAgentGatedCall(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			const perTurn = 50
			h, st := agentBench(b, be, perTurn, 8)
			b.ResetTimer()
			done := 0
			for i := 0; done < b.N; i++ {
				rc := h.send("console:req", fmt.Sprintf("console:g%d", i), "run the checks")
				h.waitRun(rc.RunID, core.RunSucceeded, core.RunFailed)
				done += perTurn
			}
			b.StopTimer()
			g := st.gaps()
			b.ReportMetric(pct(g, 0.50), "p50-ms/call")
			b.ReportMetric(pct(g, 0.99), "p99-ms/call")
		})
	}
}

// BenchmarkAgentSessions100: one op is 100 concurrent sessions each taking
// a turn of 3 gated calls and an answer (the engine runs 32 at once).
func BenchmarkAgentSessions100(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			h, st := agentBench(b, be, 3, 32)
			var turns []time.Duration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				ids := make([]string, 100)
				for s := range ids {
					ids[s] = h.send("console:req", fmt.Sprintf("console:s%d-%d", i, s), "check").RunID
				}
				for _, id := range ids {
					h.waitRun(id, core.RunSucceeded, core.RunFailed)
					turns = append(turns, time.Since(start))
				}
			}
			b.StopTimer()
			slices.Sort(turns)
			g := st.gaps()
			b.ReportMetric(pct(g, 0.50), "p50-ms/call")
			b.ReportMetric(pct(g, 0.99), "p99-ms/call")
			b.ReportMetric(pct(turns, 0.99), "p99-ms/turn")
		})
	}
}
