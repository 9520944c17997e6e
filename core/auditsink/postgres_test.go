package auditsink

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/internal/testkit"
	"github.com/opsgate/opsgate/store/pgtest"
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
	sa, stopA := start(t, cfg, quietOpts(a, "replica-a", nil))
	for range 3 {
		appendEntries(t, a, 5, approvals.AuditApprovalDecided)
		appendEntries(t, b, 5, approvals.AuditApprovalRefused)
	}
	start(t, cfg, quietOpts(b, "replica-b", nil))
	inOrderOnce(t, h.got.waitFor(t, 30), 1, 30)
	waitPosition(t, sa, 30)
	stopA() // releases the lease: b delivers what comes next
	appendEntries(t, a, 4, approvals.AuditApprovalDecided)
	inOrderOnce(t, h.got.waitFor(t, 34), 1, 34)
}

// appenderStore is a store the sinks run on that the test also writes.
type appenderStore interface {
	appender
	Store
}
