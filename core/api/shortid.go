package api

import (
	"errors"
	"net/http"

	"github.com/opsgate/opsgate/core/shortid"
)

// The kinds of id a path's {id} names.
const (
	kindRun      = shortid.KindRun
	kindApproval = shortid.KindApproval
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
		typed := r.PathValue("id")
		// Only what the token may see is a candidate (core/authority), so
		// neither a match nor an ambiguity tells it of another's ids.
		id, err := shortid.Find(r.Context(), s.o.Store, s.auth.Viewer(authFrom(r.Context())), kind, typed)
		var ae *shortid.AmbiguousError
		switch {
		case errors.As(err, &ae):
			s.fail(w, r, errf(http.StatusConflict, CodeAmbiguousID, "%s", ae.Error()))
			return
		case errors.Is(err, shortid.ErrNotFound):
			id = typed // names nothing: the handler's 404
		case err != nil:
			s.fail(w, r, err)
			return
		}
		r.SetPathValue("id", id)
		h(w, r)
	}
}
