package upstream

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/tools"
	"github.com/opsgate/opsgate/internal/mcpfake"
)

// These tests run against mcpfake, a server that breaks the rules on
// purpose: every way it misbehaves must come out as a tool error.

func TestAnnotationsSetDefaultsAndOverridesWin(t *testing.T) {
	t.Parallel()
	s, _ := fakeServer(t, "f", mcpfake.ModeOK)
	yes, no := true, false
	s.Overrides = map[string]Override{"plain": {Risk: approvals.RiskHighImpact, Idempotent: &yes, Destructive: &no}}
	r, _ := start(t, s)
	for _, tc := range []struct {
		name                    string
		risk                    approvals.Risk
		destructive, idempotent bool
	}{
		{"f.echo", approvals.RiskRead, false, true},           // readOnlyHint
		{"f.write", approvals.RiskReversible, true, false},    // destructive, closed world
		{"f.slow_put", approvals.RiskReversible, false, true}, // idempotentHint, not destructive
		{"f.toggle", approvals.RiskExternal, true, false},     // no annotations: MCP's defaults
		{"f.plain", approvals.RiskHighImpact, false, true},    // overridden
	} {
		tl := lookup(t, r, tc.name)
		if tl.Risk != tc.risk || tl.Destructive != tc.destructive || tl.Idempotent != tc.idempotent {
			t.Errorf("%s: risk %s destructive %v idempotent %v; want %s %v %v", tc.name, tl.Risk, tl.Destructive, tl.Idempotent, tc.risk, tc.destructive, tc.idempotent)
		}
	}
	// The input schema is the server's: arguments are validated against it.
	echo := lookup(t, r, "f.echo")
	if _, err := echo.Schema.Apply(map[string]any{}); err == nil {
		t.Error("echo without its required text passed the schema")
	}
	if _, err := echo.Schema.Apply(map[string]any{"text": "hi"}); err != nil {
		t.Errorf("valid echo args refused: %v", err)
	}
	if strings.Contains(string(mustJSON(lookupInfo(t, r, "f.env").Schema)), "hunter2") {
		t.Error("a credential in a schema was not masked")
	}
	if p, err := echo.Runner.Preview(context.Background(), tools.Call{}); err != nil || p != PreviewText {
		t.Errorf("preview %q %v, want %q", p, err, PreviewText)
	}
}

func lookupInfo(t *testing.T, r *Registry, name string) ToolInfo {
	t.Helper()
	for _, in := range r.Reports(context.Background())[0].Tools {
		if in.Name == name {
			return in
		}
	}
	t.Fatalf("no tool %s listed", name)
	return ToolInfo{}
}

func TestToolsGlobsNarrowWhatIsOffered(t *testing.T) {
	t.Parallel()
	s, _ := fakeServer(t, "f", mcpfake.ModeOK)
	s.Tools = []string{"echo", "w*"}
	r, _ := start(t, s)
	lookup(t, r, "f.echo")
	lookup(t, r, "f.write")
	var names []string
	for _, tl := range r.Tools(t.Context()) {
		names = append(names, tl.Name)
	}
	if strings.Join(names, " ") != "f.echo f.write" {
		t.Errorf("Tools() = %v", names)
	}
	_, err := r.LookupTool(context.Background(), "f.plain")
	if !errors.Is(err, tools.ErrUnknownTool) || !strings.Contains(err.Error(), "not in its tools globs") {
		t.Fatalf("f.plain: %v", err)
	}
	_, err = r.LookupTool(context.Background(), "f.nosuch")
	if !errors.Is(err, tools.ErrUnknownTool) || !strings.Contains(err.Error(), "does not offer it") {
		t.Fatalf("f.nosuch: %v", err)
	}
	if _, err := r.LookupTool(context.Background(), "g.echo"); !errors.Is(err, tools.ErrUnknownTool) {
		t.Fatalf("unknown server: %v", err)
	}
}

