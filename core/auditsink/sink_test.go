package auditsink

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	syslog "github.com/leodido/go-syslog/v4"
	"github.com/leodido/go-syslog/v4/octetcounting"
	"github.com/leodido/go-syslog/v4/rfc5424"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/internal/testkit"
	"github.com/opsgate/opsgate/store/sqlite"
)

// The sinks run against a real SQLite store (its audit chain, cursor
// state and leases) and real counterparts on loopback: syslog listeners
// that parse RFC 5424 with go-syslog's parser, and HTTP servers.

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := testkit.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "opsgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// appender is the store side the tests write the chain through.
type appender interface {
	AuditAppend(ctx context.Context, entries []approvals.AuditEntry) error
	AuditList(ctx context.Context, p approvals.AuditListParams) ([]approvals.AuditEntry, error)
}

// appendEntries appends n audit entries, one transaction each.
func appendEntries(t *testing.T, st appender, n int, kind approvals.AuditKind) {
	t.Helper()
	for i := range n {
		e := approvals.AuditEntry{At: time.Now(), Kind: kind, Actor: "console:alice", Tool: "deploy",
			Detail: json.RawMessage(fmt.Sprintf(`{"i":%d,"text":"it's \"quoted\" ünïcode"}`, i))}
		if err := st.AuditAppend(context.Background(), []approvals.AuditEntry{e}); err != nil {
			t.Fatal(err)
		}
	}
}

func head(t *testing.T, st appender) int64 {
	t.Helper()
	es, err := st.AuditList(context.Background(), approvals.AuditListParams{Newest: true, Limit: 1})
	if err != nil || len(es) == 0 {
		t.Fatalf("audit head: %v %v", es, err)
	}
	return es[0].Seq
}

func quietOpts(st Store, owner string, reg prometheus.Registerer) Options {
	return Options{Store: st, Owner: owner, Registerer: reg, Poll: 10 * time.Millisecond, Lease: 2 * time.Second,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, Batch: 7,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// start runs sinks until the test ends (or stop is called).
func start(t *testing.T, cfgs []Config, o Options) (s *Sinks, stop func()) {
	t.Helper()
	s, err := New(cfgs, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return s, stop
}

// received collects the seqs a counterpart got, in arrival order, and
// wakes waiters.
type received struct {
	mu   sync.Mutex
	seqs []int64
	wake chan struct{}
}

func newReceived() *received { return &received{wake: make(chan struct{}, 1)} }

func (r *received) add(seq int64) {
	r.mu.Lock()
	r.seqs = append(r.seqs, seq)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *received) snapshot() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.seqs...)
}

// waitFor waits until seq upTo has arrived, bounded.
func (r *received) waitFor(t *testing.T, upTo int64) []int64 {
	t.Helper()
	deadline := time.After(hang)
	for {
		got := r.snapshot()
		if len(got) > 0 && got[len(got)-1] >= upTo {
			return got
		}
		select {
		case <-r.wake:
		case <-deadline:
			t.Fatalf("timed out waiting for seq %d; got %v", upTo, got)
		}
	}
}

// waitPosition waits (bounded) until the sink has recorded seq as
// delivered: the counterpart seeing an entry comes before the sink hearing
// its answer.
func waitPosition(t *testing.T, s *Sinks, seq int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the sink's position at %d", seq), func() bool {
		return testutil.ToFloat64(s.sinks[0].m.position) >= float64(seq)
	})
}

// hang bounds every wait: far beyond a loaded machine's slowest step, so
// it only ends a test that would otherwise hang.
const hang = 2 * time.Minute

// waitFor polls cond until it holds, failing the test after hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", hang, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// inOrderOnce asserts got is exactly 1..upTo, each once, in order.
func inOrderOnce(t *testing.T, got []int64, from, upTo int64) {
	t.Helper()
	if int64(len(got)) != upTo-from+1 {
		t.Fatalf("got %d entries %v, want %d..%d once each", len(got), got, from, upTo)
	}
	for i, s := range got {
		if s != from+int64(i) {
			t.Fatalf("entry %d is seq %d, want %d (got %v)", i, s, from+int64(i), got)
		}
	}
}

// parseEntry checks one RFC 5424 message and returns its entry.
func parseEntry(t *testing.T, m syslog.Message) approvals.AuditEntry {
	t.Helper()
	sm, ok := m.(*rfc5424.SyslogMessage)
	if !ok || !sm.Valid() || sm.Message == nil || sm.Appname == nil || *sm.Appname != "opsgate" || sm.Facility == nil || *sm.Facility != facilityLogAudit {
		t.Errorf("not an opsgate RFC 5424 message: %+v", m)
		return approvals.AuditEntry{}
	}
	var e approvals.AuditEntry
	if err := json.Unmarshal([]byte(*sm.Message), &e); err != nil {
		t.Errorf("MSG is not an audit entry: %v: %q", err, *sm.Message)
	}
	if sm.MsgID == nil || *sm.MsgID != string(e.Kind) {
		t.Errorf("MSGID %v, want %s", sm.MsgID, e.Kind)
	}
	if wantSev := uint8(severityNotice); e.Kind == approvals.AuditApprovalRefused {
		if *sm.Severity != severityWarning {
			t.Errorf("a refusal has severity %d, want warning", *sm.Severity)
		}
	} else if *sm.Severity != wantSev {
		t.Errorf("severity %d, want notice", *sm.Severity)
	}
	if sm.Timestamp == nil || !sm.Timestamp.Equal(e.At) {
		t.Errorf("timestamp %v, entry at %v", sm.Timestamp, e.At)
	}
	return e
}

