package sqlstore

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/opsgate/opsgate/core"
)

// The two sources of a thread's messages, in the order a page lists them
// at the same instant: an outbox message is written by the transaction
// that records its request (or later), so at a tie it is the newer one.
const (
	srcEvent  = 0
	srcOutbox = 1
)

// msgKey is a message's place in a thread's newest-first order: time, then
// source, then the outbox seq (outbound) or the event id (inbound). The
// cursor of ThreadMessages is the key of the last message of a page.
type msgKey struct {
	at  int64
	src int
	seq int64
	id  string
}

func (k msgKey) encode() string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d:%d:%d:%s", k.at, k.src, k.seq, k.id))
}

func decodeMsgKey(s string) (msgKey, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return msgKey{}, err
	}
	parts := strings.SplitN(string(b), ":", 4)
	if len(parts) != 4 {
		return msgKey{}, errors.New("want four fields")
	}
	var k msgKey
	if k.at, err = strconv.ParseInt(parts[0], 10, 64); err != nil {
		return msgKey{}, err
	}
	if k.src, err = strconv.Atoi(parts[1]); err != nil || (k.src != srcEvent && k.src != srcOutbox) {
		return msgKey{}, errors.New("bad source")
	}
	if k.seq, err = strconv.ParseInt(parts[2], 10, 64); err != nil {
		return msgKey{}, err
	}
	k.id = parts[3]
	return k, nil
}

// newer reports whether k is listed before o (newest first). Ties between
// two events are broken by the database (event id order in its collation);
// the merge only compares keys of different sources, or outbox keys.
func (k msgKey) newer(o msgKey) bool {
	if c := cmp.Compare(k.at, o.at); c != 0 {
		return c > 0
	}
	if k.src != o.src {
		return k.src > o.src
	}
	return k.seq > o.seq
}

// ThreadMessages implements core.ThreadStore. Each source is read with its
// own keyset query (limit+1 rows, an index range scan on (thread, time));
// the two sorted lists are merged here, which keeps the SQL the same on
// both backends.
func (s *Store) ThreadMessages(ctx context.Context, p core.ThreadMessagesParams) ([]core.ThreadMessage, string, error) {
	if p.Thread.IsZero() {
		return nil, "", errors.New("store: thread messages: a thread is required")
	}
	limit := pageLimit(p.Limit)
	th := threadString(p.Thread)
	var cur *msgKey
	if p.Before != "" {
		k, err := decodeMsgKey(p.Before)
		if err != nil {
			return nil, "", fmt.Errorf("store: thread messages: bad cursor %q: %w", p.Before, err)
		}
		cur = &k
	}

	// Inbound: after the cursor means an older time, or, at the cursor's
	// time, a smaller event id (cursor on an event) or any event (cursor
	// on an outbox message, which sorts first at a tie).
	evWhere, evArgs := "thread = ?", []any{th}
	if cur != nil {
		if cur.src == srcEvent {
			evWhere += " AND (received_at < ? OR (received_at = ? AND event_id < ?))"
			evArgs = append(evArgs, cur.at, cur.at, cur.id)
		} else {
			evWhere += " AND received_at <= ?"
			evArgs = append(evArgs, cur.at)
		}
	}
	ins, err := s.threadEvents(ctx, evWhere, append(evArgs, limit+1))
	if err != nil {
		return nil, "", err
	}
	// Outbound: an older time, or a smaller seq at the cursor's time when
	// the cursor is an outbox message (events sort after every message).
	obWhere, obArgs := "thread = ?", []any{th}
	if cur != nil {
		if cur.src == srcOutbox {
			obWhere += " AND (created_at < ? OR (created_at = ? AND seq < ?))"
			obArgs = append(obArgs, cur.at, cur.at, cur.seq)
		} else {
			obWhere += " AND created_at < ?"
			obArgs = append(obArgs, cur.at)
		}
	}
	outs, err := s.threadOutbox(ctx, obWhere, append(obArgs, limit+1))
	if err != nil {
		return nil, "", err
	}

	items := make([]core.ThreadMessage, 0, min(limit+1, len(ins)+len(outs)))
	keys := make([]msgKey, 0, cap(items))
	i, j := 0, 0
	for len(items) <= limit && (i < len(ins) || j < len(outs)) {
		if j >= len(outs) || (i < len(ins) && ins[i].key.newer(outs[j].key)) {
			items, keys = append(items, ins[i].msg), append(keys, ins[i].key)
			i++
			continue
		}
		items, keys = append(items, outs[j].msg), append(keys, outs[j].key)
		j++
	}
	if len(items) <= limit {
		return items, "", nil
	}
	return items[:limit], keys[limit-1].encode(), nil
}

type keyedMsg struct {
	msg core.ThreadMessage
	key msgKey
}

