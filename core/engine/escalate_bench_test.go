package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// benchPending is how many approvals wait in BenchmarkEscalationScan.
const benchPending = 10_000

// benchLadder reminds every ten minutes, six times, and denies at 2h.
var benchLadder = []approvals.Step{
	{After: 10 * time.Minute, Remind: true}, {After: 20 * time.Minute, Remind: true},
	{After: 30 * time.Minute, Remind: true}, {After: 40 * time.Minute, Remind: true},
	{After: 50 * time.Minute, Remind: true}, {After: 60 * time.Minute, Remind: true},
	{After: 2 * time.Hour, Outcome: approvals.TerminalDeny},
}

// BenchmarkEscalationScan is the escalation sweep's cost with 10,000
// pending approvals, each climbing a ladder (issue 29's figure):
//
//   - idle: one tick (EscalateDue) when no step is due, the sweeper's
//     usual case every PollInterval — ns/op is the scan's cost per tick;
//   - due: one tick when a reminder of every approval is due at once (a
//     burst after an outage), each step written with its thread reply,
//     direct message and audit entry — ns/step is the cost of one step.
//
// Setup suspends the 10,000 runs through the engine (tens of seconds);
// the measurement runs with the engine stopped, so only the tick counts.
// go test -run '^$' -bench BenchmarkEscalationScan ./core/engine/
func BenchmarkEscalationScan(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			h := setup(b, be, withLadder(benchLadder))
			pendingWithLadders(b, h, benchPending)
			h.quiesce()
			ctx := context.Background()
			b.Run("idle", func(b *testing.B) {
				for b.Loop() {
					if n, err := h.eng.EscalateDue(ctx); err != nil || n != 0 {
						b.Fatalf("an idle tick fired %d steps, %v", n, err)
					}
				}
				b.ReportMetric(benchPending, "pending")
			})
			b.Run("due", func(b *testing.B) {
				steps := 0
				for b.Loop() {
					b.StopTimer()
					h.clk.Advance(10 * time.Minute)
					b.StartTimer()
					n, err := h.eng.EscalateDue(ctx)
					if err != nil || n != benchPending {
						b.Fatalf("a tick with every reminder due fired %d of %d steps, %v (-benchtime at most %dx)", n, benchPending, err, len(benchLadder)-1)
					}
					steps += n
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/step")
				b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
			})
		})
	}
}

// pendingWithLadders records n requests whose runs suspend on the
// fixture's scale rule (with h's ladder) and waits until all n wait.
func pendingWithLadders(b *testing.B, h *harness, n int) {
	b.Helper()
	ctx := context.Background()
	h.quiesce()
	for i := range n {
		if _, err := h.eng.HandleEvent(ctx, h.event("console:req", fmt.Sprintf("console:esc%d", i), "scale api 1")); err != nil {
			b.Fatal(err)
		}
	}
	h.resume()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		stats, err := h.store.ApprovalPendingStats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		waiting := 0
		for _, s := range stats {
			waiting += s.Count
		}
		if waiting == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d approvals pending after 10 minutes", waiting, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
