package postgres

import "context"

// OpenTransactional opens like Open but writes InboxRecord and
// RunCheckpoint as multi-statement transactions (the path SQLite runs)
// instead of single statements, so the conformance suite covers both write
// paths on Postgres.
func OpenTransactional(ctx context.Context, dsn string) (*Store, error) {
	return OpenWith(ctx, dsn, Options{transactional: true})
}

// LeaseSession is one idle connection of the lease pool: its backend's last
// statement (pg_stat_activity) and its synchronous_commit.
type LeaseSession struct {
	LastQuery, SynchronousCommit string
}

// LeaseSessions reports the lease pool's idle connections. The last
// statements are read (through the main pool) before each session is
// asked its setting, which becomes its last statement.
func (s *Store) LeaseSessions(ctx context.Context) ([]LeaseSession, error) {
	conns := s.leasePool.AcquireAllIdle(ctx)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	out := make([]LeaseSession, len(conns))
	for i, c := range conns {
		if err := s.db.QueryRowContext(ctx, `SELECT query FROM pg_stat_activity WHERE pid = $1`,
			int64(c.Conn().PgConn().PID())).Scan(&out[i].LastQuery); err != nil {
			return nil, err
		}
	}
	for i, c := range conns {
		if err := c.QueryRow(ctx, "SHOW synchronous_commit").Scan(&out[i].SynchronousCommit); err != nil {
			return nil, err
		}
	}
	return out, nil
}
