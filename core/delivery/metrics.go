package delivery

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the delivery counters, labelled by channel so one dashboard
// shows every platform.
type metrics struct {
	sent, chunks, dead, limited *prometheus.CounterVec
}

// newMetrics registers the counters on reg. One process runs a Worker per
// channel on one registry, so a counter already registered is reused.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	mk := func(name, help string) (*prometheus.CounterVec, error) {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"channel"})
		if reg == nil {
			return c, nil
		}
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
					return existing, nil
				}
			}
			return nil, fmt.Errorf("register %s: %w", name, err)
		}
		return c, nil
	}
	var m metrics
	var err error
	if m.sent, err = mk("opsgate_deliveries_sent_total", "Outbox messages fully delivered to the platform."); err != nil {
		return nil, err
	}
	if m.chunks, err = mk("opsgate_delivery_chunks_sent_total", "Message chunks the platform accepted."); err != nil {
		return nil, err
	}
	if m.dead, err = mk("opsgate_deliveries_dead_total", "Outbox messages dead-lettered (permanent error or attempts spent)."); err != nil {
		return nil, err
	}
	if m.limited, err = mk("opsgate_delivery_rate_limited_total", "Sends the platform answered with 429."); err != nil {
		return nil, err
	}
	return &m, nil
}
