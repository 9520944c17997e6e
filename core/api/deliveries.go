package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/opsgate/opsgate/core"
)

func (s *server) listDeliveries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := core.OutboxListParams{Status: core.DeliveryStatus(q.Get("status")), Cursor: q.Get("cursor")}
	if p.Status != "" && !p.Status.Valid() {
		s.fail(w, r, invalid("status", "unknown delivery status %q: want dead, pending or sent", p.Status))
		return
	}
	limit, err := queryLimit(r, defaultLimit, maxLimit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p.Limit = limit
	ds, next, err := listPage(r.Context(), "deliveries", p.Cursor, s.o.Store.OutboxList, p, core.OutboxListParams{Limit: 1})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, listView[deliveryView]{Items: viewsOf(ds, newDeliveryView), NextCursor: next})
}

func (s *server) requeueDelivery(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := s.o.Store.OutboxRequeue(r.Context(), id, s.o.Now().UTC())
	switch {
	case isNotFound(err):
		s.fail(w, r, errf(http.StatusNotFound, "not_found", "delivery %q not found", id))
		return
	case errors.Is(err, core.ErrConflict):
		s.fail(w, r, errf(http.StatusConflict, "not_dead", "delivery %q is not dead; only dead deliveries can be requeued", id))
		return
	case err != nil:
		s.fail(w, r, fmt.Errorf("api: requeue delivery %s: %w", id, err))
		return
	}
	s.log.InfoContext(r.Context(), "api: delivery requeued", "id", id, "actor", actorFrom(r.Context()).ID)
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "status": string(core.DeliveryPending)})
}

// maxIDPrefix is the longest id_prefix accepted: a whole UUID.
const maxIDPrefix = 36

// idPrefix reads the optional id_prefix filter of the run and approval
// lists: the start of an id (letters, digits, '-'), as the CLI sends it to
// resolve a short id the way git and docker do. The list answers every
// match; the caller decides whether one is unambiguous.
func idPrefix(q url.Values) (string, error) {
	p := q.Get("id_prefix")
	if len(p) > maxIDPrefix {
		return "", invalid("id_prefix", "id_prefix is longer than an id (%d characters)", maxIDPrefix)
	}
	for _, c := range p {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return "", invalid("id_prefix", "id_prefix may hold only letters, digits and '-', got %q", p)
		}
	}
	return p, nil
}
