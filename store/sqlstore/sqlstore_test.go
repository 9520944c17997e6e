package sqlstore

import (
	"database/sql"
	"errors"
	"testing"
	"testing/fstest"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

func TestRebind(t *testing.T) {
	for _, c := range []struct {
		d       Dialect
		in, out string
	}{
		{PostgresDialect(), "SELECT 1", "SELECT 1"},
		{PostgresDialect(), "a = ? AND b IN (?, ?)", "a = $1 AND b IN ($2, $3)"},
		{SQLiteDialect(), "a = ? AND b = ?", "a = ? AND b = ?"},
	} {
		if got := c.d.Rebind(c.in); got != c.out {
			t.Errorf("%s Rebind(%q) = %q, want %q", c.d.Name, c.in, got, c.out)
		}
	}
}

func TestReadMigrations(t *testing.T) {
	good := fstest.MapFS{
		"m/0002_more.sql": {Data: []byte("B")},
		"m/0001_init.sql": {Data: []byte("A")},
		"m/README":        {Data: []byte("ignored")},
	}
	ms, err := ReadMigrations(good, "m")
	if err != nil || len(ms) != 2 || ms[0].Version != 1 || ms[1].SQL != "B" {
		t.Fatalf("ReadMigrations = %+v, %v", ms, err)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"no number": {"m/init.sql": {Data: []byte("A")}},
		"zero":      {"m/0000_x.sql": {Data: []byte("A")}},
		"duplicate": {"m/0001_a.sql": {Data: []byte("A")}, "m/1_b.sql": {Data: []byte("B")}},
	} {
		if _, err := ReadMigrations(fsys, "m"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestNotFoundMatchesBothSentinels(t *testing.T) {
	err := mapErr(sql.ErrNoRows, "get", "thing")
	if !errors.Is(err, core.ErrNotFound) || !errors.Is(err, approvals.ErrNotFound) {
		t.Errorf("mapErr(ErrNoRows) = %v, want both ErrNotFound sentinels", err)
	}
	if err := mapErr(errors.New("boom"), "get", "thing"); errors.Is(err, core.ErrNotFound) {
		t.Errorf("mapErr(other) = %v matches ErrNotFound", err)
	}
}

func TestHubCoalescesAndCancels(t *testing.T) {
	h := NewHub()
	ch, cancel := h.Subscribe("runs")
	other, cancelOther := h.Subscribe("outbox")
	defer cancelOther()
	for range 10 {
		h.Broadcast("runs") // never blocks
	}
	if len(ch) != 1 || len(other) != 0 {
		t.Fatalf("buffered wake-ups: runs %d outbox %d, want 1 and 0", len(ch), len(other))
	}
	<-ch
	cancel()
	cancel()
	h.Broadcast("runs")
	if len(ch) != 0 {
		t.Error("cancelled subscriber woken")
	}
	h.Close()
	late, _ := h.Subscribe("runs")
	h.Broadcast("runs")
	if len(late) != 0 {
		t.Error("subscriber after Close woken")
	}
}
