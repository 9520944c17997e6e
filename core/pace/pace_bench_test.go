package pace

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkWaitBurst1 measures, on the real clock, how much of a burst-1
// bucket's permitted rate one waiter calling Wait in a loop achieves — the
// shape of one delivery worker sending to a platform that allows no burst,
// where every late grant is capacity lost for good. It reports the achieved
// rate as a percentage of the permitted one, the bucket's grant times
// (which must keep to the schedule) and the smallest gap between two
// returns from Wait (which timer lateness can shrink by at most the
// limiter's lateness credit). Run:
//
//	go test -run='^$' -bench=WaitBurst1 -benchtime=1x ./core/pace
func BenchmarkWaitBurst1(b *testing.B) {
	for _, c := range []struct {
		perSecond, grants int
	}{{30, 91}, {200, 401}} {
		b.Run(fmt.Sprintf("%d_per_s", c.perSecond), func(b *testing.B) {
			every := time.Second / time.Duration(c.perSecond)
			for range b.N {
				l, err := New(Spec{Conversation: &Rate{Every: every, Burst: 1}})
				if err != nil {
					b.Fatal(err)
				}
				var granted []time.Time
				l.onGrant = func(at time.Time, _ Keys) { granted = append(granted, at) }
				returned := make([]time.Time, 0, c.grants)
				k := Keys{Conversation: "c"}
				for range c.grants {
					if err := l.Wait(context.Background(), k); err != nil {
						b.Fatal(err)
					}
					returned = append(returned, time.Now())
				}
				span := returned[len(returned)-1].Sub(returned[0])
				permitted := time.Duration(c.grants-1) * every
				minGap := time.Duration(1 << 62)
				for i := 1; i < len(returned); i++ {
					minGap = min(minGap, returned[i].Sub(returned[i-1]))
				}
				for i := 1; i < len(granted); i++ {
					if gap := granted[i].Sub(granted[i-1]); gap < every {
						b.Fatalf("grants %d and %d only %v apart, bucket allows one per %v", i-1, i, gap, every)
					}
				}
				b.ReportMetric(100*float64(permitted)/float64(span), "%_of_permitted")
				b.ReportMetric(float64(minGap)/float64(time.Millisecond), "min_gap_ms")
				b.ReportMetric(float64(every)/float64(time.Millisecond), "every_ms")
			}
		})
	}
}
