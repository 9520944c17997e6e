package approvals

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Effect is what the policy gate does with a tool call.
type Effect string

// The three effects of a policy rule.
const (
	EffectAllow Effect = "allow"
	EffectAsk   Effect = "ask"
	EffectDeny  Effect = "deny"
)

// DefaultMode is the effect when no rule matches. DefaultAuto asks for
// destructive tools and for risk external or high_impact, and allows the rest.
type DefaultMode string

// The default modes.
const (
	DefaultAuto  DefaultMode = "auto"
	DefaultAllow DefaultMode = "allow"
	DefaultAsk   DefaultMode = "ask"
	DefaultDeny  DefaultMode = "deny"
)

// Rule matches tool calls by tool-name glob and argument globs ("*" any
// run of characters, "?" one character). Non-string arguments are matched
// against their compact JSON; a missing argument never matches. Path-like
// values are matched in their cleaned form (CleanPath); a deny matches the
// raw form too. A rule with a condition (When) applies only where it holds,
// and its quorum may be an expression (docs/policy.md).
type Rule struct {
	Tool      string
	Args      map[string]string
	Effect    Effect
	Approvers []string
	Quorum    int
	// AllowSelfApproval lets the requester approve their own call when
	// this rule asks (by default nobody approves their own call).
	AllowSelfApproval bool
	// Escalation is the rule's ladder while its asks wait (escalation.go);
	// nil takes the policy's, an empty list none.
	Escalation []Step
	// When is the rule's condition as written (a CEL expression), "" for
	// none; Cond is it compiled. A rule with When but no Cond is judged as
	// if its condition failed (fail-safe, see Evaluate).
	When string    `json:",omitempty"`
	Cond Condition `json:"-"`
	// QuorumWhen is the quorum as an expression, "" when Quorum is a
	// number; QuorumFn is it compiled.
	QuorumWhen string     `json:",omitempty"`
	QuorumFn   QuorumExpr `json:"-"`
	// Description says in a few words what the rule is for ("deploy to
	// prod* by a non-lead"); cards, the console and the CLI show it as the
	// reason the rule asked.
	Description string `json:",omitempty"`
}

// Key identifies the rule by what it says, not by where it stands: a
// session grant covers later calls only while the very rule that asked
// still asks for them, so editing the rule (or a reload that changes it)
// ends the grants made under it. Its condition and quorum expression are
// part of what it says.
func (r Rule) Key() string {
	b, err := json.Marshal(struct {
		Tool       string            `json:"tool"`
		Args       map[string]string `json:"args"`
		Effect     Effect            `json:"effect"`
		Approvers  []string          `json:"approvers"`
		Quorum     int               `json:"quorum"`
		Self       bool              `json:"self"`
		When       string            `json:"when,omitempty"`
		QuorumWhen string            `json:"quorum_when,omitempty"`
	}{r.Tool, r.Args, r.Effect, r.Approvers, max(r.Quorum, 1), r.AllowSelfApproval, r.When, r.QuorumWhen})
	if err != nil {
		panic("approvals: rule key: " + err.Error()) // strings only
	}
	sum := sha256.Sum256(b)
	return "r" + hex.EncodeToString(sum[:8])
}

