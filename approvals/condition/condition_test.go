package condition

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

func compiler(t testing.TB) *Compiler {
	t.Helper()
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustCompile(t testing.TB, c *Compiler, src string, k Kind) *Expr {
	t.Helper()
	e, err := c.Compile(src, k)
	if err != nil {
		t.Fatalf("compile %q: %v", src, err)
	}
	return e
}

// The contract's example rule: a deploy to prod asks unless a lead
// deploys a hotfix; its truth table over both inputs, plus the quorum
// expression beside it.
func TestContractRuleTruthTable(t *testing.T) {
	t.Parallel()
	c := compiler(t)
	when := mustCompile(t, c, `!("leads" in requester.groups) || args.version.endsWith("-hotfix")`, When)
	quorum := mustCompile(t, c, `args.env == "prod-eu" ? 2 : 1`, Quorum)
	for _, lead := range []bool{false, true} {
		for _, hotfix := range []bool{false, true} {
			in := &approvals.Input{Tool: "deploy", Args: map[string]any{"env": "prod-eu", "version": "1.2.3"},
				Requester: approvals.Requester{Person: "alice", Identity: "slack:UALICE", Groups: []string{"sre"}}}
			if lead {
				in.Requester.Groups = []string{"leads", "sre"}
			}
			if hotfix {
				in.Args["version"] = "1.2.3-hotfix"
			}
			got, err := when.Holds(in)
			if want := !lead || hotfix; err != nil || got != want {
				t.Errorf("lead=%v hotfix=%v: Holds = %v, %v; want %v", lead, hotfix, got, err, want)
			}
		}
	}
	for env, want := range map[string]int{"prod-eu": 2, "prod-us": 1} {
		got, err := quorum.Quorum(&approvals.Input{Args: map[string]any{"env": env}})
		if err != nil || got != want {
			t.Errorf("quorum for %s = %d, %v; want %d", env, got, err, want)
		}
	}
}

// Every variable is there with its type: a table of expressions and what
// they give.
func TestVariables(t *testing.T) {
	t.Parallel()
	c := compiler(t)
	now := time.Date(2026, 3, 4, 22, 30, 0, 0, time.UTC)
	in := &approvals.Input{Tool: "scale", Args: map[string]any{"replicas": 5.0, "tags": []any{"a", "b"}, "opts": map[string]any{"force": true}},
		Requester: approvals.Requester{Person: "bob", Identity: "console:bob", Groups: []string{"ops"}},
		Channel:   "console", Risk: approvals.RiskExternal, Now: now}
	cases := []struct {
		src  string
		want bool
	}{
		{`tool == "scale"`, true},
		{`tool.startsWith("sc") && channel == "console"`, true},
		{`risk == "external"`, true},
		{`args.replicas > 3`, true},
		{`args.replicas == 5`, true},
		{`args.replicas > 10`, false},
		{`"b" in args.tags && size(args.tags) == 2`, true},
		{`args.opts.force`, true},
		{`"replicas" in args && !("missing" in args)`, true},
		{`has(args.missing)`, false},
		{`requester.person == "bob" && requester.identity == "console:bob"`, true},
		{`requester.groups.exists(g, g == "ops")`, true},
		{`now.getHours() >= 22`, true},
		{`now > timestamp("2026-01-01T00:00:00Z")`, true},
	}
	for _, tc := range cases {
		got, err := mustCompile(t, c, tc.src, When).Holds(in)
		if err != nil || got != tc.want {
			t.Errorf("%s = %v, %v; want %v", tc.src, got, err, tc.want)
		}
	}
}

// Compile refuses what would never work, naming where: an unknown
// variable, a misspelled requester field, a syntax error, a `when` that
// is not a bool, a quorum that is not a number, an empty or huge source.
func TestCompileErrorsNamePositions(t *testing.T) {
	t.Parallel()
	c := compiler(t)
	cases := []struct {
		src      string
		k        Kind
		line     int
		col      int
		contains string
	}{
		{`envv == "prod"`, When, 1, 1, "undeclared reference to 'envv'"},
		{`tool == "x" && requester.persn == "a"`, When, 1, 25, "undefined field 'persn'"},
		{"tool == \"x\" &&\n  (args.a ==", When, 2, 13, "Syntax error"},
		{`args.env`, When, 0, 0, ""}, // dyn: accepted, judged at run time
		{`tool`, When, 1, 1, "must give a bool"},
		{`"two"`, Quorum, 1, 1, "must give an integer"},
		{`  `, When, 0, 0, "empty"},
		{strings.Repeat("a", MaxSource+1), When, 0, 0, "at most"},
	}
	for _, tc := range cases {
		_, err := c.Compile(tc.src, tc.k)
		if tc.contains == "" {
			if err != nil {
				t.Errorf("%q: %v, want it accepted", tc.src, err)
			}
			continue
		}
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) == 0 {
			t.Errorf("%q: %v, want an *Error", tc.src, err)
			continue
		}
		p := ce.Problems[0]
		if !strings.Contains(err.Error(), tc.contains) || p.Line != tc.line || (tc.col != 0 && p.Column != tc.col) {
			t.Errorf("%q: problem %+v (%v), want %d:%d containing %q", tc.src, p, err, tc.line, tc.col, tc.contains)
		}
	}
}

