package sqlstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/opsgate/opsgate/core"
)

var _ core.AgentSessionStore = (*Store)(nil)

const agentSessionColumns = `id, token, actor, agent, settings, thread_channel, thread_key, created_at`

func scanAgentSession(r rowScanner) (*core.AgentSession, int64, error) {
	var a core.AgentSession
	var seq, created int64
	var settings string
	if err := r.Scan(&seq, &a.ID, &a.Token, &a.Actor, &a.Agent, &settings, &a.Thread.Channel, &a.Thread.Key, &created); err != nil {
		return nil, 0, err
	}
	a.Settings = []byte(settings)
	a.CreatedAt = fromMicros(created)
	return &a, seq, nil
}

// AgentSessionCreate implements core.AgentSessionStore.
func (s *Store) AgentSessionCreate(ctx context.Context, a *core.AgentSession) error {
	if a.ID == "" {
		return fmt.Errorf("store: agent session create: empty id")
	}
	settings := string(a.Settings)
	if settings == "" {
		settings = "{}"
	}
	return s.inTx(ctx, "agent session create", func(t *tx) error {
		res, err := t.exec(ctx, `INSERT INTO agent_sessions (`+agentSessionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`,
			a.ID, a.Token, a.Actor, a.Agent, settings, a.Thread.Channel, a.Thread.Key, micros(orNow(a.CreatedAt)))
		if err != nil {
			return fmt.Errorf("store: agent session create %s: %w", a.ID, err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return fmt.Errorf("store: agent session create %s: id taken: %w", a.ID, core.ErrConflict)
		}
		return nil
	})
}

// AgentSessionGet implements core.AgentSessionStore.
func (s *Store) AgentSessionGet(ctx context.Context, id string) (*core.AgentSession, error) {
	a, _, err := scanAgentSession(s.read.QueryRowContext(ctx, s.dialect.Rebind(`SELECT seq, `+agentSessionColumns+
		` FROM agent_sessions WHERE id = ?`), id))
	if err != nil {
		return nil, mapErr(err, "agent session get", "agent session "+id)
	}
	return a, nil
}

// AgentSessionList implements core.AgentSessionStore.
func (s *Store) AgentSessionList(ctx context.Context, p core.AgentSessionListParams) ([]*core.AgentSession, string, error) {
	limit := pageLimit(p.Limit)
	where, args := "1 = 1", []any{}
	if p.Token != "" {
		where += " AND token = ?"
		args = append(args, p.Token)
	}
	if p.Cursor != "" {
		c, err := strconv.ParseInt(p.Cursor, 10, 64)
		if err != nil {
			return nil, "", fmt.Errorf("store: agent session list: bad cursor %q", p.Cursor)
		}
		where += " AND seq < ?"
		args = append(args, c)
	}
	rows, err := s.read.QueryContext(ctx, s.dialect.Rebind(`SELECT seq, `+agentSessionColumns+` FROM agent_sessions WHERE `+where+
		` ORDER BY seq DESC LIMIT ?`), append(args, limit+1)...)
	if err != nil {
		return nil, "", fmt.Errorf("store: agent session list: %w", err)
	}
	defer rows.Close()
	items := []*core.AgentSession{}
	var seqs []int64
	for rows.Next() {
		a, seq, err := scanAgentSession(rows)
		if err != nil {
			return nil, "", fmt.Errorf("store: agent session list: %w", err)
		}
		items, seqs = append(items, a), append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("store: agent session list: %w", err)
	}
	items, next := page(items, seqs, limit)
	return items, next, nil
}
