package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/shortid"
)

// shortRedirect serves /runs/{id} and /approvals/{id} when {id} is not a
// whole id but the short id people see (core/shortid): one that names
// exactly one run or approval redirects to its page; one that names
// several answers 409 listing them. It reports false when typed names
// nothing (or cannot be an id), leaving the caller's 404.
func (s *server) shortRedirect(w http.ResponseWriter, r *http.Request, kind, typed string) bool {
	if len(typed) >= 36 || !shortid.Valid(typed) {
		return false
	}
	limit := shortid.MaxListed + 1
	var cands []shortid.Candidate
	switch kind {
	case "run":
		runs, _, err := s.o.Store.RunList(r.Context(), core.RunListParams{IDPrefix: typed, Limit: limit})
		if err != nil {
			s.fail(w, r, fmt.Errorf("web: find run %q: %w", typed, err))
			return true
		}
		for _, x := range runs {
			cands = append(cands, shortid.Candidate{Kind: kind, ID: x.ID, Summary: fmt.Sprintf("%s, %s, %s", x.Flow, x.Status, ts(x.CreatedAt))})
		}
	case "approval":
		as, _, err := s.o.Store.ApprovalList(r.Context(), approvals.ApprovalListParams{IDPrefix: typed, Limit: limit})
		if err != nil {
			s.fail(w, r, fmt.Errorf("web: find approval %q: %w", typed, err))
			return true
		}
		for _, x := range as {
			cands = append(cands, shortid.Candidate{Kind: kind, ID: x.ID, Summary: fmt.Sprintf("%s, %s, %s", x.Tool, x.Status, ts(x.CreatedAt))})
		}
	}
	c, err := shortid.Resolve(typed, cands)
	var ae *shortid.AmbiguousError
	switch {
	case err == nil:
		http.Redirect(w, r, "/"+kind+"s/"+url.PathEscape(c.ID), http.StatusSeeOther)
		return true
	case errors.As(err, &ae):
		ae.More = ae.More || len(cands) == limit
		s.plainError(w, http.StatusConflict, strings.ReplaceAll(ae.Error(), "\n", " · "))
		return true
	}
	return false
}

// pageShortIDs gives the ids shown on one page their short forms
// (shortid.Shortest), so no two of them read alike.
func pageShortIDs(ids ...string) map[string]string {
	var nonEmpty []string
	for _, id := range ids {
		if id != "" {
			nonEmpty = append(nonEmpty, id)
		}
	}
	return shortid.Shortest(nonEmpty...)
}
