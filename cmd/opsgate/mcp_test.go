package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The binary mounts every MCP endpoint beside the console, each taking its
// own kind of token, and OAuth discovery gets JSON, not the sign-in page.
func TestMCPEndpointsMounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.writeConfig(e.storeYAML(""), `
api:
  tokens:
    - {name: admin, token: admin-secret, actor: "console:admin"}
    - {name: studio, token: studio-secret, actor: "console:studio", internal: true}
channels:
  console: {enabled: true}
tools:
  - {name: hello, risk: read, exec: {command: [echo, hi]}}
flows:
  - {name: hello, command: hello, steps: [{tool: hello}]}
`)
	e.start()
	do := func(method, path, token, body string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, e.baseURL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b), res.Header
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, c := range []struct {
		path, token string
		code        int
	}{
		{"/mcp", "admin-secret", 200}, {"/mcp/codex", "admin-secret", 200},
		{"/internal/mcp", "studio-secret", 200}, {"/internal/mcp/studio", "studio-secret", 200},
		{"/mcp", "studio-secret", 401}, {"/internal/mcp", "admin-secret", 401}, {"/mcp", "", 401},
	} {
		if code, body, _ := do("POST", c.path, c.token, init); code != c.code {
			t.Errorf("%s with %q: %d %s, want %d", c.path, c.token, code, body, c.code)
		}
	}
	code, body, h := do("GET", "/.well-known/oauth-authorization-server", "", "")
	var m map[string]any
	if code != 404 || h.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(body), &m) != nil {
		t.Errorf("well-known: %d %q %s", code, h.Get("Content-Type"), body)
	}
	// An internal token is not an API or console token.
	if code, _, _ := do("GET", "/api/v1/runs", "studio-secret", ""); code != 401 {
		t.Errorf("internal token on the API: %d", code)
	}
	if code, _, _ := do("GET", "/api/v1/runs", "admin-secret", ""); code != 200 {
		t.Errorf("admin token on the API: %d", code)
	}
	e.stop()
}
