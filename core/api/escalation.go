package api

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// LadderStepView is one step of an approval's escalation ladder (the
// JSON form of approvals.Step).
type LadderStepView struct {
	After        string   `json:"after"`
	Remind       bool     `json:"remind,omitempty"`
	AddApprovers []string `json:"add_approvers,omitempty"`
	Outcome      string   `json:"outcome,omitempty"`
}

// NextView says what happens to a pending approval next if nobody decides
// it, and when: kind remind, add_approvers, deny, approve or expire.
type NextView struct {
	Kind      string   `json:"kind"`
	At        string   `json:"at"`
	Approvers []string `json:"approvers,omitempty"`
	Text      string   `json:"text"`
}

// GrantOfferView is what approving with one scope would save (or why the
// scope is not offered): the grant's cover as GET /api/v1/grants would
// list it, shown before anyone saves it.
type GrantOfferView struct {
	Scope   approvals.Scope `json:"scope"`
	Offered bool            `json:"offered"`
	Why     string          `json:"why,omitempty"`
	// MaxFor is the longest "for" the scope takes ("" : none, or no
	// limit when TakesFor).
	TakesFor bool       `json:"takes_for"`
	MaxFor   string     `json:"max_for,omitempty"`
	Covers   *GrantView `json:"covers,omitempty"`
}

// escalationView fills v's escalation fields from a.
func escalationView(v *ApprovalView, a *approvals.Approval) {
	for _, s := range a.Ladder {
		v.Escalation = append(v.Escalation, LadderStepView{After: s.After.String(), Remind: s.Remind, AddApprovers: s.AddApprovers, Outcome: string(s.Outcome)})
	}
	v.Escalated, v.AddedApprovers = a.Escalated, a.AddedApprovers
	if n, ok := a.NextStep(); ok {
		v.Next = &NextView{Kind: n.Kind, At: rfc3339(n.At), Approvers: n.Approvers, Text: n.Sentence()}
	}
}

// NewGrantOfferViews renders the offers of a pending approval.
func NewGrantOfferViews(offers []approvals.Offer, now time.Time) []GrantOfferView {
	out := make([]GrantOfferView, 0, len(offers))
	for _, o := range offers {
		gv := GrantOfferView{Scope: o.Scope, Offered: o.Grant != nil, Why: o.Why, TakesFor: o.TakesFor}
		if o.MaxFor > 0 {
			gv.MaxFor = o.MaxFor.String()
		}
		if o.Grant != nil {
			gv.Covers = NewGrantView(o.Grant, now)
		}
		out = append(out, gv)
	}
	return out
}

// GrantOfferer is the optional capability of an Engine that says what
// each scope would save (the engine does): GET /api/v1/approvals/{id} of a
// pending approval then carries "grant_offers".
type GrantOfferer interface {
	GrantOffers(a *approvals.Approval) []approvals.Offer
}

// maxFor bounds a grant's "for": beyond a year it is a forever grant.
const maxFor = 366 * 24 * time.Hour

// ParseFor reads a grant's "for": a Go duration ("90m", "2h") or a number
// of days ("7d"), positive and at most a year. "" is 0 (the default). The
// CLI and the console parse it the same way.
func ParseFor(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 || days > 366 {
			return 0, fmt.Errorf("for %q: want a duration like 30m, 2h or 7d", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("for %q: want a duration like 30m, 2h or 7d", s)
		}
	}
	if d <= 0 || d > maxFor {
		return 0, fmt.Errorf("for %q: want a positive duration of at most a year", s)
	}
	return d, nil
}
