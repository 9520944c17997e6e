package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/internal/fakellm"
	"github.com/opsgate/opsgate/store/pgtest"
)

// BenchmarkAgentAPIEventLatency: 32 sessions of one token (agent_concurrency
// 32) run turns at once against a zero-latency in-process model; each turn
// calls an allowed tool twice, then answers. One op is one turn. Reported:
// the latency of every stored event (turn.started, tool.started,
// tool.finished, message.committed, turn.finished) from the moment the
// engine made it (its At, before the commit) to the moment the SSE client
// read it — commit, wake-up, store read, translation, write, parse.
//
//	go test -run '^$' -bench AgentAPIEventLatency -benchtime 400x ./cmd/opsgate/
func BenchmarkAgentAPIEventLatency(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		for _, n := range []int{32, 1} { // 1: the same path without contention, for scale
			b.Run(fmt.Sprintf("%s/sessions=%d", kind, n), func(b *testing.B) { benchEventLatency(b, kind, n) })
		}
	}
}

func benchEventLatency(b *testing.B, kind string, benchSessions int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := b.TempDir()
	storeYAML := fmt.Sprintf("store:\n  driver: sqlite\n  dsn: %s\n", filepath.Join(dir, "og.db"))
	if kind == "postgres" {
		storeYAML = fmt.Sprintf("store:\n  driver: postgres\n  dsn: %q\n", pgtest.DSN(b))
	}
	src := fmt.Sprintf("server:\n  data_dir: %s\n%s", dir, storeYAML) + `
engine: {concurrency: 64}
api:
  tokens:
    - {name: app, token: bench-token, actor: "console:alice", scopes: [read, session.run], agent_concurrency: 32}
models:
  - {name: default, provider: openai, base_url: "http://127.0.0.1:1/v1", model: fake}
agents:
  - {name: ops, model: default, tools: [status], max_steps: 100, default: true}
tools:
  - name: status
    risk: read
    exec: {command: [echo, ok]}
policy:
  rules:
    - {match: {tool: status}, action: allow}
`
	cfg, err := config.Loader{LookupEnv: func(string) (string, bool) { return "", false }}.Parse("bench.yaml", []byte(src))
	if err != nil {
		b.Fatal(err)
	}
	st, err := openStoreWith(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	o, err := engineOptions(cfg)
	if err != nil {
		b.Fatal(err)
	}
	model := fakellm.Looping(llm.ToolCall{Name: "status", Arguments: `{"reason":"bench"}`}, 2, "done")
	o.Agents = []engine.Agent{{Name: "ops", ModelName: "default", Model: model, Tools: []string{"status"}, MaxSteps: 100, Default: true}}
	o.Store, o.Logger = st, slog.New(slog.DiscardHandler)
	eng, err := engine.New(o)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = eng.Run(ctx) }()
	h, err := api.New(api.Options{Engine: eng, Store: st, Tokens: apiTokens(cfg), Logger: slog.New(slog.DiscardHandler),
		Agent: agentAPIOptions(cfg, eng, st, api.NewAttendance())})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchSessions * 2}}

	var mu sync.Mutex
	var lat []time.Duration
	byType := map[string][]time.Duration{}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range benchSessions {
		wg.Go(func() {
			sid := ""
			for next.Add(1) <= int64(b.N) {
				got, turn, err := benchTurn(client, srv.URL, sid)
				if err != nil {
					b.Error(err)
					return
				}
				sid = turn.session
				d, err := matchLatency(ctx, st, turn.id, got)
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				for _, x := range d {
					lat = append(lat, x.d)
					byType[x.name] = append(byType[x.name], x.d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) == 0 {
		b.Fatal("no events")
	}
	q := func(lat []time.Duration, p float64) float64 {
		return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Microseconds()) / 1000
	}
	b.ReportMetric(q(lat, 0.50), "p50-ms")
	b.ReportMetric(q(lat, 0.99), "p99-ms")
	for name, d := range byType {
		slices.Sort(d)
		b.Logf("%s: p50 %.2f ms, p99 %.2f ms (%d events)", name, q(d, 0.5), q(d, 0.99), len(d))
	}
	b.ReportMetric(float64(len(lat))/float64(b.N), "events/turn")
}

type benchGot struct {
	name string
	at   time.Time
}

type benchTurnID struct{ id, session string }

// benchTurn runs one streamed turn and returns when each event arrived.
func benchTurn(c *http.Client, url, session string) ([]benchGot, benchTurnID, error) {
	body, _ := json.Marshal(map[string]any{"text": "bench", "sessionId": session})
	req, _ := http.NewRequest("POST", url+"/api/v1/agent/runs", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer bench-token")
	req.Header.Set("Accept", "text/event-stream")
	res, err := c.Do(req)
	if err != nil {
		return nil, benchTurnID{}, err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		return nil, benchTurnID{}, fmt.Errorf("status %d: %s", res.StatusCode, b)
	}
	var got []benchGot
	var id benchTurnID
	sc := bufio.NewScanner(res.Body)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			name = v
			got = append(got, benchGot{name: v, at: time.Now()})
			continue
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok && name == core.EventTurnFinished {
			var r api.TurnResult
			if err := json.Unmarshal([]byte(v), &r); err != nil {
				return nil, id, err
			}
			if r.Status != api.TurnFinished {
				return nil, id, fmt.Errorf("turn %s: %s %+v", r.TurnID, r.Status, r.Error)
			}
			id = benchTurnID{id: r.TurnID, session: r.SessionID}
		}
	}
	return got, id, sc.Err()
}

// matchLatency pairs the received events with the stored ones of the same
// type, in order, and returns receive time minus the engine's At.
type benchLat struct {
	name string
	d    time.Duration
}

func matchLatency(ctx context.Context, st store, turnID string, got []benchGot) ([]benchLat, error) {
	evs, err := st.RunEventList(ctx, turnID, 0, 1000)
	if err != nil {
		return nil, err
	}
	stored := map[string][]time.Time{}
	for _, ev := range evs {
		stored[ev.Type] = append(stored[ev.Type], ev.At)
	}
	var out []benchLat
	seen := map[string]int{}
	for _, g := range got {
		switch g.name {
		case core.EventTurnStarted, core.EventToolStarted, core.EventToolFinished, core.EventMessageCommitted, core.EventTurnFinished:
		default:
			continue
		}
		i := seen[g.name]
		seen[g.name]++
		if i < len(stored[g.name]) {
			out = append(out, benchLat{g.name, g.at.Sub(stored[g.name][i])})
		}
	}
	return out, nil
}
