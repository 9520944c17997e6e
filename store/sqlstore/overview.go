package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

var _ core.OverviewStore = (*Store)(nil)

// Overview implements core.OverviewStore. Each number is one index range
// (approvals_expiry, runs_created, outbox_dead, outbox_pending,
// events_channel_at), so the home page costs a few small reads whatever
// the history holds. The reads are not one snapshot: a number may be a
// commit newer than the one before it, which a page refreshed live
// tolerates.
func (s *Store) Overview(ctx context.Context, p core.OverviewParams) (*core.Overview, error) {
	o := &core.Overview{RunsByStatus: map[core.RunStatus]int{}}
	pending := string(approvals.StatusPending)
	var oldest, next sql.NullInt64
	if err := s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT count(*), min(created_at), min(expires_at)
		FROM approvals WHERE status = ?`), pending).Scan(&o.PendingApprovals, &oldest, &next); err != nil {
		return nil, fmt.Errorf("store: overview: pending approvals: %w", err)
	}
	o.OldestPendingAt, o.NextExpiryAt = nullTime(oldest), nullTime(next)
	if err := s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT count(*) FROM approvals
		WHERE status = ? AND expires_at < ?`), pending, micros(p.SoonBefore)).Scan(&o.ExpiringSoon); err != nil {
		return nil, fmt.Errorf("store: overview: expiring approvals: %w", err)
	}
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(`SELECT status, count(*) FROM runs
		WHERE created_at >= ? GROUP BY status`), micros(p.Since))
	if err != nil {
		return nil, fmt.Errorf("store: overview: runs: %w", err)
	}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: overview: runs: %w", err)
		}
		o.RunsByStatus[core.RunStatus(st)] = n
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("store: overview: runs: %w", err)
	}
	if err := s.read.QueryRowContext(ctx, overviewDeadSQL).Scan(&o.DeadLetters); err != nil {
		return nil, fmt.Errorf("store: overview: dead letters: %w", err)
	}
	channels := p.Channels
	if len(channels) == 0 {
		if channels, err = s.knownChannels(ctx); err != nil {
			return nil, err
		}
	}
	for _, ch := range channels {
		h := core.ChannelHealth{Channel: ch}
		var last, oldestOut sql.NullInt64
		if err := s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT max(received_at) FROM events WHERE channel = ?`),
			ch).Scan(&last); err != nil {
			return nil, fmt.Errorf("store: overview: channel %s: %w", ch, err)
		}
		if err := s.read.QueryRowContext(ctx, s.dialect.Rebind(overviewBacklogSQL), ch).Scan(&h.Backlog, &oldestOut); err != nil {
			return nil, fmt.Errorf("store: overview: channel %s backlog: %w", ch, err)
		}
		if err := s.read.QueryRowContext(ctx, s.dialect.Rebind(overviewChannelDeadSQL(s.dialect)), ch).Scan(&h.Dead); err != nil {
			return nil, fmt.Errorf("store: overview: channel %s dead letters: %w", ch, err)
		}
		h.LastEventAt, h.OldestPendingAt = nullTime(last), nullTime(oldestOut)
		o.Channels = append(o.Channels, h)
	}
	return o, nil
}

// The outbox numbers of Overview. The statuses are literals, as the
// partial indexes' predicates are spelled (see runStatusWhere): dead
// letters are counted from outbox_dead (migration 0019), a channel's
// backlog from outbox_pending (migration 0016), never over the sent
// messages.
// TestStatusLiterals checks the literals against the core's statuses.
const (
	overviewDeadSQL    = `SELECT count(*) FROM outbox WHERE status = 'dead'`
	overviewBacklogSQL = `SELECT count(*), min(created_at) FROM outbox WHERE channel = ? AND status = 'pending'`
)

// overviewChannelDeadSQL counts a channel's dead letters from outbox_dead;
// SQLite, without statistics, would read every message of the channel
// from outbox_channel_thread, so it is told the index.
func overviewChannelDeadSQL(d Dialect) string {
	return `SELECT count(*) FROM outbox` + d.indexedBy("outbox_dead") + ` WHERE channel = ? AND status = 'dead'`
}

// knownChannels lists every channel that received an event or has an
// outbox message, sorted.
func (s *Store) knownChannels(ctx context.Context) ([]string, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT DISTINCT channel FROM events UNION SELECT DISTINCT channel FROM outbox`)
	if err != nil {
		return nil, fmt.Errorf("store: overview: channels: %w", err)
	}
	chans, err := scanStrings(rows)
	if err != nil {
		return nil, fmt.Errorf("store: overview: channels: %w", err)
	}
	slices.Sort(chans)
	return chans, nil
}

// nullTime reads an optional micros column; NULL is the zero time.
func nullTime(v sql.NullInt64) time.Time {
	if v.Valid {
		return fromMicros(v.Int64)
	}
	return time.Time{}
}
