package approvals

import "testing"

func TestGlob(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "anything/with/slashes", true},
		{"delete_*", "delete_db", true},
		{"delete_*", "undelete_db", false},
		{"prod*", "production", true},
		{"prod*", "staging", false},
		{"d?ploy", "deploy", true},
		{"d?ploy", "dploy", false},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"é*", "été", true},
	}
	for _, c := range cases {
		if got := Glob(c.pattern, c.s); got != c.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

func TestPolicyEvaluate(t *testing.T) {
	t.Parallel()
	p := &Policy{
		Rules: []Rule{
			{Tool: "service_status", Effect: EffectAllow},
			{Tool: "deploy", Effect: EffectAsk, Approvers: []string{"group:sre"}},
			{Tool: "deploy", Args: map[string]string{"env": "prod*"}, Effect: EffectAsk, Approvers: []string{"group:sre"}, Quorum: 2},
			{Tool: "delete_*", Effect: EffectDeny},
			{Tool: "delete_*", Effect: EffectAllow}, // a later allow never overrides a deny
			{Tool: "scale", Args: map[string]string{"replicas": "0"}, Effect: EffectDeny},
		},
		DefaultApprovers: []string{"group:admins"},
	}
	deploy := ToolInfo{Name: "deploy", Risk: RiskHighImpact, Destructive: true}
	cases := []struct {
		name       string
		tool       ToolInfo
		args       map[string]any
		wantEffect Effect
		wantRule   int
		wantQuorum int
	}{
		{"AllowRule", ToolInfo{Name: "service_status", Risk: RiskRead}, nil, EffectAllow, 0, 1},
		{"AskRule", deploy, map[string]any{"env": "staging"}, EffectAsk, 1, 1},
		{"LastMatchWins", deploy, map[string]any{"env": "production"}, EffectAsk, 2, 2},
		{"MissingArgDoesNotMatch", deploy, map[string]any{}, EffectAsk, 1, 1},
		{"DenyIsFinal", ToolInfo{Name: "delete_db"}, nil, EffectDeny, 3, 0},
		{"NonStringArgMatchesJSON", ToolInfo{Name: "scale"}, map[string]any{"replicas": 0}, EffectDeny, 5, 0},
		{"DefaultAllowsRead", ToolInfo{Name: "x", Risk: RiskRead}, nil, EffectAllow, -1, 1},
		{"DefaultAsksDestructive", ToolInfo{Name: "x", Risk: RiskReversible, Destructive: true}, nil, EffectAsk, -1, 1},
		{"DefaultAsksExternal", ToolInfo{Name: "x", Risk: RiskExternal}, nil, EffectAsk, -1, 1},
		{"DefaultAsksHighImpact", ToolInfo{Name: "x", Risk: RiskHighImpact}, nil, EffectAsk, -1, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := p.Evaluate(c.tool, c.args, Subject{})
			if v.Effect != c.wantEffect || v.Rule != c.wantRule {
				t.Fatalf("Evaluate = %+v, want effect %s rule %d", v, c.wantEffect, c.wantRule)
			}
			if c.wantEffect == EffectAsk {
				if v.Quorum != c.wantQuorum {
					t.Errorf("quorum = %d, want %d", v.Quorum, c.wantQuorum)
				}
				if len(v.Approvers) == 0 {
					t.Errorf("an ask verdict must name approvers")
				}
			}
			if v.Why == "" {
				t.Errorf("verdict must explain itself")
			}
		})
	}
}

func TestPolicyDefaultModes(t *testing.T) {
	t.Parallel()
	read := ToolInfo{Name: "x", Risk: RiskRead}
	for mode, want := range map[DefaultMode]Effect{DefaultAllow: EffectAllow, DefaultAsk: EffectAsk, DefaultDeny: EffectDeny, DefaultAuto: EffectAllow} {
		p := &Policy{Default: mode}
		if got := p.Evaluate(read, nil, Subject{}).Effect; got != want {
			t.Errorf("default %s: got %s, want %s", mode, got, want)
		}
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	groups := map[string][]string{"sre": {"slack:U1", "email:a@example.com"}, "oncall": {"slack:U1", "telegram:9"}}
	got := Expand([]string{"group:sre", "group:oncall", "console:admin", "group:missing"}, groups)
	want := []string{"slack:U1", "email:a@example.com", "telegram:9", "console:admin"}
	if len(got) != len(want) {
		t.Fatalf("Expand = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Expand = %v, want %v", got, want)
		}
	}
}
