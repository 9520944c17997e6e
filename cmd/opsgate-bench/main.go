// Command opsgate-bench measures a RUNNING opsgate server over its HTTP API,
// on loopback only, with a bounded load, and prints:
//
//   - messages/s durably ingested: N console messages to N distinct
//     threads from C concurrent clients; POST /api/v1/messages returns only
//     after the event and its run are committed, so the rate is durable
//     throughput;
//   - approval decision → tool dispatch latency p50/p99 with R runs
//     waiting at once: start R runs of a flow whose tool asks, wait until
//     all are pending, decide all concurrently and time each from sending
//     the decision to its tool.started event (seen on the run's SSE stream,
//     and from the step's started_at recorded by the server);
//   - end-to-end run latency p50/p99: message → run final, for a flow whose
//     tool is allowed;
//   - the server's resident memory, from /metrics.
//
// Subcommands measure other things:
//
//   - opsgate-bench slack: signed Slack app_mention events (Slack's
//     X-Slack-Signature and X-Slack-Request-Timestamp) into POST
//     /slack/events, each in its own channel, against a Slack Web API fake
//     this command serves on loopback (the server's channels.slack.api_url
//     points at it): acked events/s, full-path replies/s (reply posted at
//     the fake) with latency percentiles, RSS after; with --rate and
//     --duration a sustained load printing p99 and RSS every --interval;
//   - opsgate-bench preload: fills a migrated store (SQLite or Postgres)
//     with finished runs and pending approvals before the server starts;
//   - opsgate-bench report: starts servers itself (SQLite, and Postgres on
//     a loopback server it is given), preloads pending approvals, times
//     decision → tool.started with 1, 10 and 100 decisions at once and
//     writes report.svg, report.json and report.md.
//
// It is a measuring tool, not a load generator for arbitrary hosts: it
// refuses servers that are not on a loopback address. Use
// cmd/opsgate-bench/run.sh to build, start a server with bench.yaml, run
// this and stop the server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "opsgate-bench: %v\n", err)
		os.Exit(1)
	}
}