// At run time an expression may fail: an argument it reads is missing, a
// value has the wrong type, the cost limit is reached. Each is an error
// (the policy judges it fail-safe), never a panic or a silent false.
func TestRuntimeFailures(t *testing.T) {
	t.Parallel()
	c := compiler(t)
	in := &approvals.Input{Args: map[string]any{"name": "x", "n": 2.5}}
	for _, src := range []string{`args.env == "prod"`, `args.name`, `args.name > 3`} {
		if _, err := mustCompile(t, c, src, When).Holds(in); err == nil {
			t.Errorf("%s: no error", src)
		}
	}
	if _, err := mustCompile(t, c, `args.n`, Quorum).Quorum(in); !errors.Is(err, ErrType) {
		t.Errorf("quorum 2.5: %v, want ErrType", err)
	}
	if _, err := mustCompile(t, c, `0`, Quorum).Quorum(in); !errors.Is(err, ErrType) {
		t.Errorf("quorum 0: %v, want ErrType", err)
	}
	// A million iterations over a literal list: stopped by the cost limit
	// (or, on a machine slow enough, by the deadline first).
	list := "[" + strings.TrimSuffix(strings.Repeat("1,", 100), ",") + "]"
	hostile := fmt.Sprintf("%s.all(a, %s.all(b, %s.all(c, a + b + c > 0)))", list, list, list)
	_, err := mustCompile(t, c, hostile, When).Holds(in)
	if err == nil || !(strings.Contains(err.Error(), "cost limit") || strings.Contains(err.Error(), "interrupted")) {
		t.Fatalf("hostile expression: %v, want the cost limit", err)
	}
}

// The policy applies a failing condition fail-safe: a deny or ask rule
// applies, an allow rule does not; a failing quorum expression denies.
func TestPolicyFailSafe(t *testing.T) {
	t.Parallel()
	c := compiler(t)
	fails := `args.missing == "x"`
	rule := func(e approvals.Effect) approvals.Rule {
		return approvals.Rule{Tool: "deploy", Effect: e, When: fails, Cond: mustCompile(t, c, fails, When)}
	}
	deploy := approvals.ToolInfo{Name: "deploy", Risk: approvals.RiskRead}
	args := map[string]any{"env": "prod"}
	for _, tc := range []struct {
		rules []approvals.Rule
		want  approvals.Effect
		rule  int
	}{
		{[]approvals.Rule{rule(approvals.EffectAllow)}, approvals.EffectAllow, -1}, // default auto allows read; the rule did not apply
		{[]approvals.Rule{{Tool: "deploy", Effect: approvals.EffectAllow}, rule(approvals.EffectAsk)}, approvals.EffectAsk, 1},
		{[]approvals.Rule{{Tool: "deploy", Effect: approvals.EffectAllow}, rule(approvals.EffectDeny)}, approvals.EffectDeny, 1},
		{[]approvals.Rule{{Tool: "deploy", Effect: approvals.EffectAsk, When: "true"}}, approvals.EffectAsk, 0}, // not compiled: fail-safe too
	} {
		v := (&approvals.Policy{Rules: tc.rules}).Evaluate(deploy, args, approvals.Subject{})
		if v.Effect != tc.want || v.Rule != tc.rule {
			t.Errorf("%+v: %s by rule %d (%s), want %s by %d", tc.rules, v.Effect, v.Rule, v.Why, tc.want, tc.rule)
		}
		if v.Rule >= 0 && !strings.Contains(v.Why, "applied to be safe") {
			t.Errorf("why %q does not say the condition failed", v.Why)
		}
	}
	q := `args.missing ? 2 : 1`
	p := &approvals.Policy{Rules: []approvals.Rule{{Tool: "deploy", Effect: approvals.EffectAsk, QuorumWhen: q, QuorumFn: mustCompile(t, c, q, Quorum)}}}
	if v := p.Evaluate(deploy, args, approvals.Subject{}); v.Effect != approvals.EffectDeny || !strings.Contains(v.Why, "quorum expression failed") {
		t.Errorf("failing quorum: %s (%s), want deny", v.Effect, v.Why)
	}
}

