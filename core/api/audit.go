package api

import (
	"fmt"
	"net/http"

	"github.com/opsgate/opsgate/approvals"
)

func (s *server) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, err := queryInt64(r, "after")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if c := q.Get("cursor"); c != "" {
		// The audit cursor is the last sequence number seen, so "after"
		// and "cursor" mean the same; a cursor wins.
		if after, err = queryInt64(r, "cursor"); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	limit, err := queryLimit(r, 100, maxAuditLimit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := approvals.AuditListParams{After: after, Limit: limit, Actor: q.Get("actor"), Tool: q.Get("tool"),
		RunID: q.Get("run_id"), ApprovalID: q.Get("approval_id"), Kind: q.Get("kind")}
	switch q.Get("order") {
	case "", "oldest":
	case "newest":
		// Newest first (the CLI's audit list, the TUI's history): the
		// cursor is then the entry to go back from.
		p.Newest, p.Before, p.After = true, after, 0
	default:
		s.fail(w, r, invalid("order", "order must be oldest or newest, got %q", q.Get("order")))
		return
	}
	entries, err := s.o.Store.AuditList(r.Context(), p)
	if err != nil {
		s.fail(w, r, fmt.Errorf("api: list audit: %w", err))
		return
	}
	out := listView[auditView]{Items: viewsOf(entries, newAuditView)}
	if len(entries) == limit {
		out.NextCursor = fmt.Sprint(entries[len(entries)-1].Seq)
	}
	writeJSON(w, http.StatusOK, out)
}

// verifyResponse is the chain's state: ok and the first entry that does
// not link, plus the head (newest seq and its hash). An intact chain whose
// head moved back since an operator last recorded it lost its newest
// entries, which the chain alone cannot show.
type verifyResponse struct {
	OK          bool   `json:"ok"`
	FirstBadSeq int64  `json:"first_bad_seq"`
	Problem     string `json:"problem,omitempty"`
	HeadSeq     int64  `json:"head_seq"`
	HeadHash    string `json:"head_hash"`
	// LegacyUntil is the last entry sealed before the chain had a key.
	LegacyUntil int64 `json:"legacy_until"`
}

func (s *server) verifyAudit(w http.ResponseWriter, r *http.Request) {
	rep, err := s.o.Store.AuditVerifyReport(r.Context())
	if err != nil {
		s.fail(w, r, fmt.Errorf("api: verify audit: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, verifyResponse{OK: rep.Intact(), FirstBadSeq: rep.BadSeq, Problem: rep.Problem(),
		HeadSeq: rep.HeadSeq, HeadHash: rep.HeadHash, LegacyUntil: rep.LegacyUntil})
}
