package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
)

// Cluster is a throwaway Postgres server that one test owns alone, so it
// may stop and restart it: the fault tests (a server that goes away under
// running work) need that, and must never do it to the server other tests
// share ($OPSGATE_TEST_POSTGRES_DSN, or the package's own cluster). It is
// started from the same binaries as the shared throwaway cluster, on its
// own loopback port and temp directory, and needs no TestMain: t.Cleanup
// stops it, and the watchdog stops it if the test process dies. Unlike the
// shared one it runs with synchronous_commit on: a commit acknowledged
// before a stop is there after the restart (fsync stays off, which only
// matters when the machine itself goes down).
type Cluster struct {
	mu      sync.Mutex
	c       *cluster
	running bool
}

// StartCluster starts a private cluster for t. Without Postgres binaries it
// fails t, or skips it under $OPSGATE_SKIP_POSTGRES=1, exactly as DSN does
// when no server is available.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := startClusterWith(context.Background(), true)
	if err != nil {
		unavailable(t, os.Getenv, "no private Postgres cluster for this test (it restarts the server, so it cannot use a shared one): "+err.Error())
		return nil
	}
	cl := &Cluster{c: c, running: true}
	t.Cleanup(func() {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		if err := cl.c.stop(); err != nil {
			t.Errorf("pgtest: stop private cluster: %v", err)
		}
	})
	return cl
}

// DSN is the superuser's DSN of the cluster's "postgres" database, over TCP
// on loopback. It stays the same across restarts.
func (cl *Cluster) DSN() string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.c.adminDSN()
}

// Stop shuts the server down at once (SIGQUIT, like `pg_ctl stop -m
// immediate` or a crash: open connections break, new ones are refused) and
// keeps its data for Start.
func (cl *Cluster) Stop() error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if !cl.running {
		return errors.New("pgtest: cluster is not running")
	}
	cl.running = false
	if err := cl.c.halt(); err != nil {
		return fmt.Errorf("pgtest: stop cluster: %w", err)
	}
	return nil
}

// Start runs the server again on the same data and port and returns once
// it accepts connections (after crash recovery).
func (cl *Cluster) Start(ctx context.Context) error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.running {
		return errors.New("pgtest: cluster is already running")
	}
	if err := cl.c.start(ctx); err != nil {
		return fmt.Errorf("pgtest: restart cluster: %w", err)
	}
	cl.running = true
	return nil
}