func (s *Store) threadEvents(ctx context.Context, where string, args []any) ([]keyedMsg, error) {
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(`SELECT event_id, actor, text, COALESCE(run_id, ''), received_at
		FROM events WHERE `+where+` ORDER BY received_at DESC, event_id DESC LIMIT ?`), args...)
	if err != nil {
		return nil, fmt.Errorf("store: thread messages: events: %w", err)
	}
	defer rows.Close()
	var out []keyedMsg
	for rows.Next() {
		var m core.ThreadMessage
		var at int64
		if err := rows.Scan(&m.ID, &m.Actor, &m.Text, &m.RunID, &at); err != nil {
			return nil, fmt.Errorf("store: thread messages: events: %w", err)
		}
		m.Direction, m.At = core.MessageIn, fromMicros(at)
		out = append(out, keyedMsg{msg: m, key: msgKey{at: at, src: srcEvent, id: m.ID}})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: thread messages: events: %w", err)
	}
	return out, nil
}

func (s *Store) threadOutbox(ctx context.Context, where string, args []any) ([]keyedMsg, error) {
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(`SELECT id, kind, text, approval_id, run_id, status, created_at, seq
		FROM outbox WHERE `+where+` ORDER BY created_at DESC, seq DESC LIMIT ?`), args...)
	if err != nil {
		return nil, fmt.Errorf("store: thread messages: outbox: %w", err)
	}
	defer rows.Close()
	var out []keyedMsg
	for rows.Next() {
		var m core.ThreadMessage
		var kind, status string
		var at, seq int64
		if err := rows.Scan(&m.ID, &kind, &m.Text, &m.ApprovalID, &m.RunID, &status, &at, &seq); err != nil {
			return nil, fmt.Errorf("store: thread messages: outbox: %w", err)
		}
		m.Direction, m.Kind, m.Status, m.At = core.MessageOut, core.MessageKind(kind), core.DeliveryStatus(status), fromMicros(at)
		out = append(out, keyedMsg{msg: m, key: msgKey{at: at, src: srcOutbox, seq: seq, id: m.ID}})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: thread messages: outbox: %w", err)
	}
	return out, nil
}

// ThreadList implements core.ThreadStore. Each source is aggregated per
// thread in index order from its (channel, thread, time) index alone (no
// table rows are read), then the two per-thread rows are combined: the
// cost grows with the channel's message count (counting needs every row),
// not with other channels' traffic, and only one row per thread is sorted.
func (s *Store) ThreadList(ctx context.Context, p core.ThreadListParams) ([]core.ThreadSummary, string, error) {
	if p.Channel == "" {
		return nil, "", errors.New("store: thread list: a channel is required")
	}
	limit := pageLimit(p.Limit)
	having, args := "", []any{p.Channel, p.Channel}
	if p.Cursor != "" {
		at, th, err := decodeThreadCursor(p.Cursor)
		if err != nil {
			return nil, "", fmt.Errorf("store: thread list: bad cursor %q: %w", p.Cursor, err)
		}
		having = " HAVING MAX(at) < ? OR (MAX(at) = ? AND thread < ?)"
		args = append(args, at, at, th)
	}
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(`SELECT thread, MAX(at), CAST(SUM(n) AS BIGINT) FROM (
		SELECT thread, MAX(received_at) AS at, COUNT(*) AS n FROM events WHERE channel = ? AND thread <> '' GROUP BY thread
		UNION ALL
		SELECT thread, MAX(created_at) AS at, COUNT(*) AS n FROM outbox WHERE channel = ? GROUP BY thread
	) m GROUP BY thread`+having+` ORDER BY MAX(at) DESC, thread DESC LIMIT ?`), append(args, limit+1)...)
	if err != nil {
		return nil, "", fmt.Errorf("store: thread list: %w", err)
	}
	defer rows.Close()
	var out []core.ThreadSummary
	var raw []string
	for rows.Next() {
		var th string
		var at int64
		var n int
		if err := rows.Scan(&th, &at, &n); err != nil {
			return nil, "", fmt.Errorf("store: thread list: %w", err)
		}
		thread, err := parseThread(th)
		if err != nil {
			return nil, "", fmt.Errorf("store: thread list: %w", err)
		}
		out = append(out, core.ThreadSummary{Thread: thread, LastAt: fromMicros(at), Messages: n})
		raw = append(raw, th)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("store: thread list: %w", err)
	}
	if len(out) <= limit {
		return out, "", nil
	}
	last := out[limit-1]
	return out[:limit], encodeThreadCursor(micros(last.LastAt), raw[limit-1]), nil
}

func encodeThreadCursor(at int64, thread string) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d:%s", at, thread))
}

func decodeThreadCursor(s string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, "", err
	}
	num, th, ok := strings.Cut(string(b), ":")
	if !ok {
		return 0, "", errors.New("want time:thread")
	}
	at, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, "", err
	}
	return at, th, nil
}
