package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/opsgate/opsgate/core"
)

// InboxRecord implements core.RunStore. The (channel, event id) insert is
// the deduplication: ON CONFLICT DO NOTHING makes a concurrent duplicate wait
// for the first transaction and then insert nothing. When Run is set and
// Events holds no run.queued event for it, one is appended, so every run's
// stream starts with run.queued.
func (s *Store) InboxRecord(ctx context.Context, p core.InboxRecordParams) (core.InboxResult, error) {
	in, err := prepareInbox(p)
	if err != nil {
		return core.InboxResult{}, err
	}
	if s.dialect.OneStatement {
		res, err := s.inboxRecordOne(ctx, p, in.now, in.events, in.run)
		return res, s.classified(err)
	}
	var res core.InboxResult
	err = s.inTx(ctx, "inbox record", func(t *tx) error {
		var err error
		res, err = in.write(ctx, t)
		return err
	})
	return res, err
}

// inbox is one InboxRecord prepared for writing: what the event starts,
// prepared before the write so every write path stores the same rows.
type inbox struct {
	p      core.InboxRecordParams
	now    time.Time
	run    *core.Run
	events []core.RunEvent
}

func prepareInbox(p core.InboxRecordParams) (*inbox, error) {
	ev := p.Event
	if ev.Channel == "" || ev.EventID == "" {
		return nil, errors.New("store: inbox record: event channel and id are required")
	}
	// The edges refuse what cannot be kept; this is the last line, so both
	// backends refuse alike (Postgres would fail on a NUL, SQLite store it).
	if err := ev.Check(); err != nil {
		return nil, fmt.Errorf("store: inbox record: %w", err)
	}
	in := &inbox{p: p, now: orNow(ev.ReceivedAt), events: p.Events}
	if p.Run != nil {
		r := *p.Run
		r.Status = core.RunQueued
		if r.CreatedAt.IsZero() {
			r.CreatedAt = in.now
		}
		r.EventChannel, r.EventID = ev.Channel, ev.EventID
		in.run = &r
		if !slices.ContainsFunc(in.events, func(e core.RunEvent) bool {
			return e.Type == core.EventRunQueued && (e.RunID == "" || e.RunID == r.ID)
		}) {
			data, _ := json.Marshal(map[string]any{"flow": r.Flow, "thread": threadString(r.Thread)})
			in.events = append(slices.Clip(in.events), core.RunEvent{RunID: r.ID, Type: core.EventRunQueued, Data: data, At: r.CreatedAt})
		}
	}
	return in, nil
}

// write records the event and what it starts inside t: the event insert
// deduplicates, then the run, replies, audit entries and run events.
// A schedule's tick writes its inbox record this way, in its own
// transaction (schedules.go).
func (in *inbox) write(ctx context.Context, t *tx) (core.InboxResult, error) {
	ev, p := in.p.Event, in.p
	var runID string
	if in.run != nil {
		runID = in.run.ID
	}
	r, err := t.exec(ctx, `INSERT INTO events (channel, event_id, run_id, actor, thread, received_at, raw, text, attachments)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (channel, event_id) DO NOTHING`,
		ev.Channel, ev.EventID, nullString(runID), ev.Actor.ID, threadString(ev.Thread), micros(in.now), []byte(ev.Raw), ev.Text,
		attachmentsJSON(ev.Attachments))
	if err != nil {
		return core.InboxResult{}, fmt.Errorf("store: inbox record: insert event: %w", err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return core.InboxResult{}, fmt.Errorf("store: inbox record: %w", err)
	} else if n == 0 {
		var first sql.NullString
		if err := t.queryRow(ctx, `SELECT run_id FROM events WHERE channel = ? AND event_id = ?`,
			ev.Channel, ev.EventID).Scan(&first); err != nil {
			return core.InboxResult{}, mapErr(err, "inbox record: read duplicate", "event")
		}
		return core.InboxResult{Duplicate: true, RunID: first.String}, nil
	}
	if in.run != nil {
		if err := insertRun(ctx, t, in.run); err != nil {
			return core.InboxResult{}, err
		}
		t.notify(core.TopicRuns)
	}
	if err := insertOutbox(ctx, t, in.now, p.Replies...); err != nil {
		return core.InboxResult{}, err
	}
	if err := appendAudit(ctx, t, p.Audit); err != nil {
		return core.InboxResult{}, err
	}
	if err := appendEvents(ctx, t, in.events, runID, in.now); err != nil {
		return core.InboxResult{}, err
	}
	return core.InboxResult{RunID: runID}, nil
}

func insertRun(ctx context.Context, t *tx, r *core.Run) error {
	args, err := json.Marshal(r.Args)
	if err != nil {
		return fmt.Errorf("store: insert run %s: args: %w", r.ID, err)
	}
	_, err = t.exec(ctx, `INSERT INTO runs (id, flow, thread, requester, status, args, reason, step_index,
		event_channel, event_id, created_at, updated_at, attachments) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.Flow, threadString(r.Thread), r.Requester, string(r.Status), string(args), r.Reason, r.StepIndex,
		r.EventChannel, r.EventID, micros(r.CreatedAt), micros(r.CreatedAt), attachmentsJSON(r.Attachments))
	if err != nil {
		return fmt.Errorf("store: insert run %s: %w", r.ID, err)
	}
	return nil
}

// appendEvents inserts run events (defaulting RunID and At) in one
// statement and marks each run's stream to be announced.
func appendEvents(ctx context.Context, t *tx, events []core.RunEvent, runID string, now time.Time) error {
	if len(events) == 0 {
		return nil
	}
	rows, runs := eventRows(events, runID, now)
	args := make([]any, 0, len(rows)*4)
	for _, r := range rows {
		args = append(args, r...)
	}
	for _, id := range runs {
		t.notifyRun(id)
	}
	// Rows get their seq in VALUES order, so a stream keeps its order.
	if _, err := t.exec(ctx, `INSERT INTO run_events (run_id, type, data, at) VALUES `+valueRows(len(events), 4), args...); err != nil {
		return fmt.Errorf("store: append %d run events (%s…): %w", len(events), events[0].Type, err)
	}
	return nil
}
