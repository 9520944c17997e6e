package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/history"
)

// auditRow is one audit entry on the audit page: the sentence people read
// (core/history), the links, and the raw entry one click away.
type auditRow struct {
	Seq                     int64
	At, Kind, Sentence      string
	RunID, ApprovalID       string
	RunShort, ApprovalShort string
	Raw, Hash               string
}

// maxCallLookups bounds the approvals one audit page reads to name the
// calls its decisions are about.
const maxCallLookups = 100

// auditRows puts entries in words. The calls of decisions come from the
// approval.requested entries on the page, else from the approvals
// themselves (at most maxCallLookups reads); one that cannot be read is
// named by its tool.
func (s *server) auditRows(ctx context.Context, entries []approvals.AuditEntry) []auditRow {
	calls := s.auditCalls(ctx, entries)
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.RunID, e.ApprovalID)
	}
	short := pageShortIDs(ids...)
	rows := make([]auditRow, 0, len(entries))
	for _, e := range entries {
		raw, err := json.MarshalIndent(e, "", "  ")
		if err != nil {
			raw = []byte(fmt.Sprintf("(the entry cannot be shown as JSON: %v)", err))
		}
		rows = append(rows, auditRow{Seq: e.Seq, At: ts(e.At), Kind: string(e.Kind), Sentence: history.Sentence(e, calls),
			RunID: e.RunID, ApprovalID: e.ApprovalID, RunShort: short[e.RunID], ApprovalShort: short[e.ApprovalID],
			Raw: string(raw), Hash: e.Hash})
	}
	return rows
}

// auditCalls finds the calls entries name (history.Calls).
func (s *server) auditCalls(ctx context.Context, entries []approvals.AuditEntry) history.Calls {
	calls := history.CallsOf(entries)
	for i, id := range history.Missing(entries, calls) {
		if i == maxCallLookups {
			break
		}
		a, err := s.o.Store.ApprovalGet(ctx, id)
		if err != nil {
			continue
		}
		calls[id] = history.Call{Tool: a.Tool, Args: a.ProposedArgs}
	}
	return calls
}

// auditExportQuery is the query of the Export links: the page's filters.
func auditExportQuery(p approvals.AuditListParams) string {
	v := url.Values{}
	for k, x := range map[string]string{"actor": p.Actor, "tool": p.Tool, "run": p.RunID, "kind": p.Kind} {
		if x != "" {
			v.Set(k, x)
		}
	}
	return v.Encode()
}

// auditExportPage is how many entries an export reads at a time.
const auditExportPage = 500

// auditExport downloads the audit log, oldest first, as CSV or JSON Lines
// (?format=csv|jsonl), filtered like the audit page; each entry carries its
// sentence (core/history).
func (s *server) auditExport(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	format := q.Get("format")
	if format == "" {
		format = history.FormatCSV
	}
	x, err := history.NewExporter(w, format)
	if err != nil {
		s.plainError(w, http.StatusBadRequest, "Unknown export format: choose csv or jsonl.")
		return
	}
	p := approvals.AuditListParams{Limit: auditExportPage, Actor: strings.TrimSpace(q.Get("actor")), Tool: strings.TrimSpace(q.Get("tool")),
		RunID: strings.TrimSpace(q.Get("run")), Kind: strings.TrimSpace(q.Get("kind"))}
	// Read the first page before answering, so a store error is a page,
	// not a cut download.
	entries, err := s.o.Store.AuditList(r.Context(), p)
	if err != nil {
		s.fail(w, r, fmt.Errorf("web: export audit: %w", err))
		return
	}
	w.Header().Set("Content-Type", x.ContentType())
	w.Header().Set("Content-Disposition", `attachment; filename="opsgate-audit.`+format+`"`)
	w.Header().Set("Cache-Control", "no-store")
	for {
		if err := x.Write(entries, s.auditCalls(r.Context(), entries)); err != nil {
			s.log.WarnContext(r.Context(), "web: audit export cut short", "err", err)
			return
		}
		if len(entries) < p.Limit {
			break
		}
		p.After = entries[len(entries)-1].Seq
		if entries, err = s.o.Store.AuditList(r.Context(), p); err != nil {
			s.log.ErrorContext(r.Context(), "web: audit export cut short", "after", strconv.FormatInt(p.After, 10), "err", err)
			return
		}
	}
	if err := x.Flush(); err != nil {
		s.log.WarnContext(r.Context(), "web: audit export cut short", "err", err)
	}
}
