// Package postgres is opsgate's store for more than one replica: any number
// of `opsgate serve` processes share one database. Runs and outbox messages
// are claimed with FOR UPDATE SKIP LOCKED, audit appends serialize on a
// transaction-scoped advisory lock, and commits wake every replica through
// LISTEN/NOTIFY. Every query is sqlstore's; this package connects, listens
// and migrates.
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/store/sqlstore"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

var _ core.Store = (*Store)(nil)

// topics are the Subscribe topics, each LISTENed to as its own channel.
var topics = []string{core.TopicRuns, core.TopicOutbox, core.TopicEvents}

// migrateLockKey is the session advisory lock replicas take around
// migrations, so two starting together apply each migration once.
const migrateLockKey = 0x6f70736761746502

// Store is core.Store on Postgres.
type Store struct {
	*sqlstore.Store
	pool *pgxpool.Pool
	db   *sql.DB
	// leasePool and leaseDB serve sqlstore's Config.LeaseDB: claims and
	// sent marks, committed with synchronous_commit off.
	leasePool *pgxpool.Pool
	leaseDB   *sql.DB
	dialect   sqlstore.Dialect
	log       *slog.Logger

	stop context.CancelFunc
	done chan struct{}
	once sync.Once
}

// leaseMaxConns bounds the lease pool (Config.LeaseDB): its statements are
// short and do not wait for the WAL flush, so a few connections serve
// every claim and sent mark.
const leaseMaxConns = 8

// defaultMaxConns is the pool size when the DSN does not set one: enough
// for Postgres's group commit to batch concurrent transactions, well under
// its default max_connections of 100 for a few replicas.
const defaultMaxConns = 24

// Options are Open's optional settings.
type Options struct {
	// Logger receives the store's own reports (notification connection
	// lost, audit sealer failures); default slog.Default(). cmd passes the
	// server's logger, so --log-format and --log-level apply.
	Logger *slog.Logger

	// transactional turns off the single-statement writes (tests only, via
	// export_test.go: the conformance suite runs on both write paths).
	transactional bool
}

// Open is OpenWith with the default Options.
func Open(ctx context.Context, dsn string) (*Store, error) { return OpenWith(ctx, dsn, Options{}) }

// OpenWith connects to dsn (a postgres:// URL or key=value string, as pgx
// accepts), checks the server answers and starts listening for wake-ups.
// It does not migrate; call Migrate. The pool takes pgxpool's settings from
// the DSN; without pool_max_conns it holds up to defaultMaxConns, because
// every concurrent run, decision and ingest needs its own connection for
// its commit and pgxpool's own default (max(4, CPUs)) serialises them on a
// small machine. One more connection is held for LISTEN.
func OpenWith(ctx context.Context, dsn string, o Options) (*Store, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse dsn: %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = defaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open pool: %w", err)
	}
	// Leases and sent marks commit without waiting for the WAL flush
	// (sqlstore.Config.LeaseDB says why that keeps every promise): under
	// the Slack load, sessions waiting on the flush were 80–90 % of the
	// active ones, and these were half the commits of an event.
	lcfg := cfg.Copy()
	lcfg.MaxConns = min(cfg.MaxConns, leaseMaxConns)
	if lcfg.ConnConfig.RuntimeParams == nil {
		lcfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	lcfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	leasePool, err := pgxpool.NewWithConfig(ctx, lcfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open lease pool: %w", err)
	}
	d := sqlstore.PostgresDialect()
	if o.transactional {
		d.OneStatement = false
	}
	s := &Store{pool: pool, db: stdlib.OpenDBFromPool(pool), leasePool: leasePool, leaseDB: stdlib.OpenDBFromPool(leasePool),
		dialect: d, log: log.With("component", "store/postgres"), done: make(chan struct{})}
	s.Store = sqlstore.New(sqlstore.Config{DB: s.db, LeaseDB: s.leaseDB, Dialect: s.dialect, Logger: log, Classify: classify})
	if err := s.Ping(ctx); err != nil {
		s.closeDB()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	// The first LISTEN happens before Open returns, so a commit made after
	// Open by any replica is never missed.
	conn, err := s.listen(ctx, cfg.ConnConfig)
	if err != nil {
		s.closeDB()
		return nil, err
	}
	lctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go s.listenLoop(lctx, cfg.ConnConfig, conn)
	return s, nil
}

// listen opens the dedicated notification connection and LISTENs on every
// topic's channel.
func (s *Store) listen(ctx context.Context, cc *pgx.ConnConfig) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cc.Copy())
	if err != nil {
		return nil, fmt.Errorf("postgres: listen: connect: %w", err)
	}
	for _, topic := range topics {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.dialect.Channel(topic)}.Sanitize()); err != nil {
			conn.Close(context.Background())
			return nil, fmt.Errorf("postgres: listen %s: %w", topic, err)
		}
	}
	return conn, nil
}

