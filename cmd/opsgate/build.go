package main

import (
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/configs"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/agent/providers"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/core/tools"
)

// This file turns a validated configuration into the core's types. It holds
// no policy of its own: every default and check lives in package config —
// and, for a channel, in its adapter's Config.Validate, which config.Parse
// calls on the very value (config.Config.SlackConfig, …) channels.go builds
// the adapter from — so `opsgate config check` and `opsgate serve` can
// never disagree about what a file means.

// engineOptions maps cfg onto engine.Options (without the store, logger and
// registerer, which serve supplies).
func engineOptions(cfg *config.Config) (engine.Options, error) {
	o := engine.Options{
		Groups:            cfg.Approvers.Groups,
		People:            cfg.People,
		Requesters:        cfg.RequesterGates(),
		SessionTTL:        cfg.Approvals.SessionTTL.D(),
		ApprovalTTL:       cfg.Approvals.TTL.D(),
		AllowSelfApproval: cfg.Approvals.AllowSelfApproval,
		QuestionAnswerers: cfg.Approvals.QuestionAnswerers,
		Concurrency:       cfg.Engine.Concurrency,
		Lease:             cfg.Engine.Lease.D(),
		PollInterval:      cfg.Engine.PollInterval.D(),
		PublicURL:         strings.TrimRight(cfg.Server.PublicURL, "/"),
	}
	dir := toolDir(cfg)
	for i := range cfg.Tools {
		ct := cfg.Tools[i]
		if ct.Exec != nil {
			x := *ct.Exec
			x.Command, x.DryRun = demoArgv(cfg, x.Command), demoArgv(cfg, x.DryRun)
			ct.Exec = &x
		}
		t, err := buildTool(&ct, dir)
		if err != nil {
			return o, err
		}
		o.Tools = append(o.Tools, t)
	}
	for _, f := range cfg.Flows {
		ef := engine.Flow{Name: f.Name, Description: f.Description, Command: f.Command}
		for _, s := range f.Steps {
			ef.Steps = append(ef.Steps, engine.FlowStep{Tool: s.Tool, Args: s.Args, Name: s.Name, AgentTask: agentTask(cfg, s.AgentTask)})
		}
		o.Flows = append(o.Flows, ef)
	}
	o.Policy = withLadders(buildPolicy(cfg.Policy, cfg.Approvers.Groups), cfg)
	agents, err := buildAgents(cfg)
	if err != nil {
		return o, err
	}
	variants, err := agentModelVariants(cfg)
	if err != nil {
		return o, err
	}
	o.Agents = append(agents, variants...)
	return o, nil
}

// buildAgents maps the agents that are on (their model is on) to engine
// agents, each with its provider wrapped in the retry policy.
func buildAgents(cfg *config.Config) ([]engine.Agent, error) {
	var out []engine.Agent
	for i := range cfg.Agents {
		a := &cfg.Agents[i]
		if !a.Enabled() {
			continue
		}
		m := cfg.Model(a.Model)
		if m == nil || !m.Enabled() {
			continue
		}
		model, err := providers.New(m.Spec(), agent.RetryPolicy{})
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", a.Name, err)
		}
		out = append(out, engine.Agent{
			Name: a.Name, Description: a.Description, ModelName: m.Name, Model: model, Instructions: a.Instructions, Tools: a.Tools,
			MaxSteps: a.MaxSteps, MaxTokens: m.MaxTokens, Window: agent.Window{MaxBytes: int(m.MaxHistory)}, Default: a.Default,
			Files: fileLimits(a.Attachments),
		})
	}
	return out, nil
}

// fileLimits maps agents[].attachments onto the engine's limits.
func fileLimits(c config.AgentAttachments) engine.FileLimits {
	kinds := make([]core.AttachmentKind, 0, len(c.Kinds))
	for _, k := range c.Kinds {
		kinds = append(kinds, core.AttachmentKind(k))
	}
	return engine.FileLimits{MaxBytes: int64(c.MaxBytes), Kinds: kinds}
}

// buildTrust maps the parts of cfg a reload (SIGHUP) may change: people,
// groups, policy, requesters, self-approval, session grants.
func buildTrust(cfg *config.Config) engine.Trust {
	p := withLadders(buildPolicy(cfg.Policy, cfg.Approvers.Groups), cfg)
	p.AllowSelfApproval = cfg.Approvals.AllowSelfApproval
	return engine.Trust{Policy: p, People: cfg.People, Groups: cfg.Approvers.Groups, Requesters: cfg.RequesterGates(),
		SessionTTL: cfg.Approvals.SessionTTL.D()}
}

// toolDir is where relative tool commands are resolved and tools run: the
// directory of the configuration file, so a config and the scripts next to
// it work wherever the server is started from. The built-in quickstart has
// no file; its tools resolve against the working directory (the repository
// root in the README's walkthrough).
func toolDir(cfg *config.Config) string {
	if cfg.Source == "" || cfg.Source == configs.QuickstartName {
		return ""
	}
	abs, err := filepath.Abs(cfg.Source)
	if err != nil {
		return ""
	}
	return filepath.Dir(abs)
}

// agentTask maps an agent_task step; asset paths are resolved against the
// configuration file's directory.
func agentTask(cfg *config.Config, t *config.AgentTask) *engine.AgentTask {
	if t == nil {
		return nil
	}
	out := &engine.AgentTask{Instructions: t.Instructions, Skills: t.Skills, Tools: t.Tools, OutputSchema: t.OutputSchema}
	for _, a := range t.Assets {
		out.Assets = append(out.Assets, core.AgentTaskAsset{ID: a.ID, Description: a.Description, MediaType: a.MediaType,
			Text: a.Text, Path: cfg.AssetPath(a.Path)})
	}
	return out
}

