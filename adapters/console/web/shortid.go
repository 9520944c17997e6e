package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/opsgate/opsgate/core/shortid"
)

// shortRedirect serves /runs/{id} and /approvals/{id} when {id} is not a
// whole id but the short id people see (core/shortid): one that names
// exactly one run or approval the actor may see redirects to its page
// (where the authority judges it again); one that names several answers
// 409 listing them. It reports false when typed names
// nothing (or cannot be an id), leaving the caller's 404.
func (s *server) shortRedirect(w http.ResponseWriter, r *http.Request, kind, typed string) bool {
	// Only what the signed-in actor may see is a candidate (core/authority).
	id, err := shortid.Find(r.Context(), s.o.Store, s.auth.Viewer(infoFrom(r.Context()).auth), kind, typed)
	var ae *shortid.AmbiguousError
	switch {
	case errors.As(err, &ae):
		s.plainError(w, http.StatusConflict, strings.ReplaceAll(ae.Error(), "\n", " · "))
		return true
	case errors.Is(err, shortid.ErrNotFound):
		return false
	case err != nil:
		s.fail(w, r, err)
		return true
	case id == typed:
		return false // a whole id, or not an id: the page's own 404
	}
	http.Redirect(w, r, "/"+kind+"s/"+url.PathEscape(id), http.StatusSeeOther)
	return true
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