// Summary describes the rule for people: its Description, or what it
// matches ("tool deploy, env=prod*, when …").
func (r Rule) Summary() string {
	if r.Description != "" {
		return r.Description
	}
	var parts []string
	tool := r.Tool
	if tool == "" {
		tool = "*"
	}
	parts = append(parts, "tool "+tool)
	for _, k := range sortedKeys(r.Args) {
		parts = append(parts, k+"="+r.Args[k])
	}
	if r.When != "" {
		parts = append(parts, "when "+r.When)
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ToolInfo is what the policy needs to know about a tool.
type ToolInfo struct {
	Name        string
	Risk        Risk
	Destructive bool
}

// Policy is the ordered rule list plus the no-match default.
type Policy struct {
	Rules   []Rule
	Default DefaultMode
	// DefaultApprovers decide calls that ask without naming approvers (the
	// default, or an ask rule without approvers).
	DefaultApprovers []string
	// AllowSelfApproval lets requesters approve their own calls under
	// every ask (the older, global approvals.allow_self_approval); a rule
	// may allow it for itself alone.
	AllowSelfApproval bool
	// ForeverHighImpact lets a "forever" grant cover a high_impact tool;
	// without it such grants are refused when made and ignored when found.
	ForeverHighImpact bool
	// Escalation is the default ladder of every ask whose rule has none
	// (approvals.escalation).
	Escalation []Step
}

// Verdict is the policy's answer for one call.
type Verdict struct {
	Effect Effect
	// Rule is the index of the deciding rule, -1 for the default.
	Rule      int
	Approvers []string
	Quorum    int
	// RuleKey is the deciding rule's Key ("default" for the default).
	RuleKey string
	// AllowSelfApproval says whether the requester may approve this call
	// themselves (the rule's or the policy's setting).
	AllowSelfApproval bool
	// Why explains the verdict in one line for audit and replies.
	Why string
}

// DefaultRuleKey is the RuleKey of a verdict no rule decided.
const DefaultRuleKey = "default"

// Evaluate applies the rules to a call by s: any matching deny is final,
// otherwise the last matching rule wins, otherwise the default. Deny being
// final means no later rule, grant or edit can let the call through.
//
// A rule's condition is judged fail-safe: when it cannot be evaluated (an
// argument it reads is missing, the cost limit is reached) a deny or ask
// rule applies and an allow rule does not, so a broken condition never
// lets more through. A quorum expression that cannot be evaluated denies
// the call. Verdict.Why says so in either case.
func (p *Policy) Evaluate(t ToolInfo, args map[string]any, s Subject) Verdict {
	last, lastWhy := -1, ""
	var in *Input
	for i, r := range p.Rules {
		if !r.matches(t.Name, args) {
			continue
		}
		why := ""
		if r.When != "" {
			if in == nil {
				in = &Input{Tool: t.Name, Args: args, Requester: s.Requester, Channel: s.Channel, Risk: t.Risk, Now: s.Now}
			}
			holds, err := r.holds(in)
			switch {
			case err != nil && r.Effect == EffectAllow:
				continue
			case err != nil:
				why = fmt.Sprintf(" (its condition failed: %v; applied to be safe)", err)
			case !holds:
				continue
			}
		}
		if r.Effect == EffectDeny {
			return Verdict{Effect: EffectDeny, Rule: i, RuleKey: r.Key(), Why: fmt.Sprintf("denied by policy rule %d: %s%s", i, r.Summary(), why)}
		}
		last, lastWhy = i, why
	}
	if last >= 0 {
		r := p.Rules[last]
		v := Verdict{Effect: r.Effect, Rule: last, Approvers: r.Approvers, Quorum: max(r.Quorum, 1), RuleKey: r.Key(),
			AllowSelfApproval: r.AllowSelfApproval || p.AllowSelfApproval,
			Why:               fmt.Sprintf("policy rule %d: %s%s: %s", last, r.Summary(), lastWhy, r.Effect)}
		if v.Effect == EffectAsk && r.QuorumWhen != "" {
			if in == nil {
				in = &Input{Tool: t.Name, Args: args, Requester: s.Requester, Channel: s.Channel, Risk: t.Risk, Now: s.Now}
			}
			q, err := r.quorum(in)
			if err != nil {
				return Verdict{Effect: EffectDeny, Rule: last, RuleKey: v.RuleKey,
					Why: fmt.Sprintf("denied to be safe: policy rule %d (%s): its quorum expression failed: %v", last, r.Summary(), err)}
			}
			v.Quorum = max(q, 1)
		}
		if v.Effect == EffectAsk && len(v.Approvers) == 0 {
			v.Approvers = p.DefaultApprovers
		}
		return v
	}
	v := Verdict{Effect: p.defaultEffect(t), Rule: -1, Quorum: 1, RuleKey: DefaultRuleKey, AllowSelfApproval: p.AllowSelfApproval}
	v.Why = fmt.Sprintf("no rule matched; default for risk %s%s: %s", t.Risk, map[bool]string{true: ", destructive"}[t.Destructive], v.Effect)
	if v.Effect == EffectAsk {
		v.Approvers = p.DefaultApprovers
	}
	return v
}

// ErrNotCompiled is a condition or quorum expression that was configured
// but never compiled: judged as a failed evaluation (fail-safe).
var ErrNotCompiled = errors.New("expression not compiled")

func (r Rule) holds(in *Input) (bool, error) {
	if r.Cond == nil {
		return false, ErrNotCompiled
	}
	return r.Cond.Holds(in)
}

func (r Rule) quorum(in *Input) (int, error) {
	if r.QuorumFn == nil {
		return 0, ErrNotCompiled
	}
	return r.QuorumFn.Quorum(in)
}

// defaultEffect is the no-match effect. A destructive tool asks under
// "allow" too: only a rule that matches it lets it run unasked.
func (p *Policy) defaultEffect(t ToolInfo) Effect {
	switch p.Default {
	case DefaultAllow:
		if t.Destructive {
			return EffectAsk
		}
		return EffectAllow
	case DefaultAsk:
		return EffectAsk
	case DefaultDeny:
		return EffectDeny
	}
	if t.Destructive || t.Risk == RiskExternal || t.Risk == RiskHighImpact {
		return EffectAsk
	}
	return EffectAllow
}

func (r Rule) matches(tool string, args map[string]any) bool {
	if r.Tool != "" && !Glob(r.Tool, tool) {
		return false
	}
	for name, pat := range r.Args {
		v, ok := args[name]
		if !ok {
			return false
		}
		// Path-like values are matched cleaned (pathclean.go): that is the
		// form the card shows and the tool receives. A deny also matches the
		// raw form, so a caller that skipped cleaning cannot get past one.
		clean := Glob(pat, argText(CleanValue(v)))
		if !clean && (r.Effect != EffectDeny || !Glob(pat, argText(v))) {
			return false
		}
	}
	return true
}

func argText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return strings.TrimSpace(fmt.Sprint(compactJSON(v)))
}

// Glob reports whether s matches pattern, where "*" matches any run of
// characters (including none, and including "/") and "?" exactly one.
// Unlike path.Match there is no separator and no character classes, so
// rules read the same for tool names, environments and URLs.
func Glob(pattern, s string) bool {
	p, str := []rune(pattern), []rune(s)
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(str) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == str[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