func TestSyslogUDP(t *testing.T) {
	st := openStore(t)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	got := newReceived()
	var kinds sync.Map
	go func() {
		p := rfc5424.NewParser()
		buf := make([]byte, 70000)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			m, err := p.Parse(buf[:n])
			if err != nil {
				t.Errorf("not RFC 5424: %v: %q", err, buf[:n])
				continue
			}
			e := parseEntry(t, m)
			kinds.Store(e.Seq, e.Kind)
			got.add(e.Seq)
		}
	}()
	appendEntries(t, st, 5, approvals.AuditApprovalDecided)
	appendEntries(t, st, 2, approvals.AuditApprovalRefused)
	start(t, []Config{{Name: "udp", Type: TypeSyslog, Addr: "udp://" + pc.LocalAddr().String()}}, quietOpts(st, "r1", nil))
	// UDP on loopback does not reorder or drop at this rate.
	inOrderOnce(t, got.waitFor(t, head(t, st)), 1, head(t, st))
	if k, _ := kinds.Load(head(t, st)); k != approvals.AuditApprovalRefused {
		t.Errorf("last entry kind %v", k)
	}
}

func TestSyslogTCPOctetCounting(t *testing.T) {
	st := openStore(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := newReceived()
	conns := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			go octetcounting.NewParser(syslog.WithListener(func(r *syslog.Result) {
				if r.Error != nil {
					t.Errorf("frame: %v", r.Error)
					return
				}
				got.add(parseEntry(t, r.Message).Seq)
			})).Parse(bufio.NewReader(c))
		}
	}()
	appendEntries(t, st, 20, approvals.AuditApprovalDecided)
	start(t, []Config{{Name: "tcp", Type: TypeSyslog, Addr: "tcp://" + ln.Addr().String()}}, quietOpts(st, "r1", nil))
	inOrderOnce(t, got.waitFor(t, 20), 1, 20)

	// The receiver drops the connection: the sink dials again and goes on.
	(<-conns).Close()
	appendEntries(t, st, 3, approvals.AuditApprovalDecided)
	seqs := got.waitFor(t, 23)
	// Entries written into the dropped connection may be lost or sent
	// twice (syslog has no acknowledgement); order holds for what arrives.
	for i := 1; i < len(seqs); i++ {
		if seqs[i] < seqs[i-1] && seqs[i] < 21 {
			t.Fatalf("out of order: %v", seqs)
		}
	}
}

// httpSink is an HTTP counterpart: it fails the first failures requests
// with status, refuses (400) any batch holding a seq in poison, and
// records what it accepted.
type httpSink struct {
	mu       sync.Mutex
	failures int
	status   int
	poison   map[int64]bool
	got      *received
	requests int
	header   http.Header
}

func (h *httpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var seqs []int64
	sc := bufio.NewScanner(r.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e approvals.AuditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Seq == 0 || e.Hash == "" {
			http.Error(w, "bad line", http.StatusBadRequest)
			return
		}
		seqs = append(seqs, e.Seq)
	}
	h.mu.Lock()
	h.requests++
	h.header = r.Header.Clone()
	if h.failures > 0 {
		h.failures--
		h.mu.Unlock()
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(h.status)
		return
	}
	for _, s := range seqs {
		if h.poison[s] {
			h.mu.Unlock()
			http.Error(w, "refused", http.StatusBadRequest)
			return
		}
	}
	h.mu.Unlock()
	if r.Header.Get("Content-Type") != "application/x-ndjson" {
		http.Error(w, "content type", http.StatusUnsupportedMediaType)
		return
	}
	for _, s := range seqs {
		h.got.add(s)
	}
	w.WriteHeader(http.StatusNoContent)
}

