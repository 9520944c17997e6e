package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/opsgate/opsgate/core"
)

// BenchmarkHandleEvent measures durable ingest: one chat message recorded
// with its queued run (and run.queued event) per op, in one transaction.
// The flow asks for approval, so workers add little load of their own.
func BenchmarkHandleEvent(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			h := setup(b, be)
			b.ResetTimer()
			i := 0
			for b.Loop() {
				i++
				h.send("console:req", fmt.Sprintf("console:b%d", i), "deploy api 1")
			}
		})
	}
}

// BenchmarkApproveToFinish measures one approval decision through to the
// run's final checkpoint (claim, dispatch, result, reply) per op.
func BenchmarkApproveToFinish(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			h := setup(b, be)
			ctx := context.Background()
			for b.Loop() {
				b.StopTimer()
				rc := h.send("console:req", "console:bench", "deploy api 1")
				a := h.waitApproval(rc.RunID)
				b.StartTimer()
				if _, err := h.eng.Decide(ctx, core.Actor{ID: "console:alice"}, "console", core.Decision{ApprovalID: a.ID, Action: "approve"}); err != nil {
					b.Fatal(err)
				}
				h.waitRun(rc.RunID, core.RunSucceeded)
			}
		})
	}
}
