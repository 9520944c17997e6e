// Package sqlstore implements core.Store once, over database/sql, for every
// SQL backend opsgate ships. The backends (store/sqlite, store/postgres) only
// open connections, run migrations, feed notifications and supply a small
// Dialect; every query, guard and transaction boundary lives here, so the two
// backends cannot drift apart in semantics.
//
// Conventions shared by both schemas: times are BIGINT unix microseconds
// (the precision the audit hash is computed at), JSON is TEXT (never JSONB,
// so audit detail round-trips byte for byte), ids are TEXT.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// Compile-time proof that Store satisfies the seams it is written for.
var (
	_ core.Store      = (*Store)(nil)
	_ approvals.Store = (*Store)(nil)
)

// Config is what a backend hands New.
type Config struct {
	// DB runs every transaction that writes. SQLite backends give it one
	// connection so writers queue in Go instead of spinning on SQLITE_BUSY.
	DB *sql.DB
	// ReadDB, if set, serves reads outside write transactions (SQLite in
	// WAL mode lets readers run beside the single writer). Defaults to DB.
	ReadDB *sql.DB
	// LeaseDB, if set, runs the single-statement writes whose loss in a
	// crash of the database only hands work back: claiming outbox
	// messages and runs (a lease) and recording a message as sent (lost,
	// the message is sent again: at least once, as a crash between the
	// post and the record already does). The Postgres backend gives it
	// connections with synchronous_commit off, so these commits do not
	// wait for the WAL flush; Postgres flushes its WAL in order, so any
	// later durable commit — an event recorded, a step started, a run's
	// result — makes them durable too, and a crash loses only a tail of
	// them. Defaults to DB. README, "Performance", has the figures.
	LeaseDB *sql.DB
	Dialect Dialect
	// GroupCommit runs concurrent write transactions together, each in a
	// savepoint of one shared transaction with one commit (one fsync); see
	// groupWriter. For a backend with a single writer connection (SQLite),
	// where transactions would otherwise queue for the connection and pay
	// one fsync each.
	GroupCommit bool
	// Logger receives the store's own reports (notification and audit
	// sealer failures); default slog.Default(). cmd passes the server's
	// logger, so --log-format and --log-level apply.
	Logger *slog.Logger
	// Classify, when set, maps a driver error to the core error it means —
	// a *core.StoreUnavailableError for a full disk, a read-only file or an
	// unreachable server, a *core.InputError for a value the backend cannot
	// store — wrapping it, or returns nil. The backend knows its driver;
	// the store applies it to every write and to Ping, so every surface can
	// answer 503 or 400 without knowing either.
	Classify func(error) error
}

// Store is the shared implementation of core.Store (and approvals.Store).
// Backends embed it and add Open, Migrate and Close.
type Store struct {
	db       *sql.DB
	read     *sql.DB
	lease    *sql.DB // Config.LeaseDB
	dialect  Dialect
	classify func(error) error
	hub      *Hub
	log      *slog.Logger

	// The audit sealer (Dialect.DeferAuditSeal only): sealKick wakes it
	// after a commit that audited; Close stops it and seals what is left.
	sealKick   chan struct{}
	stopSealer context.CancelFunc
	sealerDone chan struct{}
	closeOnce  sync.Once

	// writer, when set (Config.GroupCommit), runs every write transaction.
	writer *groupWriter
	// notifier sends wake-ups to other processes (Dialect.NotifySQL);
	// instance tells this store's own notifications apart.
	notifier *notifier
	instance string

	// keyMu guards auditKey, the HMAC key new audit entries are sealed
	// and keyed entries verified with (SetAuditKey); nil seals legacy
	// entries.
	keyMu    sync.RWMutex
	auditKey approvals.AuditKey
}

