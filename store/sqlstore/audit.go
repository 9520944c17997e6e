package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// appendAudit adds entries to the chain inside t; the caller's entries are
// not modified.
//
// Inline (SQLite): it seals them onto the tail at once; the write
// transaction itself serializes appends.
//
// Deferred (Postgres, Dialect.DeferAuditSeal): it inserts them, unsealed,
// into audit_pending, and the sealer chains them after commit. Sealing
// inline would need a cluster-wide lock on the tail held through the
// commit's WAL flush, so every transaction that audits — every decision —
// would commit one at a time; 100 concurrent decisions then queue for
// hundreds of milliseconds. The entries are still written atomically with
// what they record; only their place in the chain is assigned a few
// milliseconds later, and every reader of the log (AuditList, AuditVerify)
// seals what is pending first, so no reader ever sees an unsealed entry.
func appendAudit(ctx context.Context, t *tx, entries []approvals.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	if t.d.DeferAuditSeal {
		q, args := pendingAuditInsert(entries)
		if _, err := t.exec(ctx, q, args...); err != nil {
			return fmt.Errorf("store: audit append: %w", err)
		}
		t.audited = true
		return nil
	}
	if t.d.AuditLock != "" {
		if _, err := t.exec(ctx, t.d.AuditLock); err != nil {
			return fmt.Errorf("store: audit append: lock: %w", err)
		}
	}
	return sealOnto(ctx, t, entries)
}

// sealOnto reads the chain's tail and appends entries sealed after it, in
// one statement. The caller holds whatever serializes appends.
func sealOnto(ctx context.Context, t *tx, entries []approvals.AuditEntry) error {
	var tail approvals.AuditEntry
	var at int64
	var detail sql.NullString
	err := t.queryRow(ctx, `SELECT seq, at, kind, actor, run_id, approval_id, tool, detail, prev_hash, hash
		FROM audit ORDER BY seq DESC LIMIT 1`).Scan(&tail.Seq, &at, &tail.Kind, &tail.Actor, &tail.RunID, &tail.ApprovalID,
		&tail.Tool, &detail, &tail.PrevHash, &tail.Hash)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store: audit append: read tail: %w", err)
	}
	seq, hash := tail.Seq, tail.Hash
	if approvals.Keyed(hash) {
		if t.key == nil {
			// A legacy entry after a keyed one would break the chain for
			// good; a process without the key must not write (entries
			// pending on Postgres wait for a sealer that has it).
			return fmt.Errorf("store: audit append: %w", ErrAuditKeyMissing)
		}
		tail.At = fromMicros(at)
		if detail.Valid {
			tail.Detail = json.RawMessage(detail.String)
		}
		if !tail.VerifyHash(t.key) {
			// Another process seals with another key: appending would
			// fork the chain. Refuse loudly instead.
			return fmt.Errorf("store: audit append after entry %d: %w", tail.Seq, ErrAuditKeyMismatch)
		}
	}
	args := make([]any, 0, len(entries)*10)
	for _, e := range entries {
		e.At = orNow(e.At)
		e.SealKeyed(seq+1, hash, t.key)
		args = append(args, e.Seq, micros(e.At), e.Kind, e.Actor, e.RunID, e.ApprovalID, e.Tool, auditDetail(e.Detail), e.PrevHash, e.Hash)
		seq, hash = e.Seq, e.Hash
	}
	if _, err := t.exec(ctx, `INSERT INTO audit (seq, at, kind, actor, run_id, approval_id, tool, detail, prev_hash, hash)
		VALUES `+valueRows(len(entries), 10), args...); err != nil {
		return fmt.Errorf("store: audit append: %w", err)
	}
	return nil
}

// pendingAuditInsert is the statement (? placeholders) and arguments that
// add entries, unsealed, to audit_pending.
func pendingAuditInsert(entries []approvals.AuditEntry) (string, []any) {
	args := make([]any, 0, len(entries)*len(pendingCols))
	for _, row := range auditRows(entries) {
		args = append(args, row...)
	}
	return `INSERT INTO audit_pending (` + strings.Join(pendingCols, ", ") + `) VALUES ` + valueRows(len(entries), len(pendingCols)), args
}

func auditDetail(d json.RawMessage) any {
	if len(d) == 0 {
		return nil
	}
	return string(d)
}

// sealBatch bounds one sealing transaction.
const sealBatch = 500

