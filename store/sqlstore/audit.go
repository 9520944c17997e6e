package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/opsgate/opsgate/approvals"
)

// appendAudit seals entries onto the end of the chain inside t. It takes
// the dialect's audit lock first, so two transactions never read the same
// tail; on SQLite the write transaction itself is that lock. The caller's
// entries are not modified.
func appendAudit(ctx context.Context, t *tx, entries []approvals.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	if t.d.AuditLock != "" {
		if _, err := t.exec(ctx, t.d.AuditLock); err != nil {
			return fmt.Errorf("store: audit append: lock: %w", err)
		}
	}
	var seq int64
	var hash string
	err := t.queryRow(ctx, `SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`).Scan(&seq, &hash)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store: audit append: read tail: %w", err)
	}
	for _, e := range entries {
		e.At = orNow(e.At)
		e.Seal(seq+1, hash)
		var detail any
		if len(e.Detail) > 0 {
			detail = string(e.Detail)
		}
		if _, err := t.exec(ctx, `INSERT INTO audit (seq, at, kind, actor, run_id, approval_id, tool, detail, prev_hash, hash)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.Seq, micros(e.At), e.Kind, e.Actor, e.RunID, e.ApprovalID, e.Tool, detail, e.PrevHash, e.Hash); err != nil {
			return fmt.Errorf("store: audit append %s: %w", e.Kind, err)
		}
		seq, hash = e.Seq, e.Hash
	}
	return nil
}

// AuditList implements approvals.Store. Filters are exact matches; a page
// holds at most 1000 entries.
func (s *Store) AuditList(ctx context.Context, p approvals.AuditListParams) ([]approvals.AuditEntry, error) {
	where, args := "seq > ?", []any{p.After}
	for _, f := range []struct{ col, v string }{
		{"actor", p.Actor}, {"tool", p.Tool}, {"run_id", p.RunID}, {"approval_id", p.ApprovalID},
	} {
		if f.v != "" {
			where += " AND " + f.col + " = ?"
			args = append(args, f.v)
		}
	}
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(`SELECT seq, at, kind, actor, run_id, approval_id, tool,
		detail, prev_hash, hash FROM audit WHERE `+where+` ORDER BY seq LIMIT ?`), append(args, pageLimit(p.Limit))...)
	if err != nil {
		return nil, fmt.Errorf("store: audit list: %w", err)
	}
	defer rows.Close()
	out := []approvals.AuditEntry{}
	for rows.Next() {
		var e approvals.AuditEntry
		var at int64
		var detail sql.NullString
		if err := rows.Scan(&e.Seq, &at, &e.Kind, &e.Actor, &e.RunID, &e.ApprovalID, &e.Tool, &detail,
			&e.PrevHash, &e.Hash); err != nil {
			return nil, fmt.Errorf("store: audit list: %w", err)
		}
		e.At = fromMicros(at)
		if detail.Valid {
			e.Detail = json.RawMessage(detail.String)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: audit list: %w", err)
	}
	return out, nil
}

// AuditVerify walks the whole audit log in pages and returns the sequence
// number of the first entry that was altered, reordered or whose
// predecessor was removed, or 0 when the chain is intact. It backs
// `opsgate audit verify`.
func (s *Store) AuditVerify(ctx context.Context) (badSeq int64, err error) {
	var after int64
	prev := ""
	for {
		page, err := s.AuditList(ctx, approvals.AuditListParams{After: after, Limit: maxPage})
		if err != nil {
			return 0, fmt.Errorf("store: audit verify: %w", err)
		}
		if len(page) == 0 {
			return 0, nil
		}
		if bad := approvals.VerifyChain(prev, page); bad != 0 {
			return bad, nil
		}
		last := page[len(page)-1]
		after, prev = last.Seq, last.Hash
	}
}
