package sqlstore_test

import (
	"database/sql"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/internal/testkit"
	"github.com/opsgate/opsgate/store/sqlstore"
)

// TestStoreLogsThroughConfiguredLogger: the store's own reports (here the
// audit sealer failing on a database without the schema) go to
// Config.Logger, in its format, not to slog.Default().
func TestStoreLogsThroughConfiguredLogger(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var buf testkit.LogBuffer
	d := sqlstore.SQLiteDialect()
	d.DeferAuditSeal = true // run the sealer, which reports its failures
	s := sqlstore.New(sqlstore.Config{DB: db, Dialect: d, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	defer s.Close()
	s.KickSealer()
	deadline := time.Now().Add(2 * time.Minute) // a hang backstop
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
