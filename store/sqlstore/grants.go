package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/opsgate/opsgate/approvals"
)

const grantColumns = `id, scope, tool, thread, requester, rule_key, args, pattern, approval_id, actor,
	created_at, expires_at, revoked_at, revoked_by, run_id, seq`

// insertGrant stores a grant made by a decision, in the deciding
// transaction. An approval makes at most one grant, so its id is unique.
func insertGrant(ctx context.Context, t *tx, g *approvals.Grant) error {
	args, pattern, err := grantJSON(g)
	if err != nil {
		return fmt.Errorf("grant %s: %w", g.ID, err)
	}
	if _, err := t.exec(ctx, `INSERT INTO grants (id, scope, tool, thread, requester, rule_key, args, pattern, approval_id,
		actor, created_at, expires_at, revoked_at, revoked_by, run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		g.ID, string(g.Scope), g.Tool, g.Thread, g.Requester, g.RuleKey, args, pattern, g.ApprovalID, g.Actor,
		micros(g.At), nullMicros(g.ExpiresAt), nullMicros(g.RevokedAt), g.RevokedBy, g.RunID); err != nil {
		return fmt.Errorf("grant %s: %w", g.ID, err)
	}
	return nil
}

// grantJSON encodes a grant's arguments and pattern (NULL when absent).
func grantJSON(g *approvals.Grant) (args, pattern any, err error) {
	if g.Args != nil {
		b, err := json.Marshal(g.Args)
		if err != nil {
			return nil, nil, err
		}
		args = string(b)
	}
	if g.Pattern != nil {
		b, err := json.Marshal(g.Pattern)
		if err != nil {
			return nil, nil, err
		}
		pattern = string(b)
	}
	return args, pattern, nil
}

func scanGrant(r rowScanner) (*approvals.Grant, int64, error) {
	var g approvals.Grant
	var scope string
	var args, pattern sql.NullString
	var created, seq int64
	var expires, revoked sql.NullInt64
	if err := r.Scan(&g.ID, &scope, &g.Tool, &g.Thread, &g.Requester, &g.RuleKey, &args, &pattern, &g.ApprovalID, &g.Actor,
		&created, &expires, &revoked, &g.RevokedBy, &g.RunID, &seq); err != nil {
		return nil, 0, err
	}
	g.Scope = approvals.Scope(scope)
	if args.Valid {
		if err := json.Unmarshal([]byte(args.String), &g.Args); err != nil {
			return nil, 0, fmt.Errorf("grant %s: args: %w", g.ID, err)
		}
	}
	if pattern.Valid {
		if err := json.Unmarshal([]byte(pattern.String), &g.Pattern); err != nil {
			return nil, 0, fmt.Errorf("grant %s: pattern: %w", g.ID, err)
		}
	}
	g.At, g.ExpiresAt, g.RevokedAt = fromMicros(created), optMicros(expires), optMicros(revoked)
	return &g, seq, nil
}

// GrantList implements approvals.Store: newest first. With ActiveAt,
// revoked and expired grants are left out.
func (s *Store) GrantList(ctx context.Context, p approvals.GrantListParams) ([]*approvals.Grant, string, error) {
	limit := pageLimit(p.Limit)
	where, args := "1 = 1", []any{}
	if p.Tool != "" {
		where += " AND tool = ?"
		args = append(args, p.Tool)
	}
	if !p.ActiveAt.IsZero() {
		where += " AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)"
		args = append(args, micros(p.ActiveAt))
	}
	if p.Cursor != "" {
		c, err := strconv.ParseInt(p.Cursor, 10, 64)
		if err != nil {
			return nil, "", fmt.Errorf("store: grant list: bad cursor %q", p.Cursor)
		}
		where += " AND seq < ?"
		args = append(args, c)
	}
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(`SELECT `+grantColumns+` FROM grants WHERE `+where+
		` ORDER BY seq DESC LIMIT ?`), append(args, limit+1)...)
	if err != nil {
		return nil, "", fmt.Errorf("store: grant list: %w", err)
	}
	defer rows.Close()
	items := []*approvals.Grant{}
	var seqs []int64
	for rows.Next() {
		g, seq, err := scanGrant(rows)
		if err != nil {
			return nil, "", fmt.Errorf("store: grant list: %w", err)
		}
		items, seqs = append(items, g), append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("store: grant list: %w", err)
	}
	items, next := page(items, seqs, limit)
	return items, next, nil
}

// GrantRevoke implements approvals.Store: the grant is marked revoked and
// the audit entries appended in one transaction.
func (s *Store) GrantRevoke(ctx context.Context, p approvals.GrantRevokeParams) (*approvals.Grant, error) {
	var out *approvals.Grant
	var result error
	err := s.inTx(ctx, "grant revoke", func(t *tx) error {
		g, _, err := scanGrant(t.queryRow(ctx, `SELECT `+grantColumns+` FROM grants WHERE id = ?`+t.d.ForUpdate, p.ID))
		if err != nil {
			return mapErr(err, "grant revoke", "grant "+p.ID)
		}
		if g.RevokedAt != nil {
			out, result = g, fmt.Errorf("store: grant %s: %w", p.ID, approvals.ErrGrantRevoked)
			return nil
		}
		at := orNow(p.At)
		if _, err := t.exec(ctx, `UPDATE grants SET revoked_at = ?, revoked_by = ? WHERE id = ? AND revoked_at IS NULL`,
			micros(at), p.Actor, p.ID); err != nil {
			return fmt.Errorf("store: grant revoke %s: %w", p.ID, err)
		}
		at = fromMicros(micros(at))
		g.RevokedAt, g.RevokedBy = &at, p.Actor
		out = g
		return appendAudit(ctx, t, p.Audit)
	})
	if err != nil {
		return nil, err
	}
	return out, result
}
