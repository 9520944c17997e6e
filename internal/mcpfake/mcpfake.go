// Package mcpfake is a deliberately misbehaving MCP server for tests: it
// speaks just enough JSON-RPC by hand (no SDK, so it can break the rules)
// to crash, hang, send garbage, send huge or malformed results, report
// isError, change its tool list, and record what opsgate sent it.
//
// Over stdio it runs inside the test binary itself: a TestMain calls
// MainIfRequested first, and a test starts os.Args[0] with Env(mode, dir).
// Over HTTP, Handler serves the same tools statelessly.
package mcpfake

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Environment of a stdio fake.
const (
	envOn     = "MCPFAKE"
	envMode   = "MCPFAKE_MODE"
	envDir    = "MCPFAKE_DIR"
	envSecret = "MCPFAKE_SECRET"
)

// Startup modes (how the fake answers initialize).
const (
	ModeOK         = "ok"
	ModeHangInit   = "hang-init"   // never answers initialize
	ModeCrashInit  = "crash-init"  // exits 2 on initialize
	ModeBadVersion = "bad-version" // answers with a protocol version nobody speaks
	ModeGarbage    = "garbage"     // answers initialize with a line that is not JSON
)

// Env returns the environment entries that make os.Args[0] a fake in mode
// writing its records into dir; secret is printed on stderr at startup
// and by the "env" tool, to test masking.
func Env(mode, dir, secret string) map[string]string {
	return map[string]string{envOn: "1", envMode: mode, envDir: dir, envSecret: secret}
}

// MainIfRequested turns the process into a stdio fake when Env asked for
// it, and exits when stdin ends. Call it first in TestMain.
func MainIfRequested() {
	if os.Getenv(envOn) != "1" {
		return
	}
	f := &Fake{Mode: os.Getenv(envMode), Dir: os.Getenv(envDir), Secret: os.Getenv(envSecret)}
	fmt.Fprintf(os.Stderr, "fake MCP server starting (mode %s, secret %s)\n", f.Mode, f.Secret)
	f.ServeStdio(os.Stdin, os.Stdout)
	os.Exit(0)
}

// Fake is one fake server's state.
type Fake struct {
	Mode, Dir, Secret string
	// OnDie, when set, runs as the HTTP "die" tool drops its connection
	// (a test stops the whole server there).
	OnDie func()

	mu      sync.Mutex
	toggled bool // the "toggle" tool was called: the list changed
	out     io.Writer
}

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// ServeStdio answers newline-delimited JSON-RPC until r ends.
func (f *Fake) ServeStdio(r io.Reader, w io.Writer) {
	f.out = w
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue
		}
		// Calls run concurrently, as a real server's would: a hanging
		// tool must not block the next request.
		go func() {
			if raw, ok := f.handle(m); ok {
				f.write(raw)
			}
		}()
	}
}

func (f *Fake) write(line []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, _ = f.out.Write(append(line, '\n'))
}

func reply(id json.RawMessage, result any) []byte {
	b, _ := json.Marshal(message{JSONRPC: "2.0", ID: id, Result: result})
	return b
}

func replyError(id json.RawMessage, code int, msg string) []byte {
	b, _ := json.Marshal(message{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: msg}})
	return b
}

// handle returns the line to answer m with (ok false for none).
func (f *Fake) handle(m message) ([]byte, bool) {
	if len(m.ID) == 0 {
		return nil, false // a notification
	}
	switch m.Method {
	case "initialize":
		switch f.Mode {
		case ModeHangInit:
			select {}
		case ModeCrashInit:
			fmt.Fprintln(os.Stderr, "fake MCP server: crashing on initialize")
			os.Exit(2)
		case ModeGarbage:
			return []byte("this is not JSON-RPC"), true
		}
		version := "2025-11-25"
		if f.Mode == ModeBadVersion {
			version = "1999-01-01"
		}
		return reply(m.ID, map[string]any{
			"protocolVersion": version,
			"capabilities":    map[string]any{"tools": map[string]any{"listChanged": true}},
			"serverInfo":      map[string]any{"name": "mcpfake", "version": "0"},
		}), true
	case "ping":
		return reply(m.ID, map[string]any{}), true
	case "tools/list":
		return reply(m.ID, map[string]any{"tools": f.tools()}), true
	case "tools/call":
		return f.call(m)
	}
	return replyError(m.ID, -32601, "method not found: "+m.Method), true
}

