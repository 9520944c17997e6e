package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/opsgate/opsgate/core"
)

var _ core.AgentHistoryStore = (*Store)(nil)

// maxAgentHistory bounds one AgentHistory read: the loop sends at most
// max_history bytes anyway (agent.BuildRequest trims the oldest first).
const maxAgentHistory = 4000

// AgentHistory implements core.AgentHistoryStore: the agent.message events
// of the thread's runs, newest limit of them, returned oldest first. Served
// by runs_thread and the partial index run_events_agent (migration 0015).
func (s *Store) AgentHistory(ctx context.Context, thread core.Thread, limit int) ([]core.AgentRecord, error) {
	if limit <= 0 || limit > maxAgentHistory {
		limit = maxAgentHistory
	}
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(`SELECT e.seq, e.run_id, e.data, e.at
		FROM runs r JOIN run_events e ON e.run_id = r.id
		WHERE r.thread = ? AND e.type = ? ORDER BY e.seq DESC LIMIT ?`),
		threadString(thread), core.EventAgentMessage, limit)
	if err != nil {
		return nil, fmt.Errorf("store: agent history: %w", err)
	}
	defer rows.Close()
	var out []core.AgentRecord
	for rows.Next() {
		var r core.AgentRecord
		var data sql.NullString
		var at int64
		if err := rows.Scan(&r.Seq, &r.RunID, &data, &at); err != nil {
			return nil, fmt.Errorf("store: agent history: %w", err)
		}
		r.Message = json.RawMessage(data.String)
		r.At = fromMicros(at)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: agent history: %w", err)
	}
	slices.Reverse(out)
	return out, nil
}

var _ core.StreamRefStore = (*Store)(nil)

// OutboxStreamRef implements core.StreamRefStore.
func (s *Store) OutboxStreamRef(ctx context.Context, runID string, thread core.Thread, kind core.MessageKind) (*core.MessageRef, error) {
	var refs string
	err := s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT refs FROM outbox WHERE run_id = ? AND thread = ?
		AND kind = ? AND chunks_sent > 0 ORDER BY seq LIMIT 1`),
		runID, threadString(thread), string(kind)).Scan(&refs)
	if err != nil {
		return nil, mapErr(err, "outbox stream ref", "streamed message of run "+runID)
	}
	var rs []core.MessageRef
	if err := json.Unmarshal([]byte(refs), &rs); err != nil {
		return nil, fmt.Errorf("store: outbox stream ref: %w", err)
	}
	if len(rs) == 0 {
		return nil, mapErr(sql.ErrNoRows, "outbox stream ref", "streamed message of run "+runID)
	}
	return &rs[0], nil
}
