package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/opsgate/opsgate/core"
)

// insertOutbox queues ms (due at once) in one statement and marks the
// outbox topic. An empty ID gets a UUIDv7; a zero CreatedAt becomes now.
func insertOutbox(ctx context.Context, t *tx, now time.Time, ms ...core.OutboxMessage) error {
	if len(ms) == 0 {
		return nil
	}
	args := make([]any, 0, len(ms)*11)
	for _, m := range ms {
		if m.ID == "" {
			id, err := uuid.NewV7()
			if err != nil {
				return fmt.Errorf("store: queue outbox message: id: %w", err)
			}
			m.ID = id.String()
		}
		if m.Thread.Channel == "" {
			return fmt.Errorf("store: queue outbox message %s: thread has no channel", m.ID)
		}
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		}
		args = append(args, m.ID, m.Thread.Channel, threadString(m.Thread), string(m.Kind), m.Text, m.ApprovalID, m.RunID,
			string(core.DeliveryPending), micros(m.CreatedAt), micros(m.CreatedAt), m.Replaces)
	}
	// Rows get their seq in VALUES order, so a thread's messages keep theirs.
	if _, err := t.exec(ctx, `INSERT INTO outbox (id, channel, thread, kind, text, approval_id, run_id, status,
		next_attempt_at, created_at, replaces) VALUES `+valueRows(len(ms), 11), args...); err != nil {
		return fmt.Errorf("store: queue %d outbox messages (%s…): %w", len(ms), ms[0].ID, err)
	}
	t.notify(core.TopicOutbox)
	return nil
}

const deliveryColumns = `id, thread, kind, text, approval_id, run_id, created_at, seq, status, attempts,
	next_attempt_at, chunks_sent, refs, last_error, sent_at, replaces`

func scanDelivery(r rowScanner) (*core.Delivery, error) {
	var d core.Delivery
	var thread, kind, status, refs string
	var created, next int64
	var sent sql.NullInt64
	if err := r.Scan(&d.ID, &thread, &kind, &d.Text, &d.ApprovalID, &d.RunID, &created, &d.Seq, &status,
		&d.Attempts, &next, &d.ChunksSent, &refs, &d.LastError, &sent, &d.Replaces); err != nil {
		return nil, err
	}
	th, err := parseThread(thread)
	if err != nil {
		return nil, fmt.Errorf("outbox %s: %w", d.ID, err)
	}
	if err := json.Unmarshal([]byte(refs), &d.Refs); err != nil {
		return nil, fmt.Errorf("outbox %s: refs: %w", d.ID, err)
	}
	d.Thread, d.Kind, d.Status = th, core.MessageKind(kind), core.DeliveryStatus(status)
	d.CreatedAt, d.NextAttemptAt, d.SentAt = fromMicros(created), fromMicros(next), optMicros(sent)
	return &d, nil
}

