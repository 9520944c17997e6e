package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/shortid"
)

// The kinds of id a path's {id} names.
const (
	kindRun      = "run"
	kindApproval = "approval"
)

// CodeAmbiguousID is the error code of a short id that names several runs
// or approvals (409); the message lists them.
const CodeAmbiguousID = "ambiguous_id"

// fullID lets the {id} of a run or approval path be typed the way people
// see it (core/shortid): a short form of the id's random part, a prefix of
// the id, or the whole id. One that names exactly one id is replaced by
// that id before h runs, so h (and whatever it checks) sees whole ids
// only; one that names several is refused (409 ambiguous_id, listing
// them); one that names none goes on unchanged, for h's own 404.
func (s *server) fullID(kind string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := s.resolveID(r.Context(), kind, r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		r.SetPathValue("id", id)
		h(w, r)
	}
}

// resolveID is fullID's lookup. A whole UUID, or text that cannot be an
// id, is returned as typed without asking the store.
func (s *server) resolveID(ctx context.Context, kind, typed string) (string, error) {
	if len(typed) == 36 || !shortid.Valid(typed) {
		return typed, nil
	}
	limit := shortid.MaxListed + 1
	var cands []shortid.Candidate
	switch kind {
	case kindRun:
		runs, _, err := s.o.Store.RunList(ctx, core.RunListParams{IDPrefix: typed, Limit: limit})
		if err != nil {
			return "", fmt.Errorf("api: find run %q: %w", typed, err)
		}
		for _, r := range runs {
			cands = append(cands, shortid.Candidate{Kind: kindRun, ID: r.ID,
				Summary: fmt.Sprintf("%s, %s, %s", r.Flow, r.Status, r.CreatedAt.UTC().Format(time.RFC3339))})
		}
	case kindApproval:
		as, _, err := s.o.Store.ApprovalList(ctx, approvals.ApprovalListParams{IDPrefix: typed, Limit: limit})
		if err != nil {
			return "", fmt.Errorf("api: find approval %q: %w", typed, err)
		}
		for _, a := range as {
			cands = append(cands, shortid.Candidate{Kind: kindApproval, ID: a.ID,
				Summary: fmt.Sprintf("%s, %s, %s", a.Tool, a.Status, a.CreatedAt.UTC().Format(time.RFC3339))})
		}
	}
	c, err := shortid.Resolve(typed, cands)
	var ae *shortid.AmbiguousError
	switch {
	case err == nil:
		return c.ID, nil
	case errors.As(err, &ae):
		ae.More = ae.More || len(cands) == limit
		return "", errf(http.StatusConflict, CodeAmbiguousID, "%s", ae.Error())
	}
	return typed, nil // names nothing: the handler's 404
}