func TestHTTPFailsThenRecoversInOrder(t *testing.T) {
	st := openStore(t)
	h := &httpSink{failures: 4, status: http.StatusServiceUnavailable, got: newReceived()}
	srv := httptest.NewServer(h)
	defer srv.Close()
	appendEntries(t, st, 30, approvals.AuditApprovalDecided)
	reg := prometheus.NewRegistry()
	s, _ := start(t, []Config{{Name: "siem", Type: TypeHTTP, URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer t0k"}}},
		quietOpts(st, "r1", reg))
	inOrderOnce(t, h.got.waitFor(t, 30), 1, 30)
	waitPosition(t, s, 30)
	k := s.sinks[0]
	if r := testutil.ToFloat64(k.m.retries); r != 4 {
		t.Errorf("retries %v, want 4", r)
	}
	if d := testutil.ToFloat64(k.m.delivered); d != 30 {
		t.Errorf("delivered %v, want 30", d)
	}
	if p := testutil.ToFloat64(k.m.position); p != 30 {
		t.Errorf("position %v, want 30", p)
	}
	h.mu.Lock()
	auth := h.header.Get("Authorization")
	h.mu.Unlock()
	if auth != "Bearer t0k" {
		t.Errorf("Authorization %q", auth)
	}
	// /metrics names them.
	n, err := testutil.GatherAndCount(reg, metricDelivered, metricRetries, metricDead, metricPosition)
	if err != nil || n != 4 {
		t.Errorf("gathered %d series (%v), want 4", n, err)
	}
}

func TestHTTPRestartResumesFromCursor(t *testing.T) {
	st := openStore(t)
	h := &httpSink{got: newReceived()}
	srv := httptest.NewServer(h)
	defer srv.Close()
	cfg := []Config{{Name: "siem", Type: TypeHTTP, URL: srv.URL}}
	appendEntries(t, st, 12, approvals.AuditApprovalDecided)
	s, stop := start(t, cfg, quietOpts(st, "r1", nil))
	inOrderOnce(t, h.got.waitFor(t, 12), 1, 12)
	waitPosition(t, s, 12)
	stop()
	if b, err := st.StateGet(context.Background(), CursorKey("siem")); err != nil || string(b) != "12" {
		t.Fatalf("cursor after the first run: %q %v", b, err)
	}
	// While stopped, more entries; a new process (another owner) resumes.
	appendEntries(t, st, 9, approvals.AuditApprovalDecided)
	start(t, cfg, quietOpts(st, "r2", nil))
	inOrderOnce(t, h.got.waitFor(t, 21), 1, 21)
}

func TestHTTPDeadLetterSkippedAndCounted(t *testing.T) {
	st := openStore(t)
	h := &httpSink{got: newReceived(), poison: map[int64]bool{9: true}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	appendEntries(t, st, 20, approvals.AuditApprovalDecided)
	s, _ := start(t, []Config{{Name: "siem", Type: TypeHTTP, URL: srv.URL}}, quietOpts(st, "r1", nil))
	got := h.got.waitFor(t, 20)
	waitPosition(t, s, 20)
	want := []int64{}
	for i := int64(1); i <= 20; i++ {
		if i != 9 {
			want = append(want, i)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	if d := testutil.ToFloat64(s.sinks[0].m.dead); d != 1 {
		t.Errorf("dead letters %v, want 1", d)
	}
	if r := testutil.ToFloat64(s.sinks[0].m.retries); r != 0 {
		t.Errorf("a permanent refusal was counted as %v retries", r)
	}
}

func TestTwoReplicasOneDelivers(t *testing.T) {
	st := openStore(t)
	h := &httpSink{got: newReceived()}
	srv := httptest.NewServer(h)
	defer srv.Close()
	cfg := []Config{{Name: "siem", Type: TypeHTTP, URL: srv.URL}}
	start(t, cfg, quietOpts(st, "r1", nil))
	start(t, cfg, quietOpts(st, "r2", nil))
	for range 5 {
		appendEntries(t, st, 8, approvals.AuditApprovalDecided)
	}
	inOrderOnce(t, h.got.waitFor(t, 40), 1, 40)
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string // "" valid, else a field in the error
	}{
		{Config{Name: "a", Type: TypeSyslog, Addr: "udp://127.0.0.1:514"}, ""},
		{Config{Name: "a", Type: TypeSyslog, Addr: "tcp://syslog.example.com:6514"}, ""},
		{Config{Name: "a", Type: TypeSyslog, Addr: "unix:///dev/log"}, ""},
		{Config{Name: "a", Type: TypeHTTP, URL: "https://siem.example.com/ingest", Headers: map[string]string{"Authorization": "Bearer x"}}, ""},
		{Config{Name: "a", Type: TypeSyslog, Addr: "127.0.0.1:514"}, "addr"},
		{Config{Name: "a", Type: TypeSyslog, Addr: "udp://127.0.0.1"}, "addr"},
		{Config{Name: "a", Type: TypeSyslog, Addr: "unix://relative"}, "addr"},
		{Config{Name: "a", Type: TypeSyslog, Addr: "udp://h:1", URL: "https://x"}, "url"},
		{Config{Name: "a", Type: TypeHTTP, URL: "ftp://x"}, "url"},
		{Config{Name: "a", Type: TypeHTTP}, "url"},
		{Config{Name: "a", Type: TypeHTTP, URL: "https://x", Headers: map[string]string{"Bad Header": "x"}}, "headers"},
		{Config{Name: "a", Type: TypeHTTP, URL: "https://x", Headers: map[string]string{"X-A": "a\r\nb"}}, "headers"},
		{Config{Name: "a", Type: TypeHTTP, URL: "https://x", Headers: map[string]string{"content-type": "text/plain"}}, "headers"},
		{Config{Name: "a", Type: "kafka"}, "type"},
		{Config{Type: TypeHTTP, URL: "https://x"}, "name"},
	} {
		err := c.cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.cfg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want+":")):
			t.Errorf("%+v: got %v, want a problem with %s", c.cfg, err, c.want)
		}
	}
}
