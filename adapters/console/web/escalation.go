package web

import (
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/api"
)

// ladderRow is one step of an approval's escalation ladder on its card.
type ladderRow struct {
	After, What string
	Fired       bool
}

// offerRow is what approving with one scope would save, before it is.
type offerRow struct {
	Scope, Covers, Why string
	Offered            bool
}

// escalationRows fills the card's ladder and what happens next.
func escalationRows(v *cardView, a *approvals.Approval) {
	for i, s := range a.Ladder {
		what := s.Kind()
		if len(s.AddApprovers) > 0 {
			what = "add " + strings.Join(s.AddApprovers, ", ")
		}
		v.Ladder = append(v.Ladder, ladderRow{After: s.After.String(), What: what, Fired: i < a.Escalated})
	}
	if n, ok := a.NextStep(); ok && len(a.Ladder) > 0 {
		v.Next = n.Sentence()
	}
	if len(a.AddedApprovers) > 0 {
		v.Approvers = a.Entries()
	}
}

// grantOffers fills the card's task and session offers from the engine,
// when it tells them (api.GrantOfferer): who, what, until when.
func (s *server) grantOffers(v *cardView, a *approvals.Approval) {
	g, ok := s.o.Engine.(api.GrantOfferer)
	if !ok {
		return
	}
	for _, o := range g.GrantOffers(a) {
		if o.Scope == approvals.ScopeForever {
			continue // the forever block shows its own
		}
		row := offerRow{Scope: string(o.Scope), Offered: o.Grant != nil, Why: o.Why}
		if o.Grant != nil {
			row.Covers = offerCovers(o.Grant)
		}
		if o.Scope == approvals.ScopeSession && o.MaxFor > 0 {
			v.SessionMax = o.MaxFor.String()
		}
		v.Offers = append(v.Offers, row)
	}
}

// offerCovers says in one line what a grant would let run.
func offerCovers(g *approvals.Grant) string {
	var who string
	switch g.Scope {
	case approvals.ScopeTask:
		who = "this run's later calls of " + g.Tool
	case approvals.ScopeSession:
		who = g.Requester + "'s later calls of " + g.Tool + " in " + g.Thread
	}
	line := who + " that rule " + g.RuleKey + " asks for"
	if g.ExpiresAt != nil {
		line += ", until " + ts(*g.ExpiresAt)
	}
	return line
}
