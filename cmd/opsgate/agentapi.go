package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/engine"
)

// The Agent API's wiring: which agents and models it offers (those that
// are on) and the adapter from *engine.Engine to api.AgentEngine.

// agentAPIOptions is the Agent API over eng, or nil when no agent is on
// (its paths then answer 404 agent_api_off).
func agentAPIOptions(cfg *config.Config, eng *engine.Engine, st store, att *api.Attendance) *api.AgentOptions {
	var agents []api.AgentInfo
	models := map[string]bool{}
	var modelInfos []api.ModelInfo
	for i := range cfg.Agents {
		a := &cfg.Agents[i]
		m := cfg.Model(a.Model)
		if !a.Enabled() || m == nil || !m.Enabled() {
			continue
		}
		// The session keeps the agent's settings as they were at its
		// creation (not the model's key or URL: never a secret).
		settings, _ := json.Marshal(map[string]any{"model": a.Model, "instructions": a.Instructions, "tools": a.Tools,
			"max_steps": a.MaxSteps})
		agents = append(agents, api.AgentInfo{Name: a.Name, Model: a.Model, Default: a.Default, Tools: a.Tools, Settings: settings})
		if !models[m.Name] {
			models[m.Name] = true
			modelInfos = append(modelInfos, api.ModelInfo{Name: m.Name, Provider: m.Provider, Model: m.Model})
		}
	}
	if len(agents) == 0 {
		return nil
	}
	return &api.AgentOptions{Engine: agentEngine{e: eng, agents: agents}, Sessions: st, Agents: agents, Models: modelInfos, Attendance: att}
}

// agentEngine adapts the engine to the Agent API's seam.
type agentEngine struct {
	e      *engine.Engine
	agents []api.AgentInfo
}

var (
	_ api.AgentEngine = agentEngine{}
	_ api.DeltaSource = agentEngine{}
)

func (a agentEngine) AgentTurnStart(ctx context.Context, t api.AgentTurn) (string, error) {
	if t.Model != "" {
		for _, ag := range a.agents {
			if ag.Name == t.Session.Agent && ag.Model != t.Model {
				return "", fmt.Errorf("switching the model of a turn (%s instead of %s): %w", t.Model, ag.Model, api.ErrAgentUnsupported)
			}
		}
	}
	rc, err := a.e.StartAgentTurn(ctx, engine.AgentTurn{Thread: t.Session.Thread, Agent: t.Session.Agent, Actor: t.Actor,
		Text: t.Text, Channel: core.AgentSessionChannel, EventID: t.EventID})
	if err != nil {
		return "", err
	}
	return rc.RunID, nil
}

func (a agentEngine) AgentAnswer(ctx context.Context, runID, requestID string, actor core.Actor, answers json.RawMessage) error {
	return a.e.Answer(ctx, actor, api.DecisionChannel, runID, requestID, answers)
}

func (a agentEngine) AgentRelease(ctx context.Context, runID, why string) error {
	return nil // the engine does not release waits yet; the approval stays decidable in the console
}

func (a agentEngine) Deltas(runID string) (<-chan llm.Delta, func()) { return a.e.Deltas(runID) }