func scanDeliveries(rows *sql.Rows) ([]*core.Delivery, error) {
	defer rows.Close()
	out := []*core.Delivery{}
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// OutboxClaim implements core.OutboxStore. "Oldest unsent of its thread"
// counts pending messages whatever their due time, so a message waiting
// out a retry holds back the ones queued after it; dead messages do not
// block their thread (they wait for an admin).
//
// A message whose lease is live is not claimed again, not even by its
// holder: re-claiming the messages a worker was sending locked their rows
// until the claim committed, and each send's own update of its message
// waited for that commit (issue 31: a tenth of the active sessions under
// the Slack load sat in Lock:transactionid on that update).
func (s *Store) OutboxClaim(ctx context.Context, p core.OutboxClaimParams) ([]*core.Delivery, error) {
	if p.Limit <= 0 || p.Owner == "" {
		return nil, errors.New("store: outbox claim: owner and a positive limit are required")
	}
	now := micros(p.Now)
	args := []any{p.Owner, micros(p.LeaseUntil), p.Channel, now, now, p.Limit}
	var out []*core.Delivery
	claim := func(rows *sql.Rows, err error) error {
		if err != nil {
			return fmt.Errorf("store: outbox claim: %w", err)
		}
		if out, err = scanDeliveries(rows); err != nil {
			return fmt.Errorf("store: outbox claim: %w", err)
		}
		slices.SortFunc(out, func(a, b *core.Delivery) int { return cmp.Compare(a.Seq, b.Seq) })
		return nil
	}
	// Select and lease in one statement, as RunClaim does. It writes
	// nothing else, so without a group writer (Postgres) it runs outside
	// a transaction block: one round trip, not three; and it is a lease,
	// so it commits without waiting for the WAL flush (Config.LeaseDB).
	if s.writer == nil {
		err := claim(s.lease.QueryContext(ctx, s.dialect.Rebind(outboxClaimSQL(s.dialect)), args...))
		return out, s.classified(err)
	}
	err := s.inTx(ctx, "outbox claim", func(t *tx) error {
		return claim(t.query(ctx, outboxClaimSQL(t.d), args...))
	})
	return out, err
}

// outboxClaimSQL is OutboxClaim's statement, with the pending status a
// literal for the partial indexes of migration 0016 (see runClaimSQL):
// outbox_pending walks only a channel's pending messages in queue order and
// stops after Limit heads; outbox_thread_pending answers "is there an older
// pending message in this thread" from the thread's pending entries alone.
// A claim so reads the heads it returns plus the pending rows queued before
// them that it must pass over (leased, waiting out a retry, or behind their
// thread's head) — never the sent backlog.
func outboxClaimSQL(d Dialect) string {
	return `UPDATE outbox SET owner = ?, lease_until = ?
		WHERE id IN (SELECT m.id FROM outbox m` + d.indexedBy("outbox_pending") + `
			WHERE m.channel = ? AND m.status = 'pending' AND m.next_attempt_at <= ?
			  AND (m.owner IS NULL OR m.lease_until IS NULL OR m.lease_until <= ?)
			  AND NOT EXISTS (SELECT 1 FROM outbox o` + d.indexedBy("outbox_thread_pending") + ` WHERE o.thread = m.thread AND o.status = 'pending' AND o.seq < m.seq` + d.Fence + `)
			ORDER BY m.seq LIMIT ?` + d.SkipLocked + `)
		RETURNING ` + deliveryColumns
}

// lockOutbox reads the owner and progress of a message under the row lock
// and checks the caller holds it.
func lockOutbox(ctx context.Context, t *tx, op, id, owner string) (chunks int, refs string, err error) {
	var cur sql.NullString
	if err := t.queryRow(ctx, `SELECT owner, chunks_sent, refs FROM outbox WHERE id = ?`+t.d.ForUpdate, id).
		Scan(&cur, &chunks, &refs); err != nil {
		return 0, "", mapErr(err, op, "outbox message "+id)
	}
	if cur.String != owner {
		return 0, "", fmt.Errorf("store: %s %s: held by %q, not %q: %w", op, id, cur.String, owner, core.ErrConflict)
	}
	return chunks, refs, nil
}

// OutboxChunkSent implements core.OutboxStore. Recording a chunk already
// recorded is a no-op (a retry after a lost answer); skipping ahead is a
// conflict. The usual case — the caller holds the message and records the
// next chunk — is one guarded statement; anything else is explained by
// the transaction below.
func (s *Store) OutboxChunkSent(ctx context.Context, id, owner string, chunk int, ref core.MessageRef, now time.Time) error {
	b, err := json.Marshal(ref)
	if err != nil {
		return fmt.Errorf("store: outbox chunk sent %s: ref: %w", id, err)
	}
	// refs is always a compact JSON array written by this store: append
	// by text, so both backends do it without their JSON functions.
	ok, err := s.refUpdate(ctx, "outbox chunk sent", id, ref, `UPDATE outbox SET
		refs = CASE WHEN refs = '[]' THEN '[' || CAST(? AS TEXT) || ']'
			ELSE substr(refs, 1, length(refs) - 1) || ',' || CAST(? AS TEXT) || ']' END,
		chunks_sent = chunks_sent + 1 WHERE id = ? AND owner = ? AND chunks_sent = ?`, nil,
		string(b), string(b), id, owner, chunk)
	if err != nil || ok {
		return err
	}
	return s.inTx(ctx, "outbox chunk sent", func(t *tx) error {
		chunks, refsJSON, err := lockOutbox(ctx, t, "outbox chunk sent", id, owner)
		if err != nil {
			return err
		}
		if chunk < chunks {
			return nil
		}
		if chunk > chunks {
			return fmt.Errorf("store: outbox chunk sent %s: chunk %d after %d sent: %w", id, chunk, chunks, core.ErrConflict)
		}
		var refs []core.MessageRef
		if err := json.Unmarshal([]byte(refsJSON), &refs); err != nil {
			return fmt.Errorf("store: outbox chunk sent %s: refs: %w", id, err)
		}
		b, err := json.Marshal(append(refs, ref))
		if err != nil {
			return fmt.Errorf("store: outbox chunk sent %s: refs: %w", id, err)
		}
		if _, err := t.exec(ctx, `UPDATE outbox SET refs = ?, chunks_sent = ? WHERE id = ?`, string(b), chunks+1, id); err != nil {
			return fmt.Errorf("store: outbox chunk sent %s: %w", id, err)
		}
		return rememberRef(ctx, t, id, ref)
	})
}

// refUpdate is guardedUpdate for a statement that records ref as sent for
// outbox message id: when it matched, the reference's thread is
// remembered (message_threads) in the same transaction.
func (s *Store) refUpdate(ctx context.Context, op, id string, ref core.MessageRef, q string, topics []string, args ...any) (bool, error) {
	if s.dialect.OneStatement {
		return s.refUpdateOne(ctx, op, ref, q, topics, args...)
	}
	var matched bool
	err := s.inTx(ctx, op, func(t *tx) error {
		r, err := t.exec(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		matched = true
		for _, topic := range topics {
			t.notify(topic)
		}
		return rememberRef(ctx, t, id, ref)
	})
	if err != nil {
		return false, fmt.Errorf("store: %s: %w", op, err)
	}
	return matched, nil
}

// refUpdateOne is refUpdate as one statement outside a transaction block
// (Dialect.OneStatement): the update, then the reference's thread from the
// row it returned. Every reply's delivery ends with it, so under load it
// is one round trip instead of four — BEGIN, the update, the insert and
// COMMIT — with the message's row lock held across all four. It records a
// message sent, so it commits on Config.LeaseDB: lost in a crash of the
// database, the message is sent again.
func (s *Store) refUpdateOne(ctx context.Context, op string, ref core.MessageRef, q string, topics []string, args ...any) (bool, error) {
	stmt := "WITH u AS (" + q + " RETURNING channel, thread)"
	if ref.ID != "" {
		stmt += `, m AS (INSERT INTO message_threads (channel, ref, thread)
		SELECT channel, CAST(? AS TEXT), thread FROM u ON CONFLICT DO NOTHING)`
		args = append(args, ref.ID)
	}
	var n int64
	if err := s.lease.QueryRowContext(ctx, s.dialect.Rebind(stmt+" SELECT count(*) FROM u"), args...).Scan(&n); err != nil {
		return false, s.classified(fmt.Errorf("store: %s: %w", op, err))
	}
	if n > 0 && len(topics) > 0 {
		s.afterCommit(&tx{topics: topics})
	}
	return n > 0, nil
}

// rememberRef records which thread the message with platform reference ref
// (a chunk of outbox message id) went to, for ThreadOfMessage. A reference
// already known (an edit keeps its message's) keeps its thread.
func rememberRef(ctx context.Context, t *tx, id string, ref core.MessageRef) error {
	if ref.ID == "" {
		return nil
	}
	if _, err := t.exec(ctx, `INSERT INTO message_threads (channel, ref, thread)
		SELECT channel, ?, thread FROM outbox WHERE id = ? ON CONFLICT DO NOTHING`, ref.ID, id); err != nil {
		return fmt.Errorf("remember the thread of %s: %w", ref.ID, err)
	}
	return nil
}

var _ core.OutboxRefStore = (*Store)(nil)

// OutboxRefs implements core.OutboxRefStore.
func (s *Store) OutboxRefs(ctx context.Context, id string) ([]core.MessageRef, error) {
	var refs string
	err := s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT refs FROM outbox WHERE id = ?`), id).Scan(&refs)
	if err != nil {
		return nil, mapErr(err, "outbox refs", "outbox message "+id)
	}
	var rs []core.MessageRef
	if err := json.Unmarshal([]byte(refs), &rs); err != nil {
		return nil, fmt.Errorf("store: outbox refs %s: %w", id, err)
	}
	return rs, nil
}

// ThreadOfMessage implements core.ThreadStore.
func (s *Store) ThreadOfMessage(ctx context.Context, ref core.MessageRef) (core.Thread, error) {
	var thread string
	err := s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT thread FROM message_threads WHERE channel = ? AND ref = ?`),
		ref.Channel, ref.ID).Scan(&thread)
	if err != nil {
		return core.Thread{}, mapErr(err, "thread of message", ref.Channel+" message "+ref.ID)
	}
	th, err := parseThread(thread)
	if err != nil {
		return core.Thread{}, fmt.Errorf("store: thread of message %s: %w", ref.ID, err)
	}
	return th, nil
}

