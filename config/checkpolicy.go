package config

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/approvals/condition"
)

func (c *checker) policy(groups map[string][]string) {
	for j, a := range c.cfg.Policy.DefaultApprovers {
		if msg := c.entryProblem(a, groups); msg != "" {
			c.problem(fmt.Sprintf("policy.default_approvers[%d]", j), "%s", msg)
		}
	}
	dir := approvals.NewDirectory(c.cfg.People, groups)
	tools := toolNames(c.cfg.Tools)
	for i, r := range c.cfg.Policy.Rules {
		if r.Match.Tool != "" {
			if _, err := path.Match(r.Match.Tool, ""); err != nil {
				c.problem(rulePath(i, "match.tool"), "invalid glob %q", r.Match.Tool)
			} else if !strings.ContainsAny(r.Match.Tool, `*?[\`) {
				if msg := c.toolRefProblem(r.Match.Tool, tools); msg != "" {
					c.problem(rulePath(i, "match.tool"), "%s", msg)
				}
			}
		}
		for k, g := range r.Match.Args {
			if _, err := path.Match(g, ""); err != nil {
				c.problem(joinKey(rulePath(i, "match.args"), k), "invalid glob %q", g)
			}
		}
		if len(r.Approvers) > 0 && r.Action != "ask" {
			c.problem(rulePath(i, "approvers"), "approvers only apply to action ask")
		}
		before := len(c.problems)
		for j, a := range r.Approvers {
			if msg := c.entryProblem(a, groups); msg != "" {
				c.problem(fmt.Sprintf("%s[%d]", rulePath(i, "approvers"), j), "%s", msg)
			}
		}
		if r.AllowSelfApproval && r.Action != "ask" {
			c.problem(rulePath(i, "allow_self_approval"), "only applies to action ask")
		}
		c.conditions(i)
		switch persons := dir.Persons(dir.Expand(r.Approvers)); {
		case r.Quorum.Expr != "":
			if r.Action != "ask" {
				c.problem(rulePath(i, "quorum"), "a quorum expression only applies to action ask")
			}
		case r.Quorum.N < 1:
			c.problem(rulePath(i, "quorum"), "must be at least 1")
		case len(c.problems) > before:
			// the approvers are wrong; counting them would only add noise
		case r.Action == "ask" && len(r.Approvers) > 0 && r.Quorum.N > persons:
			c.problem(rulePath(i, "quorum"), "quorum %d exceeds the %d eligible approvers (persons: one human with several identities counts once)", r.Quorum.N, persons)
		}
	}
}

// conditions compiles rule i's `when` and quorum expression (type-checked
// against the policy's variables) and keeps them on the rule for
// Rule.Condition and Rule.QuorumExpr; a problem names the position in the
// expression.
func (c *checker) conditions(i int) {
	r := &c.cfg.Policy.Rules[i]
	if r.When == "" && r.Quorum.Expr == "" {
		return
	}
	if c.cel == nil {
		comp, err := condition.NewCompiler()
		if err != nil {
			c.problem(rulePath(i, "when"), "%v", err)
			return
		}
		c.cel = comp
	}
	compile := func(key, src string, k condition.Kind) *condition.Expr {
		e, err := c.cel.Compile(src, k)
		var ce *condition.Error
		if errors.As(err, &ce) {
			msgs := make([]string, len(ce.Problems))
			for j, p := range ce.Problems {
				msgs[j] = p.Message
				if p.Line > 0 {
					msgs[j] = fmt.Sprintf("at %d:%d of the expression: %s", p.Line, p.Column, p.Message)
				}
			}
			c.problem(rulePath(i, key), "CEL %s", strings.Join(msgs, "; "))
			return nil
		}
		if err != nil {
			c.problem(rulePath(i, key), "CEL %v", err)
		}
		return e
	}
	if r.When != "" {
		if e := compile("when", r.When, condition.When); e != nil {
			r.cond = e
		}
	}
	if r.Quorum.Expr != "" {
		if e := compile("quorum", r.Quorum.Expr, condition.Quorum); e != nil {
			r.quorumFn = e
		}
	}
}
