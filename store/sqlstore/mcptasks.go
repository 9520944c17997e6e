package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/opsgate/opsgate/core"
)

var (
	_ core.MCPTaskStore  = (*Store)(nil)
	_ core.RunTraceStore = (*Store)(nil)
)

const mcpTaskColumns = `id, actor, endpoint, tool, run_id, call_id, claim_id, tool_call_id, tool_id, input, traceparent, created_at, expires_at`

// MCPTaskCreate implements core.MCPTaskStore.
func (s *Store) MCPTaskCreate(ctx context.Context, t *core.MCPTask) error {
	if t.ID == "" || t.RunID == "" {
		return fmt.Errorf("store: mcp task create: empty id or run")
	}
	return s.inTx(ctx, "mcp task create", func(x *tx) error {
		res, err := x.exec(ctx, `INSERT INTO mcp_tasks (`+mcpTaskColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`,
			t.ID, t.Actor, t.Endpoint, t.Tool, t.RunID, t.CallID, t.ClaimID, t.ToolCallID, t.ToolID, string(t.Input), t.TraceParent,
			micros(orNow(t.CreatedAt)), micros(t.ExpiresAt))
		if err != nil {
			return fmt.Errorf("store: mcp task create %s: %w", t.ID, err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return fmt.Errorf("store: mcp task create %s: id taken: %w", t.ID, core.ErrConflict)
		}
		return nil
	})
}

// MCPTaskGet implements core.MCPTaskStore.
func (s *Store) MCPTaskGet(ctx context.Context, id string) (*core.MCPTask, error) {
	var t core.MCPTask
	var input string
	var created, expires int64
	err := s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT `+mcpTaskColumns+` FROM mcp_tasks WHERE id = ?`), id).Scan(
		&t.ID, &t.Actor, &t.Endpoint, &t.Tool, &t.RunID, &t.CallID, &t.ClaimID, &t.ToolCallID, &t.ToolID, &input, &t.TraceParent, &created, &expires)
	if err != nil {
		return nil, mapErr(err, "mcp task get", "mcp task "+id)
	}
	if input != "" {
		t.Input = []byte(input)
	}
	t.CreatedAt, t.ExpiresAt = fromMicros(created), fromMicros(expires)
	return &t, nil
}

// RunTraceSet implements core.RunTraceStore.
func (s *Store) RunTraceSet(ctx context.Context, runID, traceparent string) error {
	return s.inTx(ctx, "run trace set", func(x *tx) error {
		if _, err := x.exec(ctx, `INSERT INTO run_traces (run_id, traceparent) VALUES (?, ?) ON CONFLICT (run_id) DO NOTHING`,
			runID, traceparent); err != nil {
			return fmt.Errorf("store: run trace set %s: %w", runID, err)
		}
		return nil
	})
}

// RunTraceGet implements core.RunTraceStore.
func (s *Store) RunTraceGet(ctx context.Context, runID string) (string, error) {
	var tp string
	err := s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT traceparent FROM run_traces WHERE run_id = ?`), runID).Scan(&tp)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", mapErr(err, "run trace get", "run "+runID)
	}
	return tp, nil
}
