package main

import (
	"strings"
	"testing"
	"time"
)

func TestLoopbackURLRefusesOtherHosts(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"http://127.0.0.1:8080", "http://localhost:1", "http://[::1]:9", "http://127.3.4.5"} {
		if _, err := loopbackURL(ok); err != nil {
			t.Errorf("loopbackURL(%q) = %v, want ok", ok, err)
		}
	}
	for _, bad := range []string{"http://10.0.0.1:8080", "http://example.com", "ftp://127.0.0.1", "127.0.0.1:8080", "http://0.0.0.0:8080", ""} {
		if _, err := loopbackURL(bad); err == nil {
			t.Errorf("loopbackURL(%q) accepted a non-loopback server", bad)
		}
	}
}

func TestPercentileNearestRank(t *testing.T) {
	t.Parallel()
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if got := pct(d, 50); got != 50*time.Millisecond {
		t.Errorf("p50 = %v, want 50ms", got)
	}
	if got := pct(d, 99); got != 99*time.Millisecond {
		t.Errorf("p99 = %v, want 99ms", got)
	}
	if got := pct([]time.Duration{7}, 99); got != 7 {
		t.Errorf("p99 of one = %v", got)
	}
	if got := pct(nil, 50); got != 0 {
		t.Errorf("p50 of none = %v", got)
	}
}

func TestParseFlagsBoundsLoad(t *testing.T) {
	t.Setenv("OPSGATE_TOKEN", "")
	if _, err := parseFlags([]string{}, discard{}); err == nil {
		t.Error("no token accepted")
	}
	if _, err := parseFlags([]string{"--token", "x", "--messages", "2000000"}, discard{}); err == nil {
		t.Error("unbounded message count accepted")
	}
	if _, err := parseFlags([]string{"--token", "x", "--decide-every", "-1ms"}, discard{}); err == nil {
		t.Error("negative --decide-every accepted")
	}
	if _, err := parseFlags([]string{"--token", "x", "--runs", "100", "--decide-every", "10s"}, discard{}); err == nil {
		t.Error("paced decisions longer than the timeout accepted")
	}
	if o, err := parseFlags([]string{"--token", "x", "--decide-every", "10ms"}, discard{}); err != nil || o.decideEvery != 10*time.Millisecond {
		t.Errorf("--decide-every 10ms = %v, %v", o.decideEvery, err)
	}
	o, err := parseFlags([]string{"--token", "x"}, discard{})
	if err != nil || o.messages != 5000 || o.concurrency != 32 || o.runs != 100 {
		t.Errorf("defaults = %+v, %v", o, err)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func TestReadSSE(t *testing.T) {
	t.Parallel()
	stream := ": ping\n\nid: 1\nevent: run.queued\ndata: {\"seq\":1}\n\n" +
		"id: 2\ndata: {\"type\":\"tool.started\"}\n\n" +
		"event: turn.finished\ndata: {}\n\n" +
		"event: never.sent\n" // no blank line: incomplete event
	var got []string
	if err := readSSE(strings.NewReader(stream), func(typ string) bool { got = append(got, typ); return true }); err != nil {
		t.Fatal(err)
	}
	if want := "run.queued,tool.started,turn.finished"; strings.Join(got, ",") != want {
		t.Errorf("events = %q, want %s", got, want)
	}
	got = nil
	_ = readSSE(strings.NewReader(stream), func(typ string) bool { got = append(got, typ); return false })
	if len(got) != 1 {
		t.Errorf("emit returning false did not stop: %q", got)
	}
}

// FuzzReadSSE: whatever a server sends, the parser neither panics nor
// emits an empty event type.
func FuzzReadSSE(f *testing.F) {
	f.Add("event: a\ndata: {}\n\n")
	f.Add("data: {\"type\":\"x\"}\n\n")
	f.Add("data: {\"type\":\n\n\n: c\nevent:\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		_ = readSSE(strings.NewReader(s), func(typ string) bool {
			if typ == "" {
				t.Fatal("empty event type emitted")
			}
			return true
		})
	})
}
