package shortid

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// The kinds of id Find looks up.
const (
	KindRun      = "run"
	KindApproval = "approval"
)

// Store is what Find reads: the run and approval lists of core.Store,
// whose IDPrefix filter matches as Matches does.
type Store interface {
	RunList(ctx context.Context, p core.RunListParams) ([]*core.Run, string, error)
	ApprovalList(ctx context.Context, p approvals.ApprovalListParams) ([]*approvals.Approval, string, error)
}

// Find turns what a person typed into the whole id of a run or an approval
// (kind KindRun or KindApproval) in st, for the surfaces that read the store
// themselves (the API's paths, the console's pages): a whole UUID, or text
// that cannot be an id, comes back as typed without a read; otherwise the
// one id typed names, an *AmbiguousError listing what it names, or an error
// matching ErrNotFound.
func Find(ctx context.Context, st Store, kind, typed string) (string, error) {
	if len(typed) == uuidLen || !Valid(typed) {
		return typed, nil
	}
	limit := MaxListed + 1
	var cands []Candidate
	summary := func(what string, status any, at time.Time) string {
		return fmt.Sprintf("%s, %s, %s", what, status, at.UTC().Format(time.RFC3339))
	}
	switch kind {
	case KindRun:
		runs, _, err := st.RunList(ctx, core.RunListParams{IDPrefix: typed, Limit: limit})
		if err != nil {
			return "", fmt.Errorf("shortid: find run %q: %w", typed, err)
		}
		for _, r := range runs {
			cands = append(cands, Candidate{Kind: kind, ID: r.ID, Summary: summary(r.Flow, r.Status, r.CreatedAt)})
		}
	case KindApproval:
		as, _, err := st.ApprovalList(ctx, approvals.ApprovalListParams{IDPrefix: typed, Limit: limit})
		if err != nil {
			return "", fmt.Errorf("shortid: find approval %q: %w", typed, err)
		}
		for _, a := range as {
			cands = append(cands, Candidate{Kind: kind, ID: a.ID, Summary: summary(a.Tool, a.Status, a.CreatedAt)})
		}
	default:
		return "", fmt.Errorf("shortid: find: unknown kind %q", kind)
	}
	c, err := Resolve(typed, cands)
	var ae *AmbiguousError
	if errors.As(err, &ae) {
		ae.More = ae.More || len(cands) == limit
	}
	return c.ID, err
}