// ThreadSeen implements core.ThreadStore: one statement, two index probes
// (events_thread and outbox_thread_at, migration 0004), each stopping at
// the first row.
func (s *Store) ThreadSeen(ctx context.Context, thread core.Thread) (bool, error) {
	th := threadString(thread)
	var seen bool
	err := s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT EXISTS (SELECT 1 FROM events WHERE thread = ?)
		OR EXISTS (SELECT 1 FROM outbox WHERE thread = ?)`), th, th).Scan(&seen)
	if err != nil {
		return false, fmt.Errorf("store: thread seen %s: %w", th, err)
	}
	return seen, nil
}

// OutboxLastChunkSent records a message's last chunk and marks it sent:
// OutboxChunkSent then OutboxDone, in one guarded statement when the
// caller holds the message and this chunk is the next (the usual case; the
// delivery worker finds it as an optional capability). Otherwise it falls
// back to the two calls, which explain a refusal or treat a chunk already
// recorded as a retry.
func (s *Store) OutboxLastChunkSent(ctx context.Context, id, owner string, chunk int, ref core.MessageRef, now time.Time) error {
	b, err := json.Marshal(ref)
	if err != nil {
		return fmt.Errorf("store: outbox last chunk sent %s: ref: %w", id, err)
	}
	ok, err := s.refUpdate(ctx, "outbox last chunk sent", id, ref, `UPDATE outbox SET
		refs = CASE WHEN refs = '[]' THEN '[' || CAST(? AS TEXT) || ']'
			ELSE substr(refs, 1, length(refs) - 1) || ',' || CAST(? AS TEXT) || ']' END,
		chunks_sent = chunks_sent + 1, status = ?, sent_at = ?, owner = NULL, lease_until = NULL
		WHERE id = ? AND owner = ? AND chunks_sent = ?`, []string{core.TopicOutbox},
		string(b), string(b), string(core.DeliverySent), micros(now), id, owner, chunk)
	if err != nil || ok {
		return err
	}
	if err := s.OutboxChunkSent(ctx, id, owner, chunk, ref, now); err != nil {
		return err
	}
	return s.OutboxDone(ctx, id, owner, now)
}

// OutboxDone implements core.OutboxStore. The thread's next message becomes
// claimable, so the outbox topic is announced. The owner guard is part of
// the update: one statement when the caller holds the message, the usual
// case; otherwise the transaction below says why not.
func (s *Store) OutboxDone(ctx context.Context, id, owner string, now time.Time) error {
	ok, err := s.guardedUpdate(ctx, s.lease, "outbox done", `UPDATE outbox SET status = ?, sent_at = ?, owner = NULL, lease_until = NULL
		WHERE id = ? AND owner = ?`, []string{core.TopicOutbox}, string(core.DeliverySent), micros(now), id, owner)
	if err != nil || ok {
		return err
	}
	return s.inTx(ctx, "outbox done", func(t *tx) error {
		_, _, err := lockOutbox(ctx, t, "outbox done", id, owner)
		if err == nil {
			err = fmt.Errorf("store: outbox done %s: not updated: %w", id, core.ErrConflict)
		}
		return err
	})
}

// guardedUpdate runs q, an UPDATE guarded to match one row or none, as one
// statement (execOne on db) and reports whether it matched; topics are
// announced when it did.
func (s *Store) guardedUpdate(ctx context.Context, db *sql.DB, op, q string, topics []string, args ...any) (bool, error) {
	n, err := s.execOne(ctx, db, op, q, topics, args...)
	return n > 0, err
}

// execOne runs one write statement and returns the rows it affected;
// topics are announced when it affected any. Without a group writer
// (Postgres) it runs outside any transaction block, on db (the store's
// DB, or LeaseDB for a lease), so it is its own transaction: one round
// trip instead of BEGIN, the statement and COMMIT. With one (SQLite) it
// joins the writer's batch.
func (s *Store) execOne(ctx context.Context, db *sql.DB, op, q string, topics []string, args ...any) (int64, error) {
	var n int64
	if s.writer != nil {
		err := s.inTx(ctx, op, func(t *tx) error {
			r, err := t.exec(ctx, q, args...)
			if err != nil {
				return err
			}
			if n, err = r.RowsAffected(); err == nil && n > 0 {
				for _, topic := range topics {
					t.notify(topic)
				}
			}
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("store: %s: %w", op, err)
		}
		return n, nil
	}
	r, err := db.ExecContext(ctx, s.dialect.Rebind(q), args...)
	if err == nil {
		n, err = r.RowsAffected()
	}
	if err != nil {
		return 0, s.classified(fmt.Errorf("store: %s: %w", op, err))
	}
	if n > 0 && len(topics) > 0 {
		s.afterCommit(&tx{topics: topics})
	}
	return n, nil
}

// OutboxRetry implements core.OutboxStore.
func (s *Store) OutboxRetry(ctx context.Context, p core.OutboxRetryParams) error {
	return s.inTx(ctx, "outbox retry", func(t *tx) error {
		if _, _, err := lockOutbox(ctx, t, "outbox retry", p.ID, p.Owner); err != nil {
			return err
		}
		status, next := core.DeliveryPending, micros(p.RetryAt)
		if p.Dead {
			status, next = core.DeliveryDead, micros(orNow(p.Now))
			t.notify(core.TopicOutbox) // the thread's next message may go now
		}
		if _, err := t.exec(ctx, `UPDATE outbox SET status = ?, attempts = attempts + 1, next_attempt_at = ?,
			last_error = ?, owner = NULL, lease_until = NULL WHERE id = ?`, string(status), next, p.Error, p.ID); err != nil {
			return fmt.Errorf("store: outbox retry %s: %w", p.ID, err)
		}
		return nil
	})
}

// OutboxList implements core.OutboxStore: oldest first; an empty Status
// lists every message.
func (s *Store) OutboxList(ctx context.Context, p core.OutboxListParams) ([]*core.Delivery, string, error) {
	limit := pageLimit(p.Limit)
	where, args := "1 = 1", []any{}
	if p.Status != "" {
		where += outboxStatusWhere(p.Status)
		args = append(args, string(p.Status))
	}
	if p.Cursor != "" {
		c, err := strconv.ParseInt(p.Cursor, 10, 64)
		if err != nil {
			return nil, "", fmt.Errorf("store: outbox list: bad cursor %q", p.Cursor)
		}
		where += " AND seq > ?"
		args = append(args, c)
	}
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(outboxListSQL(s.dialect, p.Status, where)), append(args, limit+1)...)
	if err != nil {
		return nil, "", fmt.Errorf("store: outbox list: %w", err)
	}
	items, err := scanDeliveries(rows)
	if err != nil {
		return nil, "", fmt.Errorf("store: outbox list: %w", err)
	}
	seqs := make([]int64, len(items))
	for i, d := range items {
		seqs[i] = d.Seq
	}
	items, next := page(items, seqs, limit)
	return items, next, nil
}

// outboxListSQL is OutboxList's statement for a WHERE clause filtering by
// status st (or by none). SQLite, which keeps no statistics, is told the
// status's partial index: left to itself it walks the table in seq order
// for pending messages, every sent one included.
func outboxListSQL(d Dialect, st core.DeliveryStatus, where string) string {
	from := "outbox"
	switch st {
	case core.DeliveryPending:
		from += d.indexedBy("outbox_thread_pending")
	case core.DeliveryDead:
		from += d.indexedBy("outbox_dead")
	}
	return `SELECT ` + deliveryColumns + ` FROM ` + from + ` WHERE ` + where + ` ORDER BY seq LIMIT ?`
}

// outboxStatusWhere is OutboxList's status filter. For pending and dead
// it adds the predicate of their partial index (outbox_pending, migration
// 0016; outbox_dead, 0019), spelled as the migrations do, so those are
// listed from the index, never by walking the sent backlog (see
// runStatusWhere: a parameter alone does not let the planner use a partial
// index). Sent messages, the bulk of the table, are listed from the
// primary key.
func outboxStatusWhere(st core.DeliveryStatus) string {
	switch st {
	case core.DeliveryPending:
		return " AND status = ? AND status = 'pending'"
	case core.DeliveryDead:
		return " AND status = ? AND status = 'dead'"
	}
	return " AND status = ?"
}

// OutboxRequeue implements core.OutboxStore: only a dead message can be
// requeued (ErrConflict otherwise); it is due at once with a fresh budget.
func (s *Store) OutboxRequeue(ctx context.Context, id string, now time.Time) error {
	return s.inTx(ctx, "outbox requeue", func(t *tx) error {
		var status string
		if err := t.queryRow(ctx, `SELECT status FROM outbox WHERE id = ?`+t.d.ForUpdate, id).Scan(&status); err != nil {
			return mapErr(err, "outbox requeue", "outbox message "+id)
		}
		if status != string(core.DeliveryDead) {
			return fmt.Errorf("store: outbox requeue %s: status %s, not dead: %w", id, status, core.ErrConflict)
		}
		if _, err := t.exec(ctx, `UPDATE outbox SET status = ?, attempts = 0, next_attempt_at = ?, owner = NULL,
			lease_until = NULL WHERE id = ?`, string(core.DeliveryPending), micros(now), id); err != nil {
			return fmt.Errorf("store: outbox requeue %s: %w", id, err)
		}
		t.notify(core.TopicOutbox)
		return nil
	})
}

// OutboxCardRef implements core.OutboxStore: the first reference of the
// first card for approvalID in thread that reached the platform, even if
// only partly sent.
func (s *Store) OutboxCardRef(ctx context.Context, approvalID string, thread core.Thread) (*core.MessageRef, error) {
	var refs string
	err := s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT refs FROM outbox WHERE approval_id = ? AND thread = ?
		AND kind = ? AND chunks_sent > 0 ORDER BY seq LIMIT 1`),
		approvalID, threadString(thread), string(core.KindCard)).Scan(&refs)
	if err != nil {
		return nil, mapErr(err, "outbox card ref", "card for approval "+approvalID)
	}
	var rs []core.MessageRef
	if err := json.Unmarshal([]byte(refs), &rs); err != nil {
		return nil, fmt.Errorf("store: outbox card ref: %w", err)
	}
	if len(rs) == 0 {
		return nil, mapErr(sql.ErrNoRows, "outbox card ref", "card for approval "+approvalID)
	}
	return &rs[0], nil
}

