package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/agent/providers"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/engine"
)

// The Agent API's wiring: which agents and models it offers (those that
// are on) and the adapter from *engine.Engine to api.AgentEngine.

// agentAPIOptions is the Agent API over eng, or nil when no agent is on
// (its paths then answer 404 agent_api_off).
func agentAPIOptions(cfg *config.Config, eng *engine.Engine, st store, att *api.Attendance) *api.AgentOptions {
	var agents []api.AgentInfo
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
	}
	if len(agents) == 0 {
		return nil
	}
	// Every model that is on: a turn may switch to any (agentModelVariants).
	for i := range cfg.Models {
		if m := &cfg.Models[i]; m.Enabled() {
			modelInfos = append(modelInfos, api.ModelInfo{Name: m.Name, Provider: m.Provider, Model: m.Model})
		}
	}
	return &api.AgentOptions{Engine: agentEngine{e: eng, agents: agents}, Sessions: st, Agents: agents, Models: modelInfos, Attendance: att,
		PublicURL: cfg.Server.PublicURL}
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
	rc, err := a.e.StartAgentTurn(ctx, engine.AgentTurn{Thread: t.Session.Thread, Agent: a.on(t.Session.Agent, t.Model), Actor: t.Actor,
		Text: t.Text, Channel: core.AgentSessionChannel, EventID: t.EventID})
	if err != nil {
		return "", err
	}
	return rc.RunID, nil
}

// on is the engine agent that is the session's agent on model ("" keeps
// its own).
func (a agentEngine) on(agent, model string) string {
	for _, ag := range a.agents {
		if ag.Name == agent && model != "" && ag.Model != model {
			return variantName(ag.Name, model)
		}
	}
	return agent
}

func (a agentEngine) AgentAnswer(ctx context.Context, an api.AgentAnswer) error {
	switchTo := ""
	if an.Model != "" {
		switchTo = a.on(an.Session.Agent, an.Model)
	}
	return a.e.AnswerSwitching(ctx, an.Actor, api.DecisionChannel, an.RunID, an.RequestID, an.Answers, switchTo)
}

func (a agentEngine) AgentRelease(ctx context.Context, runID, why string) error {
	return a.e.ReleaseAgentApprovals(ctx, runID, why)
}

func (a agentEngine) Deltas(runID string) (<-chan llm.Delta, func()) { return a.e.Deltas(runID) }

// variantName is the engine agent that is agent on another model: a turn
// of the Agent API may switch the model (to one GET /api/v1/agent/models
// lists) and keeps the session's history, which is the thread's.
func variantName(agent, model string) string { return agent + "@" + model }

// agentModelVariants are, for every agent that is on, the same agent on
// every other model that is on: the engines' agents a turn's "model"
// selects. They are never the default; chat never reaches them.
func agentModelVariants(cfg *config.Config) ([]engine.Agent, error) {
	var out []engine.Agent
	for i := range cfg.Agents {
		a := &cfg.Agents[i]
		if m := cfg.Model(a.Model); !a.Enabled() || m == nil || !m.Enabled() {
			continue
		}
		for j := range cfg.Models {
			m := &cfg.Models[j]
			if m.Name == a.Model || !m.Enabled() {
				continue
			}
			model, err := providers.New(m.Spec(), llm.RetryPolicy{})
			if err != nil {
				return nil, fmt.Errorf("agent %s on model %s: %w", a.Name, m.Name, err)
			}
			out = append(out, engine.Agent{
				Name: variantName(a.Name, m.Name), Description: a.Description, ModelName: m.Name, Model: model, Instructions: a.Instructions, Tools: a.Tools,
				MaxSteps: a.MaxSteps, MaxTokens: m.MaxTokens, Window: llm.Window{MaxBytes: int(m.MaxHistory)},
				Files: fileLimits(a.Attachments),
			})
		}
	}
	return out, nil
}
