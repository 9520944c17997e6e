package delivery_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

// BenchmarkThroughput30PerSecondBurst1 is BenchmarkThroughput30PerSecond
// against a platform that allows no burst at all: one message per 33⅓ ms,
// each one at most the fake's slack early. There is no saved-up capacity to
// make up for a late grant, so this measures how exactly the pacer keeps the
// schedule. It reports the rate achieved over all messages as a percentage
// of the permitted one, the smallest gap between two arrivals, the
// violations the fake counted on its arrival clock (must be 0), and, on the
// clients' Sent stamps (the pacer's grants plus only the grant-to-stamp
// delay), the worst amount by which a request left before the bucket
// allowed (negative: never early). Arrival violations with a Sent excess
// inside the slack are loopback/scheduling jitter, not the pacer. Run:
//
//	go test -run='^$' -bench=Throughput -benchtime=1x ./core/delivery
func BenchmarkThroughput30PerSecondBurst1(b *testing.B) {
	const msgs, threads = 600, 60
	every := time.Second / 30
	for range b.N {
		s := newMemStore()
		f := newFakeServer(b, limit{}, limit{Every: every, Burst: 1})
		f.slack = 5 * time.Millisecond // loopback scheduling jitter between grant and arrival
		p := newFakePlatform(f, delivery.Pacing{Account: delivery.Rate{Every: every, Burst: 1}}, 1000)
		for i := range msgs {
			s.add(reply(fmt.Sprintf("c%02d", i%threads), fmt.Sprintf("message %d", i)))
		}
		w := startWorker(b, delivery.Options{Store: s, Cards: &cards{}, Platform: p, Owner: "bench", Subscribe: s.Subscribe, Concurrency: 16})
		waitFor(b, "all sent", 2*time.Minute, func() bool { return s.count(core.DeliverySent) == msgs })
		w.stop()
		got := f.received()
		span := got[len(got)-1].At.Sub(got[0].At)
		permitted := float64(len(got)-1) * float64(every)
		minGap := time.Duration(1 << 62)
		for i := 1; i < len(got); i++ {
			minGap = min(minGap, got[i].At.Sub(got[i-1].At))
		}
		violations, early, _ := f.stats()
		c := f.conformance(f.slack)
		b.ReportMetric(float64(c.SentGlobal)/float64(time.Millisecond), "sent_worst_early_ms")
		b.ReportMetric(float64(c.ArrivalGlobal)/float64(time.Millisecond), "arrival_worst_early_ms")
		b.ReportMetric(100*permitted/float64(span), "%_of_permitted")
		b.ReportMetric(float64(len(got)-1)/span.Seconds(), "msgs/s")
		b.ReportMetric(float64(minGap)/float64(time.Millisecond), "min_gap_ms")
		b.ReportMetric(float64(violations+early), "violations")
		if violations+early != 0 {
			b.Errorf("%d violations, %d early retries (worst early: %v by Sent stamps, %v on arrival)", violations, early, c.SentGlobal, c.ArrivalGlobal)
		}
	}
}