// ClaimStatements returns RunClaim's and OutboxClaim's statements as d
// runs them, for tests that check their query plans read the partial
// indexes of migration 0016.
func ClaimStatements(d Dialect) (runs, outbox string) {
	return d.Rebind(runClaimStatement(d)), d.Rebind(outboxClaimSQL(d))
}

// ListStatements returns, as d runs them, RunList's statement filtered by
// run status alone and OutboxList's filtered by delivery status alone, for
// tests that check their query plans read the partial indexes of
// migrations 0016 and 0019. Their parameters are the status, then the
// limit.
func ListStatements(d Dialect, run core.RunStatus, delivery core.DeliveryStatus) (runs, outbox string) {
	return d.Rebind(runListSQL("1 = 1" + runStatusWhere(run))), d.Rebind(outboxListSQL(d, delivery, "1 = 1"+outboxStatusWhere(delivery)))
}

// OverviewOutboxStatements returns Overview's dead-letter count, and its
// per-channel backlog and dead-letter counts (parameter: the channel), as d
// runs them, for the same tests.
func OverviewOutboxStatements(d Dialect) (dead, backlog, channelDead string) {
	return d.Rebind(overviewDeadSQL), d.Rebind(overviewBacklogSQL), d.Rebind(overviewChannelDeadSQL(d))
}