func obj(props map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object"}
	if props != nil {
		s["properties"] = props
	}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

var str = map[string]any{"type": "string"}

func hints(readOnly, destructive, idempotent, openWorld bool) map[string]any {
	return map[string]any{"readOnlyHint": readOnly, "destructiveHint": destructive, "idempotentHint": idempotent, "openWorldHint": openWorld}
}

func (f *Fake) tools() []map[string]any {
	ts := []map[string]any{
		{"name": "echo", "description": "echoes text", "inputSchema": obj(map[string]any{"text": str}, "text"), "annotations": hints(true, false, true, false)},
		{"name": "write", "description": "writes", "inputSchema": obj(map[string]any{"path": str, "content": str}, "path", "content"), "annotations": hints(false, true, false, false)},
		{"name": "plain", "description": "no annotations", "inputSchema": obj(nil)},
		{"name": "fail", "inputSchema": obj(nil), "annotations": hints(true, false, true, false)},
		{"name": "huge", "inputSchema": obj(map[string]any{"bytes": map[string]any{"type": "integer"}}, "bytes")},
		{"name": "hang", "inputSchema": obj(nil)},
		{"name": "crash", "inputSchema": obj(nil)},
		{"name": "die", "description": "over HTTP: drops the connection mid-call", "inputSchema": obj(nil)},
		{"name": "garbage", "inputSchema": obj(nil)},
		{"name": "malformed", "inputSchema": obj(nil)},
		{"name": "rpcerror", "inputSchema": obj(nil)},
		{"name": "meta", "inputSchema": obj(nil), "annotations": hints(true, false, true, false)},
		{"name": "env", "description": "prints the secret " + f.Secret, "annotations": hints(true, false, true, false),
			"inputSchema": obj(map[string]any{"token": map[string]any{"type": "string", "default": f.Secret}})},
		{"name": "slow_put", "inputSchema": obj(nil), "annotations": hints(false, false, true, false)},
		{"name": "slow_write", "inputSchema": obj(nil), "annotations": hints(false, true, false, false)},
		{"name": "bad_schema", "inputSchema": map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"$ref": "file:///etc/passwd"}}}},
		{"name": "bad name", "inputSchema": obj(nil)},
	}
	f.mu.Lock()
	toggled := f.toggled
	f.mu.Unlock()
	if toggled {
		ts = append(ts, map[string]any{"name": "extra", "inputSchema": obj(nil), "annotations": hints(true, false, true, false)})
	} else {
		ts = append(ts, map[string]any{"name": "toggle", "inputSchema": obj(nil)},
			map[string]any{"name": "toggle_quiet", "inputSchema": obj(nil)})
	}
	return ts
}

func text(s string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}}
}

func (f *Fake) call(m message) ([]byte, bool) {
	var p struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
		Meta      map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return replyError(m.ID, -32602, "bad params"), true
	}
	f.record(p.Name, p.Meta)
	switch p.Name {
	case "echo":
		return reply(m.ID, text(fmt.Sprintf("echo: %v", p.Arguments["text"]))), true
	case "write", "plain", "extra":
		return reply(m.ID, text(p.Name+" done")), true
	case "fail":
		r := text("it broke: disk full")
		r["isError"] = true
		return reply(m.ID, r), true
	case "huge":
		n, _ := p.Arguments["bytes"].(float64)
		return reply(m.ID, text(strings.Repeat("x", int(n)))), true
	case "hang":
		select {}
	case "crash", "die":
		fmt.Fprintln(os.Stderr, "fake MCP server: crashing mid-call")
		os.Exit(3)
	case "garbage":
		return []byte("{garbage"), true
	case "malformed":
		return reply(m.ID, map[string]any{"content": "not a list"}), true
	case "rpcerror":
		return replyError(m.ID, -32000, "backend exploded"), true
	case "meta":
		b, _ := json.Marshal(p.Meta)
		return reply(m.ID, text(string(b))), true
	case "env":
		return reply(m.ID, text("secret is "+f.Secret)), true
	case "toggle", "toggle_quiet":
		f.mu.Lock()
		f.toggled = true
		f.mu.Unlock()
		if p.Name == "toggle" {
			f.write([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
		}
		return reply(m.ID, text("toggled")), true
	case "slow_put", "slow_write":
		f.touch(fmt.Sprintf("started-%d", time.Now().UnixNano()))
		for f.Dir != "" {
			if _, err := os.Stat(filepath.Join(f.Dir, "release")); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		return reply(m.ID, text(p.Name+" done")), true
	}
	return replyError(m.ID, -32602, "unknown tool "+p.Name), true
}

// record appends "<tool> <idempotency key> <run id>" to <dir>/calls.log.
func (f *Fake) record(tool string, meta map[string]any) {
	if f.Dir == "" {
		return
	}
	fl, err := os.OpenFile(filepath.Join(f.Dir, "calls.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer fl.Close()
	fmt.Fprintf(fl, "%s %v %v\n", tool, meta["opsgate/idempotency-key"], meta["opsgate/run-id"])
}

func (f *Fake) touch(name string) {
	if f.Dir != "" {
		_ = os.WriteFile(filepath.Join(f.Dir, name), nil, 0o644)
	}
}

// Handler serves the fake over Streamable HTTP, statelessly: each POST is
// answered with one JSON response (202 for notifications); GET (the
// optional standalone event stream) is 405. When token is set, requests
// without "Authorization: Bearer <token>" get 401.
func (f *Fake) Handler(token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost {
			http.Error(w, "no event stream here", http.StatusMethodNotAllowed)
			return
		}
		var m message
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&m); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		if f.Mode == ModeHangInit || toolName(m) == "hang" {
			<-r.Context().Done()
			return
		}
		if toolName(m) == "die" {
			// The server dies mid-call: the call's event stream has begun,
			// then the connection drops without an answer.
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"working\"}}\n\n")
			w.(http.Flusher).Flush()
			if f.OnDie != nil {
				f.OnDie()
			}
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		raw, ok := f.handleHTTP(m)
		if !ok {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(raw)
	})
}

func (f *Fake) handleHTTP(m message) ([]byte, bool) {
	switch name := toolName(m); name {
	case "crash", "toggle", "toggle_quiet", "slow_put", "slow_write":
		return replyError(m.ID, -32602, name+" is stdio-only"), true
	}
	return f.handle(m)
}

// toolName is the tool a tools/call names ("" for other messages).
func toolName(m message) string {
	if m.Method != "tools/call" {
		return ""
	}
	var p struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(m.Params, &p)
	return p.Name
}
