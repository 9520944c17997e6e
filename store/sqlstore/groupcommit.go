package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// maxGroup bounds the units of work in one group commit, so the first
// caller of a large batch does not wait for an unbounded tail.
const maxGroup = 64

// errStoreClosed is returned to writes submitted after Close.
var errStoreClosed = errors.New("store: closed")

// groupWriter is group commit for a backend with one writer connection.
// Callers of inTx hand it their unit of work and wait; one goroutine takes
// whatever has queued (up to maxGroup), runs each unit in its own SAVEPOINT
// of one transaction — a unit that fails is rolled back to its savepoint
// and gets its error, the others are unaffected — and commits once. Every
// caller returns only after that commit, so nothing acknowledged is lost;
// the units are applied in arrival order, exactly as if each had committed
// alone, but N concurrent writers cost one fsync instead of N.
type groupWriter struct {
	s    *Store
	jobs chan *groupJob
	stop chan struct{}
	done chan struct{}
	// stmts keeps the statements the batches run prepared.
	stmts *stmtCache
	once  sync.Once
}

type groupJob struct {
	ctx context.Context
	op  string
	fn  func(*tx) error
	t   *tx
	err error
	// panicked carries a panic of fn back to its caller's goroutine, so a
	// bug in one unit neither kills the writer nor hides the stack.
	panicked any
	done     chan struct{}
}

func newGroupWriter(s *Store) *groupWriter {
	w := &groupWriter{s: s, jobs: make(chan *groupJob), stop: make(chan struct{}), done: make(chan struct{}),
		stmts: newStmtCache()}
	go w.loop()
	return w
}

// do runs fn in the next group commit and returns its outcome. Once the
// job is taken, do waits for the commit even if ctx ends, since the work
// may be committed and the caller must not believe otherwise.
func (w *groupWriter) do(ctx context.Context, op string, fn func(*tx) error) error {
	j := &groupJob{ctx: ctx, op: op, fn: fn, done: make(chan struct{})}
	select {
	case w.jobs <- j:
	case <-ctx.Done():
		return fmt.Errorf("store: %s: %w", op, ctx.Err())
	case <-w.stop:
		return fmt.Errorf("store: %s: %w", op, errStoreClosed)
	}
	<-j.done
	if j.panicked != nil {
		panic(j.panicked)
	}
	return j.err
}

// call runs j's unit of work, turning a panic into an error for the batch
// and a re-panic for its caller.
func (j *groupJob) call() (err error) {
	defer func() {
		if p := recover(); p != nil {
			j.panicked = p
			err = fmt.Errorf("store: %s: panic: %v", j.op, p)
		}
	}()
	return j.fn(j.t)
}

func (w *groupWriter) close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}

func (w *groupWriter) loop() {
	defer close(w.done)
	defer w.stmts.close()
	for {
		var first *groupJob
		select {
		case first = <-w.jobs:
		case <-w.stop:
			return
		}
		batch := []*groupJob{first}
	gather:
		for len(batch) < maxGroup {
			select {
			case j := <-w.jobs:
				batch = append(batch, j)
			default:
				break gather
			}
		}
		w.run(batch)
		// The connection is free between batches: prepare what this
		// batch ran for the first time (stmtcache.go).
		w.stmts.prepareWanted(context.Background(), w.s.db)
	}
}

// run applies one batch in one transaction and releases its callers.
func (w *groupWriter) run(batch []*groupJob) {
	defer func() {
		for _, j := range batch {
			close(j.done)
		}
	}()
	// The transaction is nobody's in particular: no caller's context may
	// end it for the others.
	ctx := context.Background()
	sqlTx, err := w.s.db.BeginTx(ctx, nil)
	if err != nil {
		for _, j := range batch {
			j.err = fmt.Errorf("store: %s: begin: %w", j.op, err)
		}
		return
	}
	alone := len(batch) == 1
	live := 0
	for _, j := range batch {
		if err := j.ctx.Err(); err != nil {
			j.err = fmt.Errorf("store: %s: %w", j.op, err)
			continue
		}
		j.t = &tx{tx: sqlTx, d: w.s.dialect, shared: true, key: w.s.key(), stmts: w.stmts}
		if alone {
			j.err = j.call()
			if j.err == nil {
				live++
			}
			continue
		}
		if _, err := sqlTx.ExecContext(ctx, "SAVEPOINT unit"); err != nil {
			j.err = fmt.Errorf("store: %s: savepoint: %w", j.op, err)
			continue
		}
		if j.err = j.call(); j.err != nil {
			if _, err := sqlTx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT unit"); err != nil {
				// The transaction is in an unknown state: fail the batch.
				_ = sqlTx.Rollback()
				w.failAll(batch, fmt.Errorf("rollback to savepoint: %w", err))
				return
			}
		} else {
			live++
		}
		if _, err := sqlTx.ExecContext(ctx, "RELEASE SAVEPOINT unit"); err != nil {
			_ = sqlTx.Rollback()
			w.failAll(batch, fmt.Errorf("release savepoint: %w", err))
			return
		}
	}
	if live == 0 {
		_ = sqlTx.Rollback()
		return
	}
	if err := sqlTx.Commit(); err != nil {
		w.failAll(batch, fmt.Errorf("commit: %w", err))
		return
	}
	for _, j := range batch {
		if j.err == nil {
			w.s.afterCommit(j.t)
		}
	}
}

// failAll gives every unit that had succeeded so far the batch's failure:
// none of them was committed.
func (w *groupWriter) failAll(batch []*groupJob, err error) {
	for _, j := range batch {
		if j.err == nil {
			j.err = fmt.Errorf("store: %s: %w", j.op, err)
		}
	}
}