func TestUnusableToolsAreNotOffered(t *testing.T) {
	t.Parallel()
	s, _ := fakeServer(t, "f", mcpfake.ModeOK)
	r, logs := start(t, s)
	reps := r.Reports(context.Background())
	problems := map[string]string{}
	for _, in := range reps[0].Tools {
		if in.Problem != "" {
			problems[in.Remote] = in.Problem
		}
	}
	if !strings.Contains(problems["bad_schema"], `external $ref "file:///etc/passwd"`) {
		t.Errorf("bad_schema: %q", problems["bad_schema"])
	}
	if !strings.Contains(problems["bad name"], "characters") {
		t.Errorf("bad name: %q", problems["bad name"])
	}
	if _, err := r.LookupTool(context.Background(), "f.bad_schema"); !errors.Is(err, tools.ErrUnknownTool) {
		t.Errorf("bad_schema offered: %v", err)
	}
	waitLog(t, logs, "upstream tool not offered", "server=f", "bad_schema")
}

func TestCallSendsIdempotencyKeyAndRunIDInMeta(t *testing.T) {
	t.Parallel()
	s, dir := fakeServer(t, "f", mcpfake.ModeOK)
	r, _ := start(t, s)
	res, err := call(t, r, "f.meta", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !containsAll(res.Output, `"opsgate/idempotency-key":"run-1/0"`, `"opsgate/run-id":"run-1"`) {
		t.Fatalf("meta seen by the server: %s", res.Output)
	}
	if got := readFile(t, filepath.Join(dir, "calls.log")); got != "meta run-1/0 run-1\n" {
		t.Fatalf("calls.log = %q", got)
	}
	res, err = call(t, r, "f.echo", map[string]any{"text": "hello"})
	if err != nil || res.Output != "echo: hello" {
		t.Fatalf("echo: %q %v", res.Output, err)
	}
}

func TestIsErrorResultIsAToolErrorWithItsOutput(t *testing.T) {
	t.Parallel()
	s, _ := fakeServer(t, "f", mcpfake.ModeOK)
	r, _ := start(t, s)
	res, err := call(t, r, "f.fail", nil)
	var te *ToolError
	if !errors.As(err, &te) || te.Tool != "f.fail" || !strings.Contains(err.Error(), "isError") {
		t.Fatalf("err = %v", err)
	}
	if res.Output != "it broke: disk full" {
		t.Fatalf("output %q", res.Output)
	}
}

func TestOutputIsCappedLikeOtherTools(t *testing.T) {
	t.Parallel()
	s, _ := fakeServer(t, "f", mcpfake.ModeOK)
	s.MaxOutput = 1000
	r, _ := start(t, s)
	res, err := call(t, r, "f.huge", map[string]any{"bytes": 50000})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := tools.CapOutput(strings.Repeat("x", 50000), 1000)
	if !res.Truncated || res.Output != want || !strings.HasSuffix(res.Output, "[… truncated 49000 bytes]") {
		t.Fatalf("truncated %v, %d bytes, tail %q", res.Truncated, len(res.Output), res.Output[len(res.Output)-40:])
	}
}

func TestOversizedMessageIsRefusedAndTheServerRestarts(t *testing.T) {
	t.Parallel()
	s, _ := fakeServer(t, "f", mcpfake.ModeOK)
	s.MaxMessage = 8 << 10
	r, _ := start(t, s)
	_, err := call(t, r, "f.huge", map[string]any{"bytes": 64 << 10})
	if err == nil || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("oversized result: %v", err)
	}
	// The next call gets a fresh connection.
	if res, err := call(t, r, "f.echo", map[string]any{"text": "again"}); err != nil || res.Output != "echo: again" {
		t.Fatalf("after an oversized message: %q %v", res.Output, err)
	}
}