// A rule's when and its quorum expression are part of what it says: its
// Key (grants bound to it) and the policy's Version (approval digests)
// change with them, and a rule without them keeps the key it had.
func TestWhenInKeyAndVersion(t *testing.T) {
	t.Parallel()
	base := approvals.Rule{Tool: "deploy", Effect: approvals.EffectAsk}
	withWhen, withQuorum := base, base
	withWhen.When = `channel == "slack"`
	withQuorum.QuorumWhen = `1`
	keys := map[string]bool{base.Key(): true, withWhen.Key(): true, withQuorum.Key(): true}
	if len(keys) != 3 {
		t.Fatalf("keys do not tell the rules apart: %v", keys)
	}
	v1 := (&approvals.Policy{Rules: []approvals.Rule{base}}).Version()
	v2 := (&approvals.Policy{Rules: []approvals.Rule{withWhen}}).Version()
	if v1 == v2 {
		t.Fatal("policy version ignores when")
	}
	// The key of a rule without conditions is the one it had before
	// conditions existed, so upgrading ends no grant.
	old, _ := json.Marshal(struct {
		Tool      string            `json:"tool"`
		Args      map[string]string `json:"args"`
		Effect    string            `json:"effect"`
		Approvers []string          `json:"approvers"`
		Quorum    int               `json:"quorum"`
		Self      bool              `json:"self"`
	}{"deploy", nil, "ask", nil, 1, false})
	sum := sha256.Sum256(old)
	if want := "r" + hex.EncodeToString(sum[:8]); base.Key() != want {
		t.Fatalf("key %s, want the old form's %s", base.Key(), want)
	}
}

// BenchmarkWhen is the cost of one condition per judged call: the
// contract's example rule on a typical call.
func BenchmarkWhen(b *testing.B) {
	c := compiler(b)
	e := mustCompile(b, c, `!("leads" in requester.groups) || args.version.endsWith("-hotfix")`, When)
	in := &approvals.Input{Tool: "deploy", Args: map[string]any{"env": "prod-eu", "service": "api", "version": "1.2.3"},
		Requester: approvals.Requester{Person: "alice", Identity: "slack:UALICE", Groups: []string{"leads", "sre"}}, Channel: "slack",
		Risk: approvals.RiskHighImpact, Now: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := e.Holds(in); err != nil || ok {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkEvaluate is a whole policy judgement with a conditional rule
// and a quorum expression, against one without conditions.
func BenchmarkEvaluate(b *testing.B) {
	c := compiler(b)
	when := `!("leads" in requester.groups) || args.version.endsWith("-hotfix")`
	quorum := `args.env == "prod-eu" ? 2 : 1`
	conditional := &approvals.Policy{Rules: []approvals.Rule{
		{Tool: "service_status", Effect: approvals.EffectAllow},
		{Tool: "deploy", Args: map[string]string{"env": "prod*"}, Effect: approvals.EffectAsk, Approvers: []string{"group:sre"},
			When: when, Cond: mustCompile(b, c, when, When), QuorumWhen: quorum, QuorumFn: mustCompile(b, c, quorum, Quorum)},
	}}
	plain := &approvals.Policy{Rules: []approvals.Rule{
		{Tool: "service_status", Effect: approvals.EffectAllow},
		{Tool: "deploy", Args: map[string]string{"env": "prod*"}, Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}, Quorum: 2},
	}}
	t := approvals.ToolInfo{Name: "deploy", Risk: approvals.RiskHighImpact}
	args := map[string]any{"env": "prod-eu", "service": "api", "version": "1.2.3"}
	s := approvals.Subject{Requester: approvals.Requester{Person: "bob", Identity: "slack:UBOB", Groups: []string{"sre"}}, Channel: "slack", Now: time.Now()}
	for name, p := range map[string]*approvals.Policy{"conditional": conditional, "plain": plain} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if v := p.Evaluate(t, args, s); v.Effect != approvals.EffectAsk || v.Quorum != 2 {
					b.Fatal(v)
				}
			}
		})
	}
}
