package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// backlogTimeout bounds the store query of one scrape.
const backlogTimeout = 2 * time.Second

// backlog reports the pending approvals as /metrics is scraped, from the
// store (one grouped read of an index, core.EscalationStore): every
// replica reports the same figures, so dashboards take their max.
type backlog struct {
	store   core.EscalationStore
	now     func() time.Time
	log     *slog.Logger
	pending *prometheus.Desc
	oldest  *prometheus.Desc
}

func newBacklog(s core.EscalationStore, now func() time.Time, log *slog.Logger) *backlog {
	return &backlog{store: s, now: now, log: log,
		pending: prometheus.NewDesc("opsgate_approvals_pending", "Approvals waiting for a decision, by risk.", []string{"risk"}, nil),
		oldest: prometheus.NewDesc("opsgate_approval_oldest_pending_seconds",
			"Age of the oldest approval waiting for a decision (0 when none waits).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (b *backlog) Describe(ch chan<- *prometheus.Desc) {
	ch <- b.pending
	ch <- b.oldest
}

// Collect implements prometheus.Collector. A store that does not answer
// leaves both series out of the scrape (absent, not zero).
func (b *backlog) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
	defer cancel()
	stats, err := b.store.ApprovalPendingStats(ctx)
	if err != nil {
		b.log.Warn("metrics: pending approvals", "err", err)
		return
	}
	counts := map[approvals.Risk]int{approvals.RiskRead: 0, approvals.RiskReversible: 0, approvals.RiskExternal: 0, approvals.RiskHighImpact: 0}
	var oldest time.Time
	for _, s := range stats {
		counts[s.Risk] += s.Count
		if oldest.IsZero() || s.Oldest.Before(oldest) {
			oldest = s.Oldest
		}
	}
	for risk, n := range counts {
		ch <- prometheus.MustNewConstMetric(b.pending, prometheus.GaugeValue, float64(n), string(risk))
	}
	age := 0.0
	if !oldest.IsZero() {
		age = max(b.now().Sub(oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(b.oldest, prometheus.GaugeValue, age)
}

// registerBacklog adds the engine's backlog to reg, replacing one an
// earlier engine of the process registered (its store may be closed).
func registerBacklog(reg prometheus.Registerer, b *backlog) error {
	if reg == nil {
		return nil
	}
	err := reg.Register(b)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		reg.Unregister(are.ExistingCollector)
		err = reg.Register(b)
	}
	return err
}