func TestHangingCallTimesOutAndTheServerStaysUsable(t *testing.T) {
	t.Parallel()
	s, _ := fakeServer(t, "f", mcpfake.ModeOK)
	s.CallTimeout = 300 * time.Millisecond
	r, _ := start(t, s)
	_, err := call(t, r, "f.hang", nil)
	if !errors.Is(err, tools.ErrTimeout) || !errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), "may still complete") {
		t.Fatalf("hang: %v", err)
	}
	if res, err := call(t, r, "f.echo", map[string]any{"text": "still here"}); err != nil || res.Output != "echo: still here" {
		t.Fatalf("after a timeout: %q %v", res.Output, err)
	}
}

func TestCrashMidCallIsAToolErrorAndTheProcessRestarts(t *testing.T) {
	t.Parallel()
	s, _ := fakeServer(t, "f", mcpfake.ModeOK)
	r, logs := start(t, s)
	_, err := call(t, r, "f.crash", nil)
	if err == nil || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("crash: %v", err)
	}
	waitLog(t, logs, "upstream stderr", "server=f", "crashing mid-call")
	waitLog(t, logs, "upstream server disconnected", "exit status 3")
	if res, err := call(t, r, "f.echo", map[string]any{"text": "reborn"}); err != nil || res.Output != "echo: reborn" {
		t.Fatalf("after a crash: %q %v", res.Output, err)
	}
}

func TestGarbageAndMalformedResultsAreToolErrors(t *testing.T) {
	t.Parallel()
	s, _ := fakeServer(t, "f", mcpfake.ModeOK)
	r, _ := start(t, s)
	for _, name := range []string{"f.garbage", "f.malformed"} {
		if _, err := call(t, r, name, nil); err == nil || !strings.Contains(err.Error(), "upstream f") {
			t.Errorf("%s: %v", name, err)
		}
		if res, err := call(t, r, "f.echo", map[string]any{"text": "ok"}); err != nil || res.Output != "echo: ok" {
			t.Fatalf("after %s: %q %v", name, res.Output, err)
		}
	}
	_, err := call(t, r, "f.rpcerror", nil)
	if err == nil || !containsAll(err.Error(), "upstream f refused f.rpcerror", "backend exploded", "-32000") {
		t.Fatalf("rpc error: %v", err)
	}
}

func TestListChangedRefreshesTheTools(t *testing.T) {
	t.Parallel()
	s, _ := fakeServer(t, "f", mcpfake.ModeOK)
	s.RefreshInterval = time.Hour // only the notification can refresh it
	r, logs := start(t, s)
	if _, err := call(t, r, "f.toggle", nil); err != nil {
		t.Fatal(err)
	}
	waitLog(t, logs, "upstream tools changed", "f.extra")
	lookup(t, r, "f.extra")
	if _, err := r.LookupTool(context.Background(), "f.toggle"); !errors.Is(err, tools.ErrUnknownTool) {
		t.Fatalf("a tool the server dropped is still offered: %v", err)
	}
}

func TestToolListRefreshedPeriodically(t *testing.T) {
	t.Parallel()
	s, _ := fakeServer(t, "f", mcpfake.ModeOK)
	s.RefreshInterval = 50 * time.Millisecond
	r, logs := start(t, s)
	if _, err := call(t, r, "f.toggle_quiet", nil); err != nil { // changes the list without a notification
		t.Fatal(err)
	}
	waitLog(t, logs, "upstream tools changed", "f.extra")
	lookup(t, r, "f.extra")
}

func TestServerThatCannotStartFailsCallsClearly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ mode, want string }{
		{mcpfake.ModeHangInit, "no answer to initialize within 1.5s"},
		{mcpfake.ModeCrashInit, "exit status 2"},
		{mcpfake.ModeBadVersion, `unsupported protocol version: "1999-01-01"`},
		{mcpfake.ModeGarbage, "connect:"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			s, _ := fakeServer(t, "f", tc.mode)
			if tc.mode == mcpfake.ModeHangInit {
				s.ConnectTimeout = 1500 * time.Millisecond
			}
			r, _ := start(t, s)
			_, err := r.LookupTool(context.Background(), "f.echo")
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("lookup: %v", err)
			}
			rep := r.Reports(context.Background())[0]
			if rep.Connected || rep.Listed || !strings.Contains(rep.Err, tc.want) {
				t.Fatalf("report: %+v", rep)
			}
		})
	}
}

