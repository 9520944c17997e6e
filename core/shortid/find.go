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

// Visible keeps, of what the store lists, what the caller may see, in
// order: core/authority's Viewer for the caller. Find looks only among
// these, so a short id never names, lists or counts as a rival a run or
// an approval the caller may not see.
type Visible interface {
	Runs(ctx context.Context, runs []*core.Run) ([]*core.Run, error)
	Approvals(ctx context.Context, as []*approvals.Approval) ([]*approvals.Approval, error)
}

// findPage and findPages bound what Find reads: pages of findPage matches,
// at most findPages of them, filtered by Visible as they come.
const (
	findPage  = 100
	findPages = 10
)

// Find turns what a person typed into the whole id of a run or an approval
// (kind KindRun or KindApproval) in st, for the surfaces that read the store
// themselves (the API's paths, the console's pages): a whole UUID, or text
// that cannot be an id, comes back as typed without a read; otherwise the
// one id typed names among what vis keeps, an *AmbiguousError listing what
// it names there, or an error matching ErrNotFound. Uniqueness is judged
// after vis, never before: an id the caller may not see is no candidate.
// When the bounded read stops before the last match, one visible match is
// not taken as unique (it is listed as ambiguous, "and more"), and none is
// not found: more characters narrow the read.
func Find(ctx context.Context, st Store, vis Visible, kind, typed string) (string, error) {
	if len(typed) == uuidLen || !Valid(typed) {
		return typed, nil
	}
	if vis == nil {
		return "", errors.New("shortid: find: no judge of what the caller may see")
	}
	var list func(cursor string) ([]Candidate, string, error)
	summary := func(what string, status any, at time.Time) string {
		return fmt.Sprintf("%s, %s, %s", what, status, at.UTC().Format(time.RFC3339))
	}
	switch kind {
	case KindRun:
		list = func(cursor string) ([]Candidate, string, error) {
			runs, next, err := st.RunList(ctx, core.RunListParams{IDPrefix: typed, Limit: findPage, Cursor: cursor})
			if err == nil {
				runs, err = vis.Runs(ctx, runs)
			}
			if err != nil {
				return nil, "", fmt.Errorf("shortid: find run %q: %w", typed, err)
			}
			out := make([]Candidate, len(runs))
			for i, r := range runs {
				out[i] = Candidate{Kind: kind, ID: r.ID, Summary: summary(r.Flow, r.Status, r.CreatedAt)}
			}
			return out, next, nil
		}
	case KindApproval:
		list = func(cursor string) ([]Candidate, string, error) {
			as, next, err := st.ApprovalList(ctx, approvals.ApprovalListParams{IDPrefix: typed, Limit: findPage, Cursor: cursor})
			if err == nil {
				as, err = vis.Approvals(ctx, as)
			}
			if err != nil {
				return nil, "", fmt.Errorf("shortid: find approval %q: %w", typed, err)
			}
			out := make([]Candidate, len(as))
			for i, a := range as {
				out[i] = Candidate{Kind: kind, ID: a.ID, Summary: summary(a.Tool, a.Status, a.CreatedAt)}
			}
			return out, next, nil
		}
	default:
		return "", fmt.Errorf("shortid: find: unknown kind %q", kind)
	}
	var cands []Candidate
	cursor, read := "", false // read: every match was read
	for range findPages {
		page, next, err := list(cursor)
		if err != nil {
			return "", err
		}
		cands = append(cands, page...)
		if next == "" {
			read = true
			break
		}
		if len(cands) > MaxListed {
			break // ambiguous already
		}
		cursor = next
	}
	c, err := Resolve(typed, cands)
	var ae *AmbiguousError
	switch {
	case errors.As(err, &ae):
		ae.More = ae.More || !read
	case err == nil && !read:
		return "", &AmbiguousError{Typed: typed, Matches: []Candidate{c}, More: true}
	}
	return c.ID, err
}
