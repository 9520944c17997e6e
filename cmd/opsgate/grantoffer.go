package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/shortid"
)

// grantCovers says in one phrase which calls a grant lets run: its
// arguments, its pattern, or any the rule asks for.
func grantCovers(g grantView) string {
	switch {
	case g.Pattern != nil:
		b, _ := json.Marshal(g.Pattern)
		return "pattern " + string(b)
	case g.Args != nil:
		return "exactly " + compact(g.Args)
	}
	return "rule " + g.Rule + " of approval " + shortid.Of(g.ApprovalID)
}

// offerView is one entry of an approval's grant_offers.
type offerView struct {
	Scope    string     `json:"scope"`
	Offered  bool       `json:"offered"`
	Why      string     `json:"why"`
	TakesFor bool       `json:"takes_for"`
	MaxFor   string     `json:"max_for"`
	Covers   *grantView `json:"covers"`
}

// showOffer prints what approving approval id with scope would save —
// what the grant covers, for whom, until when — before it is saved; a
// scope not offered says why (the server refuses it too).
func (a *adminCall) showOffer(ctx context.Context, id string, scope approvals.Scope, forDur string) error {
	var ap struct {
		GrantOffers []offerView `json:"grant_offers"`
	}
	if done, err := a.call(ctx, "approvals show "+id, "GET", "/api/v1/approvals/"+url.PathEscape(id), nil, nil, &ap); done {
		return err
	}
	for _, o := range ap.GrantOffers {
		if o.Scope != string(scope) {
			continue
		}
		if !o.Offered || o.Covers == nil {
			fmt.Fprintf(a.stdout, "scope %s is not offered: %s\n", scope, o.Why)
			return nil
		}
		fmt.Fprintln(a.stdout, offerLine(o, forDur))
		return nil
	}
	return nil
}

// offerLine is "saves a session grant: …" for an offer, with the end
// --for sets.
func offerLine(o offerView, forDur string) string {
	g := o.Covers
	line := fmt.Sprintf("saves a %s grant: %s calls of %s (%s)", o.Scope, grantWho(*g), g.Tool, grantCovers(*g))
	switch {
	case forDur != "":
		line += ", for " + forDur
	case g.Until != nil:
		line += ", until " + fmtTime(*g.Until)
	default:
		line += ", until revoked"
	}
	return line
}

func grantWho(g grantView) string {
	switch {
	case g.RunID != "":
		return "this run's"
	case g.Requester != "":
		return g.Requester + "'s in " + g.Thread + ","
	}
	return "anyone's"
}

// shownApproval is an approval as GET /api/v1/approvals/{id} shows it,
// with what happens next and the grant offers.
type shownApproval struct {
	approvals.Approval
	Next *struct {
		Text string `json:"text"`
	} `json:"next"`
	GrantOffers []offerView `json:"grant_offers"`
}

// printEscalation adds to `approvals show` the ladder, what happens next,
// and what each scope would save.
func printEscalation(w io.Writer, a *shownApproval) {
	for i, s := range a.Ladder {
		mark := " "
		if i < a.Escalated {
			mark = "✓"
		}
		what := s.Kind()
		if len(s.AddApprovers) > 0 {
			what += " " + strings.Join(s.AddApprovers, ", ")
		}
		fmt.Fprintf(w, "ladder  %s after %s: %s\n", mark, s.After, what)
	}
	if len(a.AddedApprovers) > 0 {
		fmt.Fprintf(w, "added     %s (by escalation)\n", strings.Join(a.AddedApprovers, ", "))
	}
	if a.Next != nil && a.Next.Text != "" {
		fmt.Fprintf(w, "next      %s\n", a.Next.Text)
	}
	for _, o := range a.GrantOffers {
		if o.Offered && o.Covers != nil {
			fmt.Fprintf(w, "scope     %s\n", offerLine(o, ""))
		} else {
			fmt.Fprintf(w, "scope     %s not offered: %s\n", o.Scope, o.Why)
		}
	}
}