func TestCredentialsAreMaskedEverywhere(t *testing.T) {
	t.Parallel()
	s, _ := fakeServer(t, "f", mcpfake.ModeOK)
	r, logs := start(t, s)
	res, err := call(t, r, "f.env", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "secret is ****" {
		t.Fatalf("output %q", res.Output)
	}
	if d := lookup(t, r, "f.env").Description; d != "<external_content source=\"mcp:f\">\nprints the secret ****\n</external_content>" {
		t.Fatalf("description %q", d)
	}
	waitLog(t, logs, "upstream stderr", "secret ****")
	if strings.Contains(logs.String(), "hunter2") {
		t.Fatalf("a secret reached the log:\n%s", logs.String())
	}
	// An error carrying the secret (a command line with it) is masked too.
	bad := Server{Name: "g", Command: []string{"/nonexistent/hunter2-secret"}, Secrets: []string{"hunter2-secret"},
		ConnectTimeout: time.Second, MinBackoff: 10 * time.Millisecond}
	r2, logs2 := start(t, bad)
	_, err = r2.LookupTool(context.Background(), "g.x")
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "/nonexistent/****") {
		t.Fatalf("lookup error: %v", err)
	}
	if rep := r2.Reports(context.Background())[0]; strings.Contains(rep.Err+rep.Target, "hunter2") {
		t.Fatalf("report: %+v", rep)
	}
	waitLog(t, logs2, "upstream server unavailable")
	if strings.Contains(logs2.String(), "hunter2") {
		t.Fatalf("a secret reached the log:\n%s", logs2.String())
	}
}

func TestCloseStopsTheProcessAndFailsLaterCalls(t *testing.T) {
	t.Parallel()
	s, _ := fakeServer(t, "f", mcpfake.ModeOK)
	r, _ := start(t, s)
	echo := lookup(t, r, "f.echo")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := echo.Runner.Run(context.Background(), tools.Call{Args: map[string]any{"text": "x"}})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("call after close: %v", err)
	}
}

func TestNewRefusesBadServers(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]Server{
		"dotted name":     {Name: "a.b", Command: []string{"x"}},
		"neither":         {Name: "a"},
		"both":            {Name: "a", Command: []string{"x"}, URL: "http://127.0.0.1/"},
		"relative url":    {Name: "a", URL: "/mcp"},
		"reserved header": {Name: "a", URL: "http://127.0.0.1/", Headers: map[string]string{"mcp-session-id": "x"}},
		"bad risk":        {Name: "a", Command: []string{"x"}, Overrides: map[string]Override{"t": {Risk: "lethal"}}},
	} {
		if _, err := New([]Server{s}, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New([]Server{{Name: "a", Command: []string{"x"}}, {Name: "a", URL: "http://127.0.0.1/"}}, nil); err == nil {
		t.Error("two servers with one name accepted")
	}
}

// TestSamplingIsRefusedClearly: a server that asks opsgate's models
// anyway (sampling/createMessage) is told why it is refused; other
// requests pass.
func TestSamplingIsRefusedClearly(t *testing.T) {
	t.Parallel()
	reached := false
	h := refuseSampling(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		reached = true
		return &mcp.ListToolsResult{}, nil
	})
	_, err := h(context.Background(), "sampling/createMessage", nil)
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || !strings.Contains(rpcErr.Message, "sampling is refused") || reached {
		t.Fatalf("sampling: %v (reached the SDK: %v)", err, reached)
	}
	if _, err := h(context.Background(), "roots/list", nil); err != nil || !reached {
		t.Fatalf("roots/list: %v", err)
	}
}
