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
		list = visiblePage(ctx, func(cursor string) ([]*core.Run, string, error) {
			return st.RunList(ctx, core.RunListParams{IDPrefix: typed, Limit: findPage, Cursor: cursor})
		}, vis.Runs, func(r *core.Run) Candidate {
			return Candidate{Kind: kind, ID: r.ID, Summary: summary(r.Flow, r.Status, r.CreatedAt)}
		})
	case KindApproval:
		list = visiblePage(ctx, func(cursor string) ([]*approvals.Approval, string, error) {
			return st.ApprovalList(ctx, approvals.ApprovalListParams{IDPrefix: typed, Limit: findPage, Cursor: cursor})
		}, vis.Approvals, func(a *approvals.Approval) Candidate {
			return Candidate{Kind: kind, ID: a.ID, Summary: summary(a.Tool, a.Status, a.CreatedAt)}
		})
	default:
		return "", fmt.Errorf("shortid: find: unknown kind %q", kind)
	}
	var cands []Candidate
	cursor, read := "", false // read: every match was read
	for range findPages {
		page, next, err := list(cursor)
		if err != nil {
			return "", fmt.Errorf("shortid: find %s %q: %w", kind, typed, err)
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

// visiblePage reads one page of matches with list, keeps what the caller
// may see, and makes candidates of them.
func visiblePage[T any](ctx context.Context, list func(cursor string) ([]T, string, error),
	keep func(context.Context, []T) ([]T, error), cand func(T) Candidate) func(string) ([]Candidate, string, error) {
	return func(cursor string) ([]Candidate, string, error) {
		items, next, err := list(cursor)
		if err == nil {
			items, err = keep(ctx, items)
		}
		if err != nil {
			return nil, "", err
		}
		out := make([]Candidate, len(items))
		for i, it := range items {
			out[i] = cand(it)
		}
		return out, next, nil
	}
}