// SealAudit chains every pending audit entry (Dialect.DeferAuditSeal), in
// the order they were inserted, under the audit lock so replicas sealing
// at once form one chain. It is a no-op on a store that seals inline.
// The store's sealer calls it after every commit that audits; readers of
// the log call it first.
func (s *Store) SealAudit(ctx context.Context) error {
	if !s.dialect.DeferAuditSeal {
		return nil
	}
	for {
		n := 0
		err := s.inTx(ctx, "audit seal", func(t *tx) error {
			if _, err := t.exec(ctx, t.d.AuditLock); err != nil {
				return fmt.Errorf("store: audit seal: lock: %w", err)
			}
			rows, err := t.query(ctx, `DELETE FROM audit_pending WHERE id IN
				(SELECT id FROM audit_pending ORDER BY id LIMIT ?) RETURNING id, at, kind, actor, run_id, approval_id, tool, detail`, sealBatch)
			if err != nil {
				return fmt.Errorf("store: audit seal: take pending: %w", err)
			}
			type pending struct {
				id int64
				e  approvals.AuditEntry
			}
			var ps []pending
			for rows.Next() {
				var p pending
				var at int64
				var detail sql.NullString
				if err := rows.Scan(&p.id, &at, &p.e.Kind, &p.e.Actor, &p.e.RunID, &p.e.ApprovalID, &p.e.Tool, &detail); err != nil {
					rows.Close()
					return fmt.Errorf("store: audit seal: %w", err)
				}
				p.e.At = fromMicros(at)
				if detail.Valid {
					p.e.Detail = json.RawMessage(detail.String)
				}
				ps = append(ps, p)
			}
			if err := closeRows(rows); err != nil {
				return fmt.Errorf("store: audit seal: %w", err)
			}
			if len(ps) == 0 {
				return nil
			}
			slices.SortFunc(ps, func(a, b pending) int { return cmp.Compare(a.id, b.id) })
			entries := make([]approvals.AuditEntry, len(ps))
			for i, p := range ps {
				entries[i] = p.e
			}
			n = len(entries)
			return sealOnto(ctx, t, entries)
		})
		if err != nil {
			return err
		}
		if n < sealBatch {
			return nil
		}
	}
}

// sealer runs SealAudit when kicked — after every commit that audited, and
// by the backend once migrated — and, from the first kick on, every
// sealerInterval, which picks up entries a crashed replica committed but
// never sealed. (Before the first kick the schema may not exist yet.)
func (s *Store) sealer(ctx context.Context, kick <-chan struct{}) {
	log := s.log
	t := time.NewTicker(sealerInterval)
	defer t.Stop()
	var tick <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			tick = t.C
		case <-tick:
		}
		sctx, cancel := context.WithTimeout(ctx, sealerTimeout)
		if err := s.SealAudit(sctx); err != nil && ctx.Err() == nil {
			log.Error("seal audit entries; will retry", "err", err)
		}
		cancel()
	}
}

// KickSealer asks the audit sealer to run now (a no-op on a store that
// seals inline). Backends call it once migrated, so entries left pending
// by a replica that died are sealed at start.
func (s *Store) KickSealer() {
	select {
	case s.sealKick <- struct{}{}:
	default:
	}
}

// Sealer timing: the interval only matters for entries nobody kicked (a
// replica died between commit and seal).
const (
	sealerInterval = 5 * time.Second
	sealerTimeout  = 30 * time.Second
)

// SetAuditKey makes the store seal new audit entries with key (HMAC) and
// verify keyed entries with it. Call it right after opening, before the
// first write: entries appended without a key are legacy entries, which
// verify only before the first keyed one. A nil key means no key.
func (s *Store) SetAuditKey(key approvals.AuditKey) {
	s.keyMu.Lock()
	s.auditKey = append(approvals.AuditKey(nil), key...)
	if key == nil {
		s.auditKey = nil
	}
	s.keyMu.Unlock()
}

func (s *Store) key() approvals.AuditKey {
	s.keyMu.RLock()
	defer s.keyMu.RUnlock()
	return s.auditKey
}

// ErrAuditKeyMismatch reports an audit chain whose newest keyed entry was
// not sealed with the key this process has: another key (a replica
// configured differently, a regenerated key file) would fork the chain.
var ErrAuditKeyMismatch = errors.New("the audit chain was sealed with a different key")

// ErrAuditKeyMissing refuses an audit append by a store without a key onto
// a chain whose newest entry is keyed.
var ErrAuditKeyMissing = errors.New("the audit chain is keyed and this process has no audit key (audit.key_file)")

// AuditAdoptKey sets the audit key (SetAuditKey) and checks it against the
// chain: when the newest entry is keyed it must verify under key (else
// ErrAuditKeyMismatch, and the store's key is left as it was); when the chain holds
// only legacy entries, one keyed "audit.keyed" entry is appended at once,
// so the head is keyed from the first start with a key and its link
// protects every legacy entry before it. serve calls it at start.
func (s *Store) AuditAdoptKey(ctx context.Context, key approvals.AuditKey, now time.Time) error {
	if len(key) == 0 {
		return errors.New("store: audit adopt key: empty key")
	}
	// Check the sealed head before sealing anything pending with key.
	head, err := s.auditHead(ctx)
	if err != nil {
		return fmt.Errorf("store: audit adopt key: %w", err)
	}
	if head != nil && approvals.Keyed(head.Hash) && !head.VerifyHash(key) {
		return fmt.Errorf("store: audit entry %d: %w", head.Seq, ErrAuditKeyMismatch)
	}
	s.SetAuditKey(key)
	if err := s.SealAudit(ctx); err != nil {
		return fmt.Errorf("store: audit adopt key: %w", err)
	}
	if head, err = s.auditHead(ctx); err != nil {
		return fmt.Errorf("store: audit adopt key: %w", err)
	}
	if head == nil || approvals.Keyed(head.Hash) {
		return nil
	}
	entry := approvals.AuditEntry{At: now, Kind: approvals.AuditKeyed, Actor: "system",
		Detail: json.RawMessage(fmt.Sprintf(`{"legacy_until":%d}`, head.Seq))}
	if err := s.inTx(ctx, "audit adopt key", func(t *tx) error {
		return appendAudit(ctx, t, []approvals.AuditEntry{entry})
	}); err != nil {
		return err
	}
	return s.SealAudit(ctx)
}

