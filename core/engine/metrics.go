package engine

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsgate/opsgate/approvals"
)

// metrics are the engine's Prometheus series. They exist (unregistered)
// even without a Registerer so the code never branches on it.
type metrics struct {
	eventsIngested   *prometheus.CounterVec
	runsFinished     *prometheus.CounterVec
	decisionDispatch prometheus.Histogram
	toolDispatch     *prometheus.HistogramVec
	agentTokens      *prometheus.CounterVec
	agentTurns       *prometheus.CounterVec
	agentModelCall   *prometheus.HistogramVec
	// escalations counts the escalation steps fired here, by kind;
	// decisions observes request → decision of every approval decided
	// (by people or a ladder's default; expiry is not a decision).
	escalations *prometheus.CounterVec
	decisions   prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		eventsIngested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opsgate_events_ingested_total",
			Help: "Inbound channel events durably recorded (duplicates excluded).",
		}, []string{"channel"}),
		runsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opsgate_runs_finished_total",
			Help: "Runs that reached a final status.",
		}, []string{"status"}),
		decisionDispatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "opsgate_approval_decision_to_dispatch_seconds",
			Help:    "Time from the decision that approved a call to the tool dispatch.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		toolDispatch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "opsgate_tool_dispatch_seconds",
			Help:    "Duration of tool calls.",
			Buckets: prometheus.DefBuckets,
		}, []string{"tool"}),
		agentTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opsgate_agent_tokens_total",
			Help: "Model tokens used by agent runs, by agent and type (input, output).",
		}, []string{"agent", "type"}),
		agentTurns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opsgate_agent_turns_total",
			Help: "Agent turns that ended, by agent and outcome (finished, model_error).",
		}, []string{"agent", "outcome"}),
		agentModelCall: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "opsgate_agent_model_call_seconds",
			Help:    "Duration of model calls of agent runs, retries included.",
			Buckets: prometheus.DefBuckets,
		}, []string{"agent"}),
		escalations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opsgate_approval_escalations_total",
			Help: "Escalation steps fired, by step: remind, add_approvers, and the terminal defaults deny and approve.",
		}, []string{"step"}),
		decisions: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "opsgate_approval_decision_seconds",
			Help:    "Time from an approval's request to the decision that ended it (approved, edited, rejected; not expired).",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400},
		}),
	}
	for _, step := range []string{approvals.StepRemind, approvals.StepAddApprovers, approvals.StepDeny, approvals.StepApprove} {
		m.escalations.WithLabelValues(step)
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.eventsIngested, err = register(reg, m.eventsIngested)
	if err == nil {
		m.runsFinished, err = register(reg, m.runsFinished)
	}
	if err == nil {
		m.decisionDispatch, err = register(reg, m.decisionDispatch)
	}
	if err == nil {
		m.toolDispatch, err = register(reg, m.toolDispatch)
	}
	if err == nil {
		m.agentTokens, err = register(reg, m.agentTokens)
	}
	if err == nil {
		m.agentTurns, err = register(reg, m.agentTurns)
	}
	if err == nil {
		m.agentModelCall, err = register(reg, m.agentModelCall)
	}
	if err == nil {
		m.escalations, err = register(reg, m.escalations)
	}
	if err == nil {
		m.decisions, err = register(reg, m.decisions)
	}
	return m, err
}

// register adds c to reg, or reuses the identical collector already there
// (two engines in one process, e.g. a restart in tests, share the series).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// ToolDispatched implements gate.Observer.
func (m *metrics) ToolDispatched(tool string, took time.Duration) {
	m.toolDispatch.WithLabelValues(tool).Observe(took.Seconds())
}

// DecisionDispatched implements gate.Observer.
func (m *metrics) DecisionDispatched(since time.Duration) {
	m.decisionDispatch.Observe(since.Seconds())
}

// decided observes a's request → decision time, once a decision ended it.
func (m *metrics) decided(a *approvals.Approval) {
	if a == nil || a.DecidedAt == nil || a.Status == approvals.StatusPending || a.Status == approvals.StatusExpired {
		return
	}
	m.decisions.Observe(a.DecidedAt.Sub(a.CreatedAt).Seconds())
}
