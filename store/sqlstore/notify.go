package sqlstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/opsgate/opsgate/core"
)

// Cross-process wake-ups (Dialect.NotifySQL, Postgres) are sent AFTER the
// commit they announce, by a notifier goroutine that batches them, never
// from inside the committing transaction.
//
// Why: Postgres serializes the commits of all transactions that NOTIFY in
// a database (PreCommit_Notify takes a database-wide lock and holds it
// through the commit's WAL flush). With a NOTIFY in every write, every
// commit waited for the previous one's fsync, one at a time: under load
// pg_stat_activity showed 20+ sessions waiting on "Lock: object" and the
// server could not group-commit. A transaction that only notifies writes
// no WAL of its own, so its commit does not wait for a flush and the lock
// is held briefly.
//
// Local subscribers are woken directly after commit, without the round
// trip through the database; notifications carry the sending store's
// instance id so its own listener does not wake them a second time. A
// crash between commit and notification loses the wake-up, which the
// subscribers' polling fallback covers (core.Store.Subscribe).

// payloadSep separates the sender's instance id from the run id in a
// notification payload: "<instance>|<run id>" for the events topic,
// "<instance>|" otherwise.
const payloadSep = "|"

// notifyBatch bounds the notifications sent in one statement.
const notifyBatch = 200

// NotifyPayload splits a notification payload into the sending instance
// and the run id (events topic). A payload without a sender (an older
// replica's) is all run id.
func NotifyPayload(payload string) (sender, runID string) {
	if s, r, ok := strings.Cut(payload, payloadSep); ok {
		return s, r
	}
	return "", payload
}

// Instance identifies this Store among the processes sharing a database,
// so a backend's listener can ignore the notifications it sent itself.
func (s *Store) Instance() string { return s.instance }

func newInstanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// notifier sends queued notifications in batches.
type notifier struct {
	s       *Store
	mu      sync.Mutex
	pending map[[2]string]struct{} // channel, payload
	order   [][2]string
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	log     *slog.Logger
}

func newNotifier(s *Store) *notifier {
	n := &notifier{s: s, pending: map[[2]string]struct{}{}, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
		log: s.log}
	go n.loop()
	return n
}

// add queues the wake-ups of one commit (deduplicated against what is
// still queued) and returns at once.
func (n *notifier) add(topics, eventRuns []string) {
	n.mu.Lock()
	for _, topic := range topics {
		ch := n.s.dialect.Channel(topic)
		payloads := []string{n.s.instance + payloadSep}
		if topic == core.TopicEvents && len(eventRuns) > 0 {
			payloads = payloads[:0]
			for _, id := range eventRuns {
				payloads = append(payloads, n.s.instance+payloadSep+id)
			}
		}
		for _, p := range payloads {
			k := [2]string{ch, p}
			if _, dup := n.pending[k]; !dup {
				n.pending[k] = struct{}{}
				n.order = append(n.order, k)
			}
		}
	}
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *notifier) loop() {
	defer close(n.done)
	for {
		select {
		case <-n.kick:
		case <-n.stop:
			n.flush() // best effort: what is left is covered by polling
			return
		}
		n.flush()
	}
}

// flush sends everything queued, notifyBatch per statement.
func (n *notifier) flush() {
	n.mu.Lock()
	batch := n.order
	n.order, n.pending = nil, map[[2]string]struct{}{}
	n.mu.Unlock()
	for len(batch) > 0 {
		k := min(len(batch), notifyBatch)
		exprs, args := make([]string, k), make([]any, 0, 2*k)
		for i, c := range batch[:k] {
			exprs[i] = n.s.dialect.NotifySQL
			args = append(args, c[0], c[1])
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := n.s.db.ExecContext(ctx, n.s.dialect.Rebind("SELECT "+strings.Join(exprs, ", ")), args...)
		cancel()
		if err != nil {
			// Other replicas fall back to polling for this one.
			n.log.Warn("send wake-ups to other replicas", "err", err, "count", k)
		}
		batch = batch[k:]
	}
}

func (n *notifier) close() {
	close(n.stop)
	<-n.done
}
