package sqlstore

import (
	"bytes"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// syncBuffer is a bytes.Buffer safe for the sealer goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStoreLogsThroughConfiguredLogger: the store's own reports (here the
// audit sealer failing on a database without the schema) go to
// Config.Logger, in its format, not to slog.Default().
func TestStoreLogsThroughConfiguredLogger(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var buf syncBuffer
	d := SQLiteDialect()
	d.DeferAuditSeal = true // run the sealer, which reports its failures
	s := New(Config{DB: db, Dialect: d, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	defer s.Close()
	s.KickSealer()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(buf.String(), `"msg":"seal audit entries; will retry"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no sealer report in the configured JSON logger; got %q", buf.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(buf.String(), `"component":"store/sqlite"`) {
		t.Errorf("report lacks the store's component: %q", buf.String())
	}
}