// auditHead reads the newest sealed entry, nil for an empty chain.
func (s *Store) auditHead(ctx context.Context) (*approvals.AuditEntry, error) {
	var e approvals.AuditEntry
	var at int64
	var detail sql.NullString
	err := s.db.QueryRowContext(ctx, `SELECT seq, at, kind, actor, run_id, approval_id, tool, detail, prev_hash, hash
		FROM audit ORDER BY seq DESC LIMIT 1`).Scan(&e.Seq, &at, &e.Kind, &e.Actor, &e.RunID, &e.ApprovalID, &e.Tool, &detail, &e.PrevHash, &e.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read audit head: %w", err)
	}
	e.At = fromMicros(at)
	if detail.Valid {
		e.Detail = json.RawMessage(detail.String)
	}
	return &e, nil
}

// AuditAppend appends entries that belong to no run or approval (a
// configuration reload, a refused token) to the chain, in one transaction.
func (s *Store) AuditAppend(ctx context.Context, entries []approvals.AuditEntry) error {
	return s.inTx(ctx, "audit append", func(t *tx) error { return appendAudit(ctx, t, entries) })
}

// AuditList implements approvals.Store. Filters are exact matches; a page
// holds at most 1000 entries.
func (s *Store) AuditList(ctx context.Context, p approvals.AuditListParams) ([]approvals.AuditEntry, error) {
	if err := s.SealAudit(ctx); err != nil {
		return nil, err
	}
	return s.auditList(ctx, p)
}

// auditList reads sealed entries only; AuditList seals first.
func (s *Store) auditList(ctx context.Context, p approvals.AuditListParams) ([]approvals.AuditEntry, error) {
	where, args, order := "seq > ?", []any{p.After}, "seq"
	if p.Newest {
		where, args, order = "1 = 1", nil, "seq DESC"
		if p.Before > 0 {
			where, args = "seq < ?", []any{p.Before}
		}
	}
	for _, f := range []struct{ col, v string }{
		{"actor", p.Actor}, {"tool", p.Tool}, {"run_id", p.RunID}, {"approval_id", p.ApprovalID}, {"kind", p.Kind},
	} {
		if f.v != "" {
			where += " AND " + f.col + " = ?"
			args = append(args, f.v)
		}
	}
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(`SELECT seq, at, kind, actor, run_id, approval_id, tool,
		detail, prev_hash, hash FROM audit WHERE `+where+` ORDER BY `+order+` LIMIT ?`), append(args, pageLimit(p.Limit))...)
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

// AuditVerify walks the whole audit log and returns the sequence number of
// the first entry that was altered, reordered or whose predecessor was
// removed, or 0 when the chain is intact. AuditVerifyReport also returns
// the chain's head.
func (s *Store) AuditVerify(ctx context.Context) (badSeq int64, err error) {
	r, err := s.AuditVerifyReport(ctx)
	return r.BadSeq, err
}

// AuditVerifyReport walks the whole audit log in pages, like AuditVerify,
// and returns the chain's head with the result: removing the newest
// entries leaves an intact, shorter chain, which only a head recorded
// elsewhere reveals. For an intact chain the head is the last entry
// verified; for a broken one, the newest entry at the time of the report.
// It backs `opsgate audit verify` and GET /api/v1/audit/verify.
func (s *Store) AuditVerifyReport(ctx context.Context) (approvals.ChainReport, error) {
	var r approvals.ChainReport
	if err := s.SealAudit(ctx); err != nil {
		return r, fmt.Errorf("store: audit verify: %w", err)
	}
	var after int64
	prev := ""
	key := s.key()
	for {
		page, err := s.auditList(ctx, approvals.AuditListParams{After: after, Limit: maxPage})
		if err != nil {
			return r, fmt.Errorf("store: audit verify: %w", err)
		}
		if len(page) == 0 {
			r.HeadSeq, r.HeadHash = after, prev
			r.UnkeyedHead = key != nil && after > 0 && !approvals.Keyed(prev)
			return r, nil
		}
		bad := approvals.VerifyChainKeyed(prev, page, key)
		for _, e := range page {
			if bad != 0 && e.Seq >= bad {
				break
			}
			if !approvals.Keyed(e.Hash) {
				r.LegacyUntil = e.Seq
			}
		}
		if bad != 0 {
			r.BadSeq = bad
			err := s.read.QueryRowContext(ctx, `SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`).Scan(&r.HeadSeq, &r.HeadHash)
			if err != nil {
				return r, fmt.Errorf("store: audit verify: read head: %w", err)
			}
			return r, nil
		}
		last := page[len(page)-1]
		after, prev = last.Seq, last.Hash
	}
}
