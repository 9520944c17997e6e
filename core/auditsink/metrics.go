package auditsink

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics, labelled by sink name (README "Metrics").
const (
	metricDelivered = "opsgate_audit_sink_delivered_total"
	metricRetries   = "opsgate_audit_sink_retries_total"
	metricDead      = "opsgate_audit_sink_dead_letters_total"
	metricPosition  = "opsgate_audit_sink_position"
)

type metrics struct {
	delivered, retries, dead *prometheus.CounterVec
	position                 *prometheus.GaugeVec
}

type sinkMetrics struct {
	delivered, retries, dead prometheus.Counter
	position                 prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricDelivered,
			Help: "Audit entries the sink's destination took."}, []string{"sink"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricRetries,
			Help: "Failed delivery attempts that will be retried."}, []string{"sink"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricDead,
			Help: "Audit entries the destination refused for good, skipped (dead letters)."}, []string{"sink"}),
		position: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricPosition,
			Help: "Sequence number of the last audit entry the sink is past (delivered or dead-lettered)."}, []string{"sink"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []*prometheus.CounterVec{m.delivered, m.retries, m.dead} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
			*c = *are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	if err := reg.Register(m.position); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, err
		}
		m.position = are.ExistingCollector.(*prometheus.GaugeVec)
	}
	return m, nil
}

func (m *metrics) of(name string) sinkMetrics {
	return sinkMetrics{delivered: m.delivered.WithLabelValues(name), retries: m.retries.WithLabelValues(name),
		dead: m.dead.WithLabelValues(name), position: m.position.WithLabelValues(name)}
}
