package auditsink

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/internal/testkit"
	"github.com/opsgate/opsgate/store/pgtest"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestPostgresTwoReplicasOneDelivers: two processes' stores on one
// Postgres database (entries sealed after commit by the sealer), a sink
// on each: the lease lets one deliver, every entry arrives once, in
// order; when that one stops, the other takes over from the cursor.
func TestPostgresTwoReplicasOneDelivers(t *testing.T) {
	dsn := pgtest.DSN(t)
	open := func() appenderStore {
		st, err := testkit.OpenPostgres(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, b := open(), open()
	h := &httpSink{got: newReceived()}
	srv := httptest.NewServer(h)
	defer srv.Close()
	cfg := []Config{{Name: "siem", Type: TypeHTTP, URL: srv.URL}}
	// A lease far longer than a loaded machine's late renewal: the hand-over
	// under test is the one a stop makes (it releases the lease).
	long := func(o Options) Options { o.Lease = time.Minute; return o }
	sa, stopA := start(t, cfg, long(quietOpts(a, "replica-a", nil)))
	for range 3 {
		appendEntries(t, a, 5, approvals.AuditApprovalDecided)
		appendEntries(t, b, 5, approvals.AuditApprovalRefused)
	}
	sb, stopB := start(t, cfg, long(quietOpts(b, "replica-b", nil)))
	inOrderOnce(t, h.got.waitFor(t, 30), 1, 30)
	// Either replica may hold the lease (under load b can win it before a
	// takes it, or take it over when a renewal is late): stop the one that
	// delivered the last entry; the other delivers what comes next.
	var stopHolder func()
	waitFor(t, "a replica at position 30", func() bool {
		switch {
		case testutil.ToFloat64(sa.sinks[0].m.position) >= 30:
			stopHolder = stopA
		case testutil.ToFloat64(sb.sinks[0].m.position) >= 30:
			stopHolder = stopB
		}
		return stopHolder != nil
	})
	stopHolder() // releases the lease
	appendEntries(t, a, 4, approvals.AuditApprovalDecided)
	inOrderOnce(t, h.got.waitFor(t, 34), 1, 34)
}

// appenderStore is a store the sinks run on that the test also writes.
type appenderStore interface {
	appender
	Store
}
