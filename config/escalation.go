package config

import (
	"fmt"

	"github.com/opsgate/opsgate/approvals"
)

// Ladder maps configured escalation steps onto the policy's (nil stays
// nil: a rule without its own ladder takes the default).
func Ladder(steps []EscalationStep) []approvals.Step {
	if steps == nil {
		return nil
	}
	out := make([]approvals.Step, len(steps))
	for i, s := range steps {
		out[i] = approvals.Step{After: s.After.D(), Remind: s.Remind, AddApprovers: s.AddApprovers, Outcome: approvals.Terminal(s.Outcome)}
	}
	return out
}

// escalation checks approvals.escalation and every rule's escalation:
// each step does one thing after a positive time, in order, an outcome
// only last; add_approvers name known entries; no step falls after the
// approval's end (where it would never fire); a rule that does not ask
// has no ladder; and an "approve" default never reaches a high_impact or
// destructive tool.
func (c *checker) escalation(groups map[string][]string) {
	c.ladder("approvals.escalation", c.cfg.Approvals.Escalation, groups)
	for i, r := range c.cfg.Policy.Rules {
		p := rulePath(i, "escalation")
		if r.Escalation == nil {
			continue
		}
		if r.Action != "ask" {
			c.problem(p, "escalation only applies to action ask")
			continue
		}
		c.ladder(p, r.Escalation, groups)
		if endsIn(r.Escalation, approvals.TerminalApprove) {
			if t := c.riskyTool(func(name string) bool { return r.Match.Tool == "" || approvals.Glob(r.Match.Tool, name) }); t != "" {
				c.problem(fmt.Sprintf("%s[%d].outcome", p, len(r.Escalation)-1),
					"outcome approve is refused for high_impact and destructive tools, and this rule matches %s; use outcome deny", t)
			}
		}
	}
	if d := c.cfg.Approvals.Escalation; endsIn(d, approvals.TerminalApprove) {
		if t := c.riskyTool(c.takesDefaultLadder); t != "" {
			c.problem(fmt.Sprintf("approvals.escalation[%d].outcome", len(d)-1),
				"outcome approve is refused for high_impact and destructive tools, and %s asks under the default ladder; use outcome deny, or give its rule a ladder of its own", t)
		}
	}
}

// ladder checks one ladder at path p.
func (c *checker) ladder(p string, steps []EscalationStep, groups map[string][]string) {
	ladder := Ladder(steps)
	if i, err := approvals.CheckLadder(ladder); err != nil {
		c.problem(fmt.Sprintf("%s[%d]", p, i), "%v", err)
		return
	}
	end, what := c.cfg.Approvals.TTL.D(), fmt.Sprintf("approvals.ttl, %s", c.cfg.Approvals.TTL)
	if n := len(ladder); n > 0 && ladder[n-1].Outcome != "" {
		end, what = ladder[n-1].After, fmt.Sprintf("its outcome, at %s", ladder[n-1].After)
	}
	for i, s := range steps {
		sp := fmt.Sprintf("%s[%d]", p, i)
		for j, a := range s.AddApprovers {
			if msg := c.entryProblem(a, groups); msg != "" {
				c.problem(fmt.Sprintf("%s.add_approvers[%d]", sp, j), "%s", msg)
			}
		}
		if s.Outcome == "" && s.After.D() >= end {
			c.problem(sp+".after", "fires at %s, not before the approval ends (%s): it would never fire; end the ladder with an outcome or raise approvals.ttl", s.After, what)
		}
	}
}

func endsIn(steps []EscalationStep, t approvals.Terminal) bool {
	return len(steps) > 0 && approvals.Terminal(steps[len(steps)-1].Outcome) == t
}

// riskyTool names the first configured high_impact or destructive tool
// that match accepts, or "".
func (c *checker) riskyTool(match func(name string) bool) string {
	for _, t := range c.cfg.Tools {
		if (t.Risk == string(approvals.RiskHighImpact) || t.Destructive) && match(t.Name) {
			return fmt.Sprintf("tool %q (%s%s)", t.Name, t.Risk, map[bool]string{true: ", destructive"}[t.Destructive])
		}
	}
	return ""
}

// takesDefaultLadder reports whether a call of the tool named name may ask
// under approvals.escalation: no rule names it (the policy's default
// asks), or an ask rule that matches it has no ladder of its own.
func (c *checker) takesDefaultLadder(name string) bool {
	matched := false
	for _, r := range c.cfg.Policy.Rules {
		if r.Match.Tool != "" && !approvals.Glob(r.Match.Tool, name) {
			continue
		}
		matched = matched || len(r.Match.Args) == 0
		if r.Action == "ask" && r.Escalation == nil {
			return true
		}
	}
	return !matched
}
