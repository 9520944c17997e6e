package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/opsgate/opsgate/config"
)

// smallFS mounts a tmpfs of size on a new directory for the test and
// returns it; the test is skipped, saying why, where that is not possible
// (not root, or a sandbox that forbids mounting). CI runs as root.
func smallFS(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: mounting a small tmpfs to fill needs root (CI runs as root)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("skipped: this machine does not let root mount a tmpfs (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file in dir until the filesystem is full and returns it.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			break
		}
	}
	// The last bytes a partial write may have left.
	for {
		if _, err := f.Write(chunk[:512]); err != nil {
			return p
		}
	}
}

// TestDiskFullAnswers503 fills the filesystem under a SQLite store (issue
// 32): while the store refuses writes, a message gets 503 naming the store,
// with Retry-After — never 500 — and nothing of it is kept; once space is
// back, the same message (same event id) is taken as new.
func TestDiskFullAnswers503(t *testing.T) {
	t.Parallel()
	dir := smallFS(t, "16m")
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.DataDir = dir
	cfg.Store.DSN = filepath.Join(dir, "opsgate.db")
	h, _, _ := inProcessServer(t, cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	post := func(eventID string) (int, http.Header, string) {
		t.Helper()
		body := fmt.Sprintf(`{"thread":"disk","text":"status api","event_id":%q}`, eventID)
		req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/api/v1/messages", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+sweepToken)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, string(b)
	}
	if code, _, body := post("before"); code != http.StatusCreated {
		t.Fatalf("before the disk fills: %d %s", code, body)
	}
	filler := fill(t, dir)
	// SQLite reuses the pages it has (the WAL, free pages) until a write
	// needs a new one: send messages until one is refused, each either
	// taken or refused with 503 — a bounded loop.
	refused := ""
	for i := range 2000 {
		id := fmt.Sprintf("full-%d", i)
		code, h, body := post(id)
		if code == http.StatusCreated {
			continue
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("message %s on a full disk: %d %s, want 201 or 503", id, code, body)
		}
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != "store_unavailable" ||
			!strings.Contains(e.Error.Message, "sqlite store is unavailable (disk full)") || h.Get("Retry-After") == "" {
			t.Fatalf("503 body %s (Retry-After %q), want store_unavailable naming the sqlite store and its disk", body, h.Get("Retry-After"))
		}
		refused = id
		t.Logf("message %d refused: %s", i, body)
		break
	}
	if refused == "" {
		t.Fatal("2,000 messages taken on a full filesystem: the disk never filled")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	code, _, body := post(refused)
	var got struct {
		Duplicate bool `json:"duplicate"`
	}
	_ = json.Unmarshal([]byte(body), &got)
	if code != http.StatusCreated || got.Duplicate {
		t.Fatalf("the refused message again once space is back: %d %s, want 201 and not a duplicate (nothing of it was kept)", code, body)
	}
	if !bytes.Contains([]byte(body), []byte(`"run"`)) {
		t.Errorf("no run in %s", body)
	}
}
