package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// TestSQLiteFilesArePrivate: the database holds every approval and audit
// entry, so its directory (when opsgate creates it) is 0700 and its files
// 0600, like admin.token beside it.
func TestSQLiteFilesArePrivate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("Fresh", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "data")
		db := filepath.Join(dir, "opsgate.db")
		st, err := openSQLite(ctx, db+"?_pragma=busy_timeout(1000)")
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if m := mode(t, dir); m != 0o700 {
			t.Errorf("created data dir mode %v, want 0700", m)
		}
		for _, p := range []string{db, db + "-wal", db + "-shm"} {
			if _, err := os.Stat(p); err != nil {
				continue // -wal/-shm exist only in WAL mode, after a write
			}
			if m := mode(t, p); m != 0o600 {
				t.Errorf("%s mode %v, want 0600", filepath.Base(p), m)
			}
		}
	})
	t.Run("ExistingFileTightenedDirLeftAlone", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		db := filepath.Join(dir, "opsgate.db")
		// A database an earlier version created 0644, with its WAL files.
		st, err := openSQLite(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		st.Close()
		for _, p := range []string{db, db + "-wal", db + "-shm"} {
			if err := os.Chmod(p, 0o644); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
		if m := mode(t, db); m != 0o644 {
			t.Fatalf("setup: database mode %v, want 0644", m)
		}
		st, err = openSQLite(ctx, "file:"+db)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if m := mode(t, db); m != 0o600 {
			t.Errorf("existing database mode %v after open, want 0600", m)
		}
		for _, p := range []string{db + "-wal", db + "-shm"} {
			if _, err := os.Stat(p); err == nil && mode(t, p) != 0o600 {
				t.Errorf("%s mode %v after open, want 0600", filepath.Base(p), mode(t, p))
			}
		}
		if m := mode(t, dir); m != 0o750 {
			t.Errorf("existing directory mode changed to %v; want it left 0750", m)
		}
	})
	t.Run("Memory", func(t *testing.T) {
		t.Parallel()
		st, err := openSQLite(ctx, ":memory:")
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
	})
}

// TestServeCreatesPrivateDataDir: `opsgate serve` creates a missing data
// dir 0700 and the SQLite file in it 0600.
func TestServeCreatesPrivateDataDir(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	deployConfig(e, "")
	data := filepath.Join(e.dir, "data")
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("%s exists before serve (err %v)", data, err)
	}
	e.start()
	defer e.stop()
	if m := mode(t, data); m != 0o700 {
		t.Errorf("data dir mode %v, want 0700", m)
	}
	for _, name := range []string{"opsgate.db", "opsgate.db-wal", "opsgate.db-shm", "admin.token"} {
		p := filepath.Join(data, name)
		if _, err := os.Stat(p); err != nil {
			if name == "opsgate.db" || name == "admin.token" {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if m := mode(t, p); m != 0o600 {
			t.Errorf("%s mode %v, want 0600", name, m)
		}
	}
}