func buildTool(t *config.Tool, dir string) (*tools.Tool, error) {
	schema, err := approvals.CompileSchema(t.Name, t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("tool %q: input_schema: %w", t.Name, err)
	}
	et := &tools.Tool{
		Name:        t.Name,
		Description: t.Description,
		Risk:        approvals.Risk(t.Risk),
		Destructive: t.Destructive,
		Idempotent:  t.Idempotent,
		Schema:      schema,
	}
	switch {
	case t.Exec != nil:
		x := &tools.Exec{
			Command:        t.Exec.Command,
			DryRun:         t.Exec.DryRun,
			Timeout:        t.Exec.Timeout.D(),
			Env:            t.Exec.Env,
			AllowDashArgs:  t.Exec.AllowDashArgs,
			Dir:            dir,
			MaxOutput:      int64(t.MaxOutput),
			PreviewTimeout: t.DryRunTimeout.D(),
		}
		if err := x.Validate(); err != nil {
			return nil, fmt.Errorf("tool %q: exec: %w", t.Name, err)
		}
		et.Runner = x
	case t.HTTP != nil:
		h := &tools.HTTP{
			Method:    t.HTTP.Method,
			URL:       t.HTTP.URL,
			Headers:   t.HTTP.Headers,
			Body:      t.HTTP.Body,
			Timeout:   t.HTTP.Timeout.D(),
			MaxOutput: int64(t.MaxOutput),
		}
		if err := h.Validate(); err != nil {
			return nil, fmt.Errorf("tool %q: http: %w", t.Name, err)
		}
		et.Runner = h
	default:
		return nil, fmt.Errorf("tool %q: neither exec nor http is set", t.Name)
	}
	return et, nil
}

// buildPolicy maps the policy section. Without policy.default_approvers,
// every approver group may decide asks that name no approvers (as the
// config reference documents), so such an ask is never undecidable.
func buildPolicy(p config.Policy, groups map[string][]string) *approvals.Policy {
	out := &approvals.Policy{Default: approvals.DefaultMode(p.Default), DefaultApprovers: p.DefaultApprovers,
		ForeverHighImpact: p.ForeverHighImpact}
	if len(out.DefaultApprovers) == 0 {
		for _, g := range slices.Sorted(maps.Keys(groups)) {
			out.DefaultApprovers = append(out.DefaultApprovers, "group:"+g)
		}
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		out.Rules = append(out.Rules, approvals.Rule{
			Tool:      r.Match.Tool,
			Args:      r.Match.Args,
			Effect:    approvals.Effect(r.Action),
			Approvers: r.Approvers,
			Quorum:    r.Quorum.N,

			AllowSelfApproval: r.AllowSelfApproval,
			// A condition config check did not compile stays nil: the
			// policy then judges the rule fail-safe.
			When: r.When, Cond: r.Condition(),
			QuorumWhen: r.Quorum.Expr, QuorumFn: r.QuorumExpr(),
			Description: r.Description,
		})
	}
	return out
}

// buildEngine builds the engine over st with the process's logger and
// metrics registry; lookup resolves upstream MCP tools (nil for none).
// receipts, when set, signs the receipt of every decision people make;
// direct finds an identity's direct-message thread (escalation's cards).
func buildEngine(cfg *config.Config, st core.Store, log *slog.Logger, reg prometheus.Registerer, lookup tools.ToolLookup, att *api.Attendance,
	direct func(identity string) (core.Thread, bool), receipts engine.ReceiptSigner) (*engine.Engine, error) {
	o, err := engineOptions(cfg)
	if err != nil {
		return nil, err
	}
	o.Store, o.Logger, o.Registerer, o.Lookup, o.Direct, o.Receipts = st, log, reg, lookup, direct, receipts
	if att != nil {
		o.AgentAttendance = att
	}
	e, err := engine.New(o)
	if err != nil {
		return nil, fmt.Errorf("build engine: %w", err)
	}
	return e, nil
}

// apiTokens maps configured tokens; an empty list means serve generates one.
// internalTokens are the tokens marked internal: accepted by the internal
// MCP endpoints only.
func internalTokens(cfg *config.Config) []api.Token {
	var out []api.Token
	for _, t := range cfg.API.Tokens {
		if !t.Internal {
			continue
		}
		tok := api.Token{Name: t.Name, Token: t.Token, Actor: t.Actor}
		for _, sc := range t.Scopes {
			tok.Scopes = append(tok.Scopes, core.Scope(sc))
		}
		if t.Scopes != nil && tok.Scopes == nil {
			tok.Scopes = []core.Scope{}
		}
		out = append(out, tok)
	}
	return out
}

func apiTokens(cfg *config.Config) []api.Token {
	var out []api.Token
	for _, t := range cfg.API.Tokens {
		if t.Internal {
			continue // the internal MCP endpoints' only (internalTokens)
		}
		tok := api.Token{Name: t.Name, Token: t.Token, Actor: t.Actor, AgentConcurrency: t.AgentConcurrency}
		if t.Scopes != nil {
			tok.Scopes = make([]core.Scope, 0, len(t.Scopes))
			for _, sc := range t.Scopes {
				tok.Scopes = append(tok.Scopes, core.Scope(sc))
			}
		}
		out = append(out, tok)
	}
	return out
}
