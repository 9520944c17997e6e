package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/config"
)

func runInProcess(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestUsageErrorsExit2(t *testing.T) {
	t.Setenv("OPSGATE_TOKEN", "")
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"approvals"},
		{"approvals", "dance"},
		{"approvals", "show"},
		{"approvals", "approve", "a", "b"},
		{"approvals", "edit", "A1", "--server", "http://127.0.0.1:1", "--token", "x"},
		{"approvals", "edit", "A1", "--args", "[1,2]", "--server", "http://127.0.0.1:1", "--token", "x"},
		{"approvals", "approve", "A1", "--scope", "always", "--server", "http://127.0.0.1:1", "--token", "x"},
		{"runs", "show"},
		{"runs", "list", "--no-such-flag"},
		{"config"},
		{"audit"},
		{"serve", "--log-format", "xml"},
		{"serve", "--debug-listen", "0.0.0.0:6060"},
		{"approvals", "list", "--server", "not a url", "--token", "x"},
	} {
		_, errOut, code := runInProcess(t, args...)
		if code != exitUsage {
			t.Errorf("opsgate %q: exit %d, want %d (stderr %q)", args, code, exitUsage, errOut)
		}
		if errOut == "" {
			t.Errorf("opsgate %q: no message on stderr", args)
		}
	}
}

func TestUnreachableServerIsAClearFailure(t *testing.T) {
	_, errOut, code := runInProcess(t, "runs", "list", "--server", "http://127.0.0.1:1", "--token", "x")
	if code != exitFail || !strings.Contains(errOut, "cannot reach the server") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestVersionAndHelp(t *testing.T) {
	out, _, code := runInProcess(t, "version")
	if code != 0 || !strings.HasPrefix(out, "opsgate "+version) {
		t.Errorf("version: exit %d, %q", code, out)
	}
	out, _, code = runInProcess(t, "help")
	if code != 0 || !strings.Contains(out, "opsgate serve") {
		t.Errorf("help: exit %d, %q", code, out)
	}
}

func TestParseInterleaved(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	reason := fs.String("reason", "", "")
	pos, err := parseInterleaved(fs, []string{"A1", "--reason", "no way", "B2", "--", "--literal"})
	if err != nil {
		t.Fatal(err)
	}
	if *reason != "no way" || strings.Join(pos, ",") != "A1,B2,--literal" {
		t.Errorf("reason %q, positional %q", *reason, pos)
	}
}

func TestServerURLFromListen(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080",
		"0.0.0.0:9000":   "http://127.0.0.1:9000",
		":7000":          "http://127.0.0.1:7000",
		"[::]:7000":      "http://127.0.0.1:7000",
		"[::1]:7000":     "http://[::1]:7000",
	} {
		if got := serverURLFromListen(in); got != want {
			t.Errorf("serverURLFromListen(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://og:s3cret@db:5432/opsgate":                          "postgres://og:****@db:5432/opsgate",
		"postgres://og@db:5432/opsgate?password=s3cret&sslmode=require": "postgres://og@db:5432/opsgate?password=****&sslmode=require",
		"host=db user=og password=s3cret":                               "host=db user=og password=****",
		"./data/opsgate.db":                                             "./data/opsgate.db",
	} {
		if got := redactDSN(in); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("redactDSN(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAttack_DSNPasswordPrintedAtStartup: serve prints the store's open
// error and exits; a DSN's password, in the userinfo or as ?password=,
// must not be in it (it lands in the journal and the deploy logs).
func TestAttack_DSNPasswordPrintedAtStartup(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there: the open fails at once
	for _, dsn := range []string{
		"postgres://og:s3cretA@" + addr + "/opsgate?sslmode=disable&connect_timeout=5",
		"postgres://og@" + addr + "/opsgate?password=s3cretB&sslmode=disable&connect_timeout=5",
		"host=127.0.0.1 port=" + addr[strings.LastIndexByte(addr, ':')+1:] + " user=og password=s3cretC dbname=opsgate sslmode=disable connect_timeout=5",
		"postgres://og:s3cretD@" + addr + "/opsgate?sslmode=bogus", // a parse error quotes the DSN
	} {
		cfg := &config.Config{}
		cfg.Store.Driver, cfg.Store.DSN = "postgres", dsn
		st, err := openStore(context.Background(), cfg)
		if err == nil {
			st.Close()
			t.Fatalf("open %q succeeded", dsn)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("open error shows the password: %v", err)
		}
	}
}

func TestGeneratedAdminTokenIsPrivate(t *testing.T) {
	dir := t.TempDir()
	tok, path, err := generateAdminToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	got, err := readAdminToken(dir)
	if err != nil || got != tok || len(tok) < 32 {
		t.Errorf("read back %q, %v; generated %q", got, err, tok)
	}
	tok2, _, err := generateAdminToken(dir)
	if err != nil || tok2 == tok {
		t.Errorf("second token %q equals the first or failed: %v", tok2, err)
	}
	if _, err := readAdminToken(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "--token") {
		t.Errorf("missing token file: %v", err)
	}
}

func TestAdminTokenIsKeptUnlessUnsafeOrGarbled(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	first, path, err := adminToken(dir, log)
	if err != nil || !wellFormedAdminToken(first) {
		t.Fatalf("first start: %q, %v", first, err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, %v; want mode 0600", st, err)
	}
	again, _, err := adminToken(dir, log)
	if err != nil || again != first {
		t.Fatalf("second start: %q, %v; want the same token %q", again, err, first)
	}
	// A file others can read is no secret any more: replaced, 0600.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	opened, _, err := adminToken(dir, log)
	if err != nil || opened == first || !wellFormedAdminToken(opened) {
		t.Fatalf("after chmod 0644: %q, %v; want a new token", opened, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("replaced token file mode %v, want 0600", st.Mode().Perm())
	}
	// A garbled or weak file is replaced, not served.
	for _, bad := range []string{"", "og_short\n", "hunter2\n", "og_" + strings.Repeat("z", 64) + "\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		got, _, err := adminToken(dir, log)
		if err != nil || !wellFormedAdminToken(got) || strings.TrimSpace(bad) == got {
			t.Errorf("file %q: %q, %v; want a new well-formed token", bad, got, err)
		}
		if back, err := readAdminToken(dir); err != nil || back != got {
			t.Errorf("file %q: the CLI reads %q, %v; the server uses %q", bad, back, err, got)
		}
	}
}

type fakePinger struct{ err error }

func (f fakePinger) Ping(ctx context.Context) error {
	if f.err == errHang {
		<-ctx.Done()
		return ctx.Err()
	}
	return f.err
}

var errHang = errors.New("hang")

func TestReadyz(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, c := range []struct {
		err  error
		want int
	}{{nil, 200}, {errors.New("connection refused"), 503}, {errHang, 503}} {
		rec := httptest.NewRecorder()
		readyz(fakePinger{c.err}, log).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		if rec.Code != c.want {
			t.Errorf("ping error %v: status %d, want %d", c.err, rec.Code, c.want)
		}
	}
}

// FuzzParseExpect: --expect SEQ:HASH is parsed without panicking, and
// only a positive seq with a hash is accepted.
func FuzzParseExpect(f *testing.F) {
	for _, s := range []string{"42:hmac:abc", "1:e3b0", "0:x", "-1:x", "x:y", "", ":", "7:", "9999999999999999999:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		x, err := parseExpect(s)
		if err != nil {
			return
		}
		if x.seq < 1 || x.hash == "" || !strings.HasPrefix(s, fmt.Sprint(x.seq)+":") {
			t.Fatalf("parseExpect(%q) = %+v", s, x)
		}
	})
}