// listenLoop feeds notifications to local subscribers until ctx ends. When
// the connection drops it reconnects with capped backoff and then wakes
// every topic, since notifications sent meanwhile were lost.
func (s *Store) listenLoop(ctx context.Context, cc *pgx.ConnConfig, conn *pgx.Conn) {
	defer close(s.done)
	backoff := 100 * time.Millisecond
	for {
		for conn != nil {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				conn.Close(context.Background())
				conn = nil
				if ctx.Err() != nil {
					return
				}
				// The server went away (a restart, a failover) or the
				// network did: the pool's idle connections broke with this
				// one. Drop them now, so the work after the server is back
				// starts on fresh connections instead of failing once per
				// broken one (an ambiguous commit each time).
				s.pool.Reset()
				s.leasePool.Reset()
				s.log.Warn("notification connection lost; dropped the pooled connections; reconnecting", "err", err)
				break
			}
			backoff = 100 * time.Millisecond
			topic, ok := strings.CutPrefix(n.Channel, s.dialect.ChannelPrefix)
			sender, runID := sqlstore.NotifyPayload(n.Payload)
			if !ok || sender == s.Instance() {
				continue // our own commits woke our subscribers already
			}
			s.Hub().Broadcast(topic)
			if topic == core.TopicEvents && runID != "" {
				s.Hub().Broadcast(sqlstore.RunEventsTopic(runID))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		var err error
		if conn, err = s.listen(ctx, cc); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("notification reconnect failed", "err", err, "retry_in", backoff)
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		s.Hub().BroadcastAll()
	}
}

// Ping implements core.Store (and /readyz). A ping that fails on a broken
// connection says nothing about the server: after a restart every pooled
// connection is broken, and each ping would discard a few of them and
// fail. So the pool is dropped and the server asked once more on a fresh
// connection — ready again the moment Postgres accepts connections.
func (s *Store) Ping(ctx context.Context) error {
	err := s.Store.Ping(ctx)
	if err == nil || !errors.Is(err, driver.ErrBadConn) || ctx.Err() != nil {
		return err
	}
	s.pool.Reset()
	s.leasePool.Reset()
	return s.Store.Ping(ctx)
}

// Migrate brings the schema up to date under a session advisory lock, so
// replicas starting together migrate once. Safe to call on every start.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := sqlstore.ReadMigrations(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, int64(migrateLockKey)); err != nil {
		return fmt.Errorf("postgres: migrate: lock: %w", err)
	}
	defer func() {
		// A fresh context: the unlock must run even if ctx has ended, or the
		// pooled connection would keep the lock.
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := conn.ExecContext(uctx, `SELECT pg_advisory_unlock($1)`, int64(migrateLockKey)); err != nil {
			// End the session instead, which releases the lock: close the
			// physical connection and tell database/sql to discard it.
			_ = conn.Raw(func(dc any) error {
				if c, ok := dc.(*stdlib.Conn); ok {
					_ = c.Conn().Close(uctx)
				}
				return driver.ErrBadConn
			})
			s.log.Error("migrate: unlock failed; connection closed", "err", err)
		}
	}()
	if _, err := sqlstore.Migrate(ctx, conn, s.dialect, ms); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	// Seal audit entries a replica that died left pending.
	s.KickSealer()
	return nil
}

// Close stops listening, releases subscribers and closes the pool.
func (s *Store) Close() error {
	s.once.Do(func() {
		if s.stop != nil {
			s.stop()
			<-s.done
		}
		_ = s.Store.Close()
		s.closeDB()
	})
	return nil
}

func (s *Store) closeDB() {
	_ = s.db.Close()
	_ = s.leaseDB.Close()
	s.pool.Close()
	s.leasePool.Close()
}