// options are the bench's knobs; every loop they drive is bounded by them.
type options struct {
	server      string
	token       string
	messages    int
	concurrency int
	runs        int
	decideEvery time.Duration
	e2eRuns     int
	askFlow     string
	pingFlow    string
	ingestText  string
	timeout     time.Duration
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("opsgate-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.server, "server", "http://127.0.0.1:8080", "base URL of a running opsgate server (loopback only)")
	fs.StringVar(&o.token, "token", "", "API bearer token (default $OPSGATE_TOKEN); its actor must be an approver of --ask-flow's tool")
	fs.IntVar(&o.messages, "messages", 5000, "messages to ingest, each to its own thread")
	fs.IntVar(&o.concurrency, "concurrency", 32, "concurrent clients for ingestion and end-to-end runs")
	fs.IntVar(&o.runs, "runs", 100, "runs waiting for approval at once in the decision → dispatch phase")
	fs.DurationVar(&o.decideEvery, "decide-every", 0, "send the decisions one every this long instead of all at once "+
		"(e.g. 10ms: all --runs still wait at once, but each decision is timed without queueing behind the others)")
	fs.IntVar(&o.e2eRuns, "e2e-runs", 200, "runs of --ping-flow timed end to end")
	fs.StringVar(&o.askFlow, "ask-flow", "bench", "flow whose single tool asks for approval; its command is its name")
	fs.StringVar(&o.pingFlow, "ping-flow", "ping", "flow whose single tool is allowed; its command is its name (also the ingested message)")
	fs.StringVar(&o.ingestText, "ingest-text", "", "text of the ingested messages (default: --ping-flow, so each starts a run; "+
		"a text matching no flow measures recording alone: the event and a help reply)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.ingestText == "" {
		o.ingestText = o.pingFlow
	}
	if o.token == "" {
		o.token = os.Getenv("OPSGATE_TOKEN")
	}
	if o.token == "" {
		return o, errors.New("no token: pass --token or set $OPSGATE_TOKEN")
	}
	if o.messages < 0 || o.runs < 0 || o.e2eRuns < 0 || o.concurrency < 1 || o.decideEvery < 0 {
		return o, errors.New("--messages, --runs, --e2e-runs and --decide-every must be ≥ 0 and --concurrency ≥ 1")
	}
	if time.Duration(o.runs)*o.decideEvery > o.timeout/2 {
		return o, errors.New("--runs × --decide-every must fit in half of --timeout")
	}
	const maxLoad = 1_000_000
	if o.messages > maxLoad || o.runs > 10_000 || o.e2eRuns > maxLoad || o.concurrency > 1024 {
		return o, errors.New("load out of bounds (messages, e2e-runs ≤ 1e6; runs ≤ 10000; concurrency ≤ 1024)")
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "preload":
			return runPreload(ctx, args[1:], stdout, stderr)
		case "slack":
			return runSlack(ctx, args[1:], stdout, stderr)
		case "report":
			return runReport(ctx, args[1:], stdout, stderr)
		}
	}
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	base, err := loopbackURL(o.server)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	c := newClient(base, o.token, o.concurrency+o.runs)
	if err := c.get(ctx, "/api/v1/runs?limit=1", nil); err != nil {
		return fmt.Errorf("cannot use the server at %s: %w", base, err)
	}
	nonce := fmt.Sprintf("%x", time.Now().UnixNano())
	fmt.Fprintf(stdout, "opsgate-bench against %s (nonce %s)\n", base, nonce)

	if o.messages > 0 {
		res, err := ingest(ctx, c, o, nonce)
		if err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
		fmt.Fprintf(stdout, "ingest:    %d messages %q, %d clients: %.0f messages/s durably ingested (%.2fs; POST p50 %s p99 %s)\n",
			o.messages, o.ingestText, o.concurrency, float64(o.messages)/res.elapsed.Seconds(), res.elapsed.Seconds(),
			ms(pct(res.lat, 50)), ms(pct(res.lat, 99)))
		drained, err := waitDrained(ctx, c)
		if err != nil {
			return fmt.Errorf("wait for the ingested runs to finish: %w", err)
		}
		if o.ingestText == o.pingFlow {
			fmt.Fprintf(stdout, "drain:     the %d ingested runs finished %.2fs after the last message (%.0f runs/s overall)\n",
				o.messages, drained.Seconds(), float64(o.messages)/(res.elapsed+drained).Seconds())
		}
	}
	if o.runs > 0 {
		res, err := decideDispatch(ctx, c, o, nonce)
		if err != nil {
			return fmt.Errorf("decision → dispatch: %w", err)
		}
		how := "decided concurrently"
		if o.decideEvery > 0 {
			how = fmt.Sprintf("decided one every %s", o.decideEvery)
		}
		fmt.Fprintf(stdout, "decision:  %d runs pending at once, %s: decision → tool.started p50 %s p99 %s (SSE); "+
			"decision sent → step started_at p50 %s p99 %s; decision POST p50 %s p99 %s\n",
			o.runs, how, ms(pct(res.sse, 50)), ms(pct(res.sse, 99)), ms(pct(res.started, 50)), ms(pct(res.started, 99)),
			ms(pct(res.post, 50)), ms(pct(res.post, 99)))
	}
	if o.e2eRuns > 0 {
		lat, err := endToEnd(ctx, c, o, nonce)
		if err != nil {
			return fmt.Errorf("end to end: %w", err)
		}
		fmt.Fprintf(stdout, "e2e:       %d runs of %q, %d clients: message → run final p50 %s p99 %s\n",
			o.e2eRuns, o.pingFlow, o.concurrency, ms(pct(lat, 50)), ms(pct(lat, 99)))
	}
	rss, err := serverRSS(ctx, c)
	if err != nil {
		return fmt.Errorf("read server RSS: %w", err)
	}
	fmt.Fprintf(stdout, "rss:       %.1f MiB (process_resident_memory_bytes)\n", rss/(1<<20))
	return nil
}

// loopbackURL parses the server URL and refuses anything that is not on this
// machine: the bench generates real load and must not be aimed elsewhere.
func loopbackURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want a URL like http://127.0.0.1:8080", raw)
	}
	// Only literal loopback addresses and "localhost": resolving other
	// names would let DNS decide where the load goes.
	host := u.Hostname()
	if host == "localhost" {
		return u, nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("--server %q: %s is not a loopback address (127.0.0.0/8, ::1, localhost); opsgate-bench only measures a server on this machine", raw, host)
	}
	return u, nil
}

// pct returns the p-th percentile (nearest rank) of d, sorting it in place.
func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	rank := int(float64(len(d))*p/100+0.999999999) - 1
	rank = max(0, min(rank, len(d)-1))
	return d[rank]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

// get is a small helper for callers that only need a status check.
func (c *client) get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, nil, out)
}
