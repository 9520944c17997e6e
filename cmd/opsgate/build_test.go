package main

import (
	"slices"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core/engine"
)

// approvals.question_answerers is passed to the engine as written, so the
// config's values must be the engine's.
func TestQuestionAnswerersAgree(t *testing.T) {
	if config.QuestionAnswerersRequesterOrApprovers != engine.AnswerRequesterOrApprovers ||
		config.QuestionAnswerersRequester != engine.AnswerRequester {
		t.Fatal("config's approvals.question_answerers values differ from the engine's")
	}
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Approvals.QuestionAnswerers = config.QuestionAnswerersRequester
	o, err := engineOptions(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o.QuestionAnswerers != engine.AnswerRequester {
		t.Fatalf("engine options QuestionAnswerers = %q", o.QuestionAnswerers)
	}
}

func TestBuildPolicyDefaultApprovers(t *testing.T) {
	groups := map[string][]string{"sre": {"console:a"}, "dba": {"console:b"}}
	p := buildPolicy(config.Policy{Default: "auto", Rules: []config.Rule{
		{Match: config.Match{Tool: "deploy", Args: map[string]string{"env": "prod*"}}, Action: "ask", Quorum: config.Quorum{N: 2}},
	}}, groups)
	if want := []string{"group:dba", "group:sre"}; !slices.Equal(p.DefaultApprovers, want) {
		t.Errorf("default approvers = %v, want every group %v", p.DefaultApprovers, want)
	}
	v := p.Evaluate(approvals.ToolInfo{Name: "deploy", Risk: approvals.RiskHighImpact}, map[string]any{"env": "prod-eu"}, approvals.Subject{})
	if v.Effect != approvals.EffectAsk || v.Quorum != 2 || !slices.Equal(v.Approvers, p.DefaultApprovers) {
		t.Errorf("verdict = %+v", v)
	}
	p = buildPolicy(config.Policy{Default: "deny", DefaultApprovers: []string{"console:x"}}, groups)
	if !slices.Equal(p.DefaultApprovers, []string{"console:x"}) || p.Default != approvals.DefaultDeny {
		t.Errorf("explicit default approvers lost: %+v", p)
	}
}

func TestEngineOptionsFromQuickstart(t *testing.T) {
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	o, err := engineOptions(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Tools) != len(cfg.Tools) || len(o.Flows) != len(cfg.Flows) {
		t.Fatalf("tools %d flows %d", len(o.Tools), len(o.Flows))
	}
	for _, tl := range o.Tools {
		if tl.Runner == nil || tl.Schema == nil {
			t.Errorf("tool %s: runner or schema missing", tl.Name)
		}
	}
	if !o.AllowSelfApproval || o.ApprovalTTL <= 0 || o.Lease <= 0 {
		t.Errorf("options = %+v", o)
	}
	if d := toolDir(cfg); d != "" {
		t.Errorf("built-in quickstart tools run in %q, want the working directory", d)
	}
}
