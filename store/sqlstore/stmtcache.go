package sqlstore

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStmts bounds the prepared statements the group writer keeps.
// The hot writes are a few dozen texts; statements whose text varies with
// a row count (VALUES lists) take the rest, and past the bound are simply
// prepared each time, as without a cache.
const maxCachedStmts = 256

// stmtCache keeps the group writer's statements prepared (issue 21). On
// SQLite, preparing is parsing and planning — a fifth of the store's CPU
// on the full path — and database/sql re-prepares every ExecContext of a
// transaction. A statement first seen inside a transaction cannot be
// prepared then (the writer holds the only connection), so it is noted and
// prepared after that batch commits, when the connection is free; the
// transactions after it run it through Tx.StmtContext, which reuses the
// connection's prepared statement.
type stmtCache struct {
	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	wanted map[string]bool
}

func newStmtCache() *stmtCache {
	return &stmtCache{stmts: map[string]*sql.Stmt{}, wanted: map[string]bool{}}
}

// get returns q's prepared statement, or nil after noting q to be
// prepared (while there is room). A nil cache caches nothing.
func (c *stmtCache) get(q string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.stmts[q]; st != nil {
		return st
	}
	if len(c.stmts)+len(c.wanted) < maxCachedStmts {
		c.wanted[q] = true
	}
	return nil
}

// prepareWanted prepares the statements noted since the last call, on db,
// outside any transaction. A statement that fails to prepare is dropped:
// it runs unprepared, and its error shows where it is executed.
func (c *stmtCache) prepareWanted(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	var qs []string
	for q := range c.wanted {
		qs = append(qs, q)
	}
	clear(c.wanted)
	c.mu.Unlock()
	for _, q := range qs {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		c.stmts[q] = st
		c.mu.Unlock()
	}
}

// close closes every prepared statement.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.stmts {
		_ = st.Close()
		delete(c.stmts, q)
	}
}
