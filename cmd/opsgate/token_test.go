package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRestartKeepsAdminToken restarts the server: the generated admin
// token must survive, so console sessions and an exported $OPSGATE_TOKEN
// keep working; deleting the file rotates it.
func TestRestartKeepsAdminToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	deployConfig(e, "")
	e.start()
	first := e.token()
	path := filepath.Join(e.dir, "data", "admin.token")
	if logs := e.srv.logs.String(); !strings.Contains(logs, "using the admin token in "+path+" (delete the file to rotate it)") {
		t.Errorf("start log does not say which token file is used:\n%s", logs)
	}
	// The console's sign-in page says where this token lives.
	resp, err := http.Get(e.baseURL() + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "without <code>api.tokens</code>, the token in <code>&lt;data_dir&gt;/admin.token</code>") {
		t.Errorf("/signin: HTTP %d, page does not name admin.token:\n%s", resp.StatusCode, page)
	}
	e.stop()

	e.start()
	if got := e.token(); got != first {
		t.Fatalf("token after restart %q, want the kept %q", got, first)
	}
	if code := getWithToken(t, e, first); code != http.StatusOK {
		t.Fatalf("the token from before the restart: HTTP %d, want 200", code)
	}
	e.stop()

	// Deleting the file rotates the token; the old one stops working.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	e.start()
	if got := e.token(); got == first {
		t.Fatalf("token not rotated after deleting %s", path)
	}
	if code := getWithToken(t, e, first); code != http.StatusUnauthorized {
		t.Fatalf("the rotated-out token: HTTP %d, want 401", code)
	}
	e.stop()
}

// getWithToken lists runs with token and returns the HTTP status.
func getWithToken(t *testing.T, e *env, token string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.baseURL()+"/api/v1/runs", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
