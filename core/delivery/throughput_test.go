package delivery_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

// BenchmarkThroughput30PerSecond drives the fake platform, which permits 30
// messages/s for the account (a token bucket of burst 30, as "30 per
// second" platforms allow), with 600 messages over 60 threads and reports
// the steady-state rate after the initial burst as a percentage of the
// permitted one, and the violations the fake counted (must be 0). Run:
//
//	go test -run='^$' -bench=Throughput -benchtime=1x ./core/delivery
func BenchmarkThroughput30PerSecond(b *testing.B) {
	const msgs, threads, burst = 600, 60, 30
	every := time.Second / 30
	for range b.N {
		s := newMemStore()
		f := newFakeServer(b, limit{}, limit{Every: every, Burst: burst})
		f.slack = 5 * time.Millisecond // loopback scheduling jitter between grant and arrival
		p := newFakePlatform(f, delivery.Pacing{Account: delivery.Rate{Every: every, Burst: burst}}, 1000)
		for i := range msgs {
			s.add(reply(fmt.Sprintf("c%02d", i%threads), fmt.Sprintf("message %d", i)))
		}
		w := startWorker(b, delivery.Options{Store: s, Cards: &cards{}, Platform: p, Owner: "bench", Subscribe: s.Subscribe, Concurrency: 16})
		waitFor(b, "all sent", 2*time.Minute, func() bool { return s.count(core.DeliverySent) == msgs })
		w.stop()
		got := f.received()
		// After the burst, n more messages at one per `every` need
		// n·every at best.
		steady := got[burst-1:]
		span := steady[len(steady)-1].At.Sub(steady[0].At)
		permitted := float64(len(steady)-1) * float64(every)
		pct := 100 * permitted / float64(span)
		violations, early, _ := f.stats()
		b.ReportMetric(pct, "%_of_permitted")
		b.ReportMetric(float64(len(steady)-1)/span.Seconds(), "msgs/s")
		b.ReportMetric(float64(violations+early), "violations")
		if violations+early != 0 {
			b.Errorf("%d violations, %d early retries", violations, early)
		}
	}
}