// New builds a Store over already-open handles. It does not own them:
// closing them is the backend's job.
func New(cfg Config) *Store {
	read := cfg.ReadDB
	if read == nil {
		read = cfg.DB
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	lease := cfg.LeaseDB
	if lease == nil {
		lease = cfg.DB
	}
	s := &Store{db: cfg.DB, read: read, lease: lease, dialect: cfg.Dialect, hub: NewHub(), sealKick: make(chan struct{}, 1),
		log: log.With("component", "store/"+cfg.Dialect.Name), classify: cfg.Classify}
	s.instance = newInstanceID()
	if cfg.GroupCommit {
		s.writer = newGroupWriter(s)
	}
	if s.dialect.NotifySQL != "" {
		s.notifier = newNotifier(s)
	}
	if s.dialect.DeferAuditSeal {
		ctx, cancel := context.WithCancel(context.Background())
		s.stopSealer, s.sealerDone = cancel, make(chan struct{})
		go func() {
			defer close(s.sealerDone)
			s.sealer(ctx, s.sealKick)
		}()
	}
	return s
}

// Hub returns the store's in-process subscriber registry, so a backend can
// feed it notifications that arrive from other processes.
func (s *Store) Hub() *Hub { return s.hub }

// DB returns the write handle, for backends and for tests that must reach
// under the API (tampering with an audit row to prove verification works).
func (s *Store) DB() *sql.DB { return s.db }

// Subscribe implements core.Store. Wake-ups are delivered after commit.
func (s *Store) Subscribe(topic string) (<-chan struct{}, func()) { return s.hub.Subscribe(topic) }

// SubscribeRunEvents is Subscribe narrowed to one run: the channel is woken
// only after a commit that appended to runID's event stream. An event
// stream (SSE) subscribes here, so a commit wakes the streams of its own
// runs rather than every open stream re-reading the store.
func (s *Store) SubscribeRunEvents(runID string) (<-chan struct{}, func()) {
	return s.hub.Subscribe(RunEventsTopic(runID))
}

// RunEventsTopic is the hub topic of one run's event stream. A backend with
// cross-process notification broadcasts it for the run id carried as the
// payload of an events notification.
func RunEventsTopic(runID string) string { return core.TopicEvents + "/" + runID }

// Ping implements core.Store.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return s.classified(fmt.Errorf("store: ping: %w", err))
	}
	return nil
}

// classified returns err as the backend's Classify maps it (see Config),
// or as it is.
func (s *Store) classified(err error) error {
	if err == nil || s.classify == nil || errors.Is(err, core.ErrStoreUnavailable) || errors.Is(err, core.ErrInvalidInput) {
		return err
	}
	if c := s.classify(err); c != nil {
		return c
	}
	return err
}

// Close stops the audit sealer, sealing what is pending (bounded; what is
// left is sealed by the next reader or replica), and releases subscribers.
// The backend closes the database handles afterwards.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		if s.stopSealer != nil {
			s.stopSealer()
			<-s.sealerDone
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = s.SealAudit(ctx)
			cancel()
		}
		if s.writer != nil {
			s.writer.close()
		}
		if s.notifier != nil {
			s.notifier.close()
		}
		s.hub.Close()
	})
	return err
}

// notFoundError is the one error every store lookup returns for a missing
// row. It matches core.ErrNotFound (which is approvals.ErrNotFound), so
// callers of either interface branch with one errors.Is.
type notFoundError struct{ what string }

func (e *notFoundError) Error() string { return e.what + " not found" }

func (e *notFoundError) Is(target error) bool { return target == core.ErrNotFound }

// mapErr is the single place sql.ErrNoRows becomes the shared not-found
// error; other errors are wrapped with op for context.
func mapErr(err error, op, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return &notFoundError{what: what}
	}
	return fmt.Errorf("store: %s: %w", op, err)
}

// tx is one write transaction: queries are rebound for the dialect and the
// topics it touched are announced once it commits.
type tx struct {
	tx     *sql.Tx
	d      Dialect
	topics []string
	// audited is set when the transaction queued audit entries for the
	// sealer (Dialect.DeferAuditSeal).
	audited bool
	// eventRuns are the runs whose event streams this transaction appended
	// to, announced on their own topics (RunEventsTopic).
	eventRuns []string
	// shared is set for a unit of work inside a group commit (groupWriter).
	shared bool
	// key seals audit entries appended inline (Store.SetAuditKey).
	key approvals.AuditKey
	// stmts, in a group commit, holds the writer's prepared statements.
	stmts *stmtCache
}

func (t *tx) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	ctx, q = t.stmtCtx(ctx), t.d.Rebind(q)
	if st := t.stmts.get(q); st != nil {
		return t.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.tx.ExecContext(ctx, q, args...)
}

func (t *tx) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	ctx, q = t.stmtCtx(ctx), t.d.Rebind(q)
	if st := t.stmts.get(q); st != nil {
		return t.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, q, args...)
}

func (t *tx) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	ctx, q = t.stmtCtx(ctx), t.d.Rebind(q)
	if st := t.stmts.get(q); st != nil {
		return t.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, q, args...)
}

// stmtCtx is the context a statement runs under: the caller's, except in a
// group commit, where one caller giving up must not interrupt a statement
// (SQLite rolls the whole transaction back on interrupt, and with it the
// work of every other caller in the batch).
func (t *tx) stmtCtx(ctx context.Context) context.Context {
	if t.shared {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// notifyRun marks runID's event stream (and the events topic) to be
// announced after commit.
func (t *tx) notifyRun(runID string) {
	t.notify(core.TopicEvents)
	if !slices.Contains(t.eventRuns, runID) {
		t.eventRuns = append(t.eventRuns, runID)
	}
}

// notify marks topic to be announced after commit.
func (t *tx) notify(topic string) {
	for _, x := range t.topics {
		if x == topic {
			return
		}
	}
	t.topics = append(t.topics, topic)
}

// inTx runs fn in one write transaction. After it commits, local
// subscribers of the topics it touched are woken and, with cross-process
// notification (Postgres), the other processes are notified (notify.go).
func (s *Store) inTx(ctx context.Context, op string, fn func(*tx) error) error {
	return s.classified(s.inTxRaw(ctx, op, fn))
}

func (s *Store) inTxRaw(ctx context.Context, op string, fn func(*tx) error) error {
	if s.writer != nil {
		return s.writer.do(ctx, op, fn)
	}
	sqlTx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: %s: begin: %w", op, err)
	}
	t := &tx{tx: sqlTx, d: s.dialect, key: s.key()}
	// A panic in fn must not leak the transaction: it would keep its
	// pooled connection and any lock it took (the audit lock) for good.
	defer func() {
		if p := recover(); p != nil {
			_ = sqlTx.Rollback()
			panic(p)
		}
	}()
	if err := fn(t); err != nil {
		_ = sqlTx.Rollback()
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("store: %s: commit: %w", op, err)
	}
	s.afterCommit(t)
	return nil
}

// afterCommit wakes local subscribers, queues the wake-ups of other
// processes (see notify.go) and kicks the audit sealer.
func (s *Store) afterCommit(t *tx) {
	for _, topic := range t.topics {
		s.hub.Broadcast(topic)
	}
	for _, id := range t.eventRuns {
		s.hub.Broadcast(RunEventsTopic(id))
	}
	if s.notifier != nil && len(t.topics) > 0 {
		s.notifier.add(t.topics, t.eventRuns)
	}
	if t.audited {
		select {
		case s.sealKick <- struct{}{}:
		default:
		}
	}
}

// micros is the stored form of a time: unix microseconds, UTC.
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros is the inverse of micros.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// nullMicros stores an optional time; nil and the zero time become NULL.
func nullMicros(t *time.Time) any {
	if t == nil || t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// optMicros reads an optional time.
func optMicros(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromMicros(n.Int64)
	return &t
}

// nullString stores "" as NULL, for optional columns.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// threadString stores a thread; the zero thread is "" (not ":").
func threadString(t core.Thread) string {
	if t.IsZero() {
		return ""
	}
	return t.String()
}

// parseThread reads a stored thread.
func parseThread(s string) (core.Thread, error) {
	if s == "" {
		return core.Thread{}, nil
	}
	return core.ParseThread(s)
}

// valueRows returns "(?, ?), (?, ?)" for rows rows of cols values each, for
// multi-row inserts: one statement (one round trip) however many rows.
func valueRows(rows, cols int) string {
	row := "(" + placeholders(cols) + ")"
	return strings.TrimSuffix(strings.Repeat(row+", ", rows), ", ")
}

// placeholders returns "?, ?, ?" for n values.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// orNow returns t, or now when t is zero.
func orNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}
