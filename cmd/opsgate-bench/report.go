package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core/redact"
)

// reportOptions say what `opsgate-bench report` measures: every store ×
// every pending-approval backlog × every number of decisions sent at once.
type reportOptions struct {
	out       string
	opsgate   string
	stores    []string
	pgAdmin   string
	decisions []int
	pending   []int
	samples   int
	minRounds int
	timeout   time.Duration
	command   string
}

// The report's bounds: a matrix this size runs for hours, not forever.
const (
	maxDecisions = 1000
	maxPending   = 1_000_000
	maxSamples   = 10_000
)

func parseReportFlags(args []string, stderr io.Writer) (reportOptions, error) {
	// The command goes into the report as typed, less a --postgres password.
	o := reportOptions{command: redact.Text("opsgate-bench report " + strings.Join(args, " "))}
	fs := flag.NewFlagSet("opsgate-bench report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var stores, decisions, pending string
	fs.StringVar(&o.out, "out", "", "directory to write report.svg, report.json and report.md into (created if missing)")
	fs.StringVar(&o.opsgate, "opsgate", "", "the opsgate binary to start (default: opsgate beside this binary, else on $PATH)")
	fs.StringVar(&stores, "stores", "sqlite,postgres", "stores to measure, comma-separated: sqlite, postgres")
	fs.StringVar(&o.pgAdmin, "postgres", "", "postgres:// URL of a loopback Postgres role that may CREATE DATABASE; "+
		"each server gets a fresh database, dropped afterwards (required when --stores has postgres)")
	fs.StringVar(&decisions, "decisions", "1,10,100", "numbers of decisions sent at once, comma-separated")
	fs.StringVar(&pending, "pending", "0,10000,100000", "pending approvals preloaded into the store before the server starts, comma-separated")
	fs.IntVar(&o.samples, "samples", 100, "decisions timed per cell at least: a cell of N at once runs ⌈samples/N⌉ rounds")
	fs.IntVar(&o.minRounds, "min-rounds", 3, "rounds per cell at least, so a burst of N at once is timed more than once")
	fs.DurationVar(&o.timeout, "timeout", time.Hour, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("report: unexpected arguments %q", fs.Args())
	}
	if o.out == "" {
		return o, errors.New("report: --out DIR is required")
	}
	var err error
	if o.decisions, err = intList("--decisions", decisions, 1, maxDecisions); err != nil {
		return o, err
	}
	if o.pending, err = intList("--pending", pending, 0, maxPending); err != nil {
		return o, err
	}
	if o.samples < 1 || o.samples > maxSamples {
		return o, fmt.Errorf("report: --samples %d: want 1..%d", o.samples, maxSamples)
	}
	if o.minRounds < 1 || o.minRounds > maxSamples {
		return o, fmt.Errorf("report: --min-rounds %d: want 1..%d", o.minRounds, maxSamples)
	}
	for s := range strings.SplitSeq(stores, ",") {
		s = strings.TrimSpace(s)
		if s != "sqlite" && s != "postgres" {
			return o, fmt.Errorf("report: --stores: %q is not sqlite or postgres", s)
		}
		if slices.Contains(o.stores, s) {
			return o, fmt.Errorf("report: --stores: %s twice", s)
		}
		o.stores = append(o.stores, s)
	}
	if slices.Contains(o.stores, "postgres") {
		if o.pgAdmin == "" {
			return o, errors.New("report: --stores has postgres: pass --postgres with an admin URL (postgres://…)")
		}
		if err := loopbackDSN(o.pgAdmin); err != nil {
			return o, err
		}
	}
	return o, nil
}

// intList parses "1,10,100": distinct integers in [lo, hi], kept in order.
func intList(flagName, s string, lo, hi int) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("report: %s: %q is not an integer in %d..%d", flagName, f, lo, hi)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("report: %s: %d twice", flagName, n)
		}
		out = append(out, n)
	}
	return out, nil
}

// loopbackDSN refuses a Postgres server that is not on this machine: the
// report creates databases and loads them.
func loopbackDSN(dsn string) error {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return errors.New("report: --postgres: want a postgres:// URL")
	}
	host := u.Hostname()
	if host == "" {
		return errors.New("report: --postgres: the URL names no host; give 127.0.0.1")
	}
	if _, err := loopbackURL("http://" + u.Host); err != nil {
		return fmt.Errorf("report: --postgres: %s is not a loopback address", host)
	}
	return nil
}

// runReport is `opsgate-bench report`.
func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseReportFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.opsgate, err = findOpsgate(o.opsgate); err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep, err := measureMatrix(ctx, o, stdout)
	if err != nil {
		return err
	}
	if err := writeReport(o.out, rep); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "report: wrote %s\n", strings.Join([]string{
		filepath.Join(o.out, "report.svg"), filepath.Join(o.out, "report.json"), filepath.Join(o.out, "report.md")}, ", "))
	return nil
}

// findOpsgate resolves the server binary: the flag, else opsgate next to
// this executable (how issue-figures.sh and run.sh lay them out), else $PATH.
func findOpsgate(flagValue string) (string, error) {
	if flagValue != "" {
		return filepath.Abs(flagValue)
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "opsgate")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("opsgate")
	if err != nil {
		return "", errors.New("report: no opsgate binary: pass --opsgate (go build -o /tmp/opsgate ./cmd/opsgate)")
	}
	return filepath.Abs(p)
}

// measureMatrix runs the matrix. It starts one server per store and
// backlog, all side by side, then interleaves their rounds (A, B, C, A, B,
// C…), so a change in the machine's load lands on every cell of a row alike
// and the ratios between cells hold even when the absolute figures do not.
func measureMatrix(ctx context.Context, o reportOptions, stdout io.Writer) (*report, error) {
	rep := &report{
		Command: o.command, Started: time.Now().UTC(), SamplesPerCell: o.samples,
		Host:   hostInfo{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadStart: loadAvg()},
		Stores: o.stores, Decisions: o.decisions, Pending: o.pending,
	}
	fmt.Fprintf(stdout, "report: %s; load average %s\n", o.command, rep.Host.LoadStart)
	type target struct {
		store   string
		pending int
		c       *client
	}
	var targets []target
	for _, pending := range o.pending {
		for _, store := range o.stores {
			dir, err := os.MkdirTemp("", "opsgate-report-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			dsn, drop, err := storeDSN(ctx, store, o.pgAdmin, dir)
			if err != nil {
				return nil, err
			}
			defer drop()
			t0 := time.Now()
			s, preloaded, err := startServer(ctx, o.opsgate, store, dsn, dir, pending)
			if err != nil {
				return nil, err
			}
			defer s.stop()
			c := newClient(s.base, s.token, 2*slices.Max(o.decisions)+8)
			st := storeStart{Store: store, Pending: pending, PreloadSeconds: preloaded.Seconds(),
				ReadySeconds: time.Since(t0).Seconds(), Load: loadAvg()}
			rep.Starts = append(rep.Starts, st)
			fmt.Fprintf(stdout, "report: %s with %d pending approvals: preloaded in %.1fs, ready in %.1fs (load %s)\n",
				store, pending, st.PreloadSeconds, st.ReadySeconds, st.Load)
			// One untimed decision first: the first exec of the tool and
			// the first statements of each kind are not what a cell measures.
			if _, err := decideDispatch(ctx, c, roundOptions(1), "warmup-"+randHex(4)); err != nil {
				return nil, fmt.Errorf("%s, %d pending, warm-up: %w", store, pending, err)
			}
			targets = append(targets, target{store: store, pending: pending, c: c})
		}
	}
	for _, n := range o.decisions {
		rounds := max(o.minRounds, (o.samples+n-1)/n)
		acc := make([]decisionResult, len(targets))
		spent := make([]time.Duration, len(targets))
		before := loadAvg()
		for r := range rounds {
			for i, t := range targets {
				t0 := time.Now()
				res, err := decideDispatch(ctx, t.c, roundOptions(n), fmt.Sprintf("r%s-%d", randHex(4), r))
				if err != nil {
					return nil, fmt.Errorf("%s, %d pending, %d at once, round %d: %w", t.store, t.pending, n, r+1, err)
				}
				spent[i] += time.Since(t0)
				acc[i].sse = append(acc[i].sse, res.sse...)
				acc[i].started = append(acc[i].started, res.started...)
				acc[i].post = append(acc[i].post, res.post...)
			}
		}
		after := loadAvg()
		for i, t := range targets {
			c := cell{Store: t.store, Pending: t.pending, Decisions: n, Rounds: rounds, Samples: len(acc[i].sse),
				ToolStarted: summarize(acc[i].sse), StepStarted: summarize(acc[i].started), DecisionPOST: summarize(acc[i].post),
				LoadBefore: before, LoadAfter: after, Seconds: spent[i].Seconds()}
			rep.Cells = append(rep.Cells, c)
			fmt.Fprintf(stdout, "report: %-8s %7d pending, %4d at once × %3d: tool.started p50 %7.1fms p99 %7.1fms (load %s)\n",
				t.store, t.pending, n, rounds, c.ToolStarted.P50, c.ToolStarted.P99, after)
		}
	}
	// What holding the backlog costs in memory, after the matrix.
	for i, t := range targets {
		rss, err := serverRSS(ctx, t.c)
		if err != nil {
			return nil, fmt.Errorf("%s, %d pending: read RSS: %w", t.store, t.pending, err)
		}
		rep.Starts[i].RSSMiB = rss / (1 << 20)
	}
	// Read by store, then backlog, then decisions, in the flags' order.
	slices.SortStableFunc(rep.Cells, func(a, b cell) int {
		return cmp.Or(cmp.Compare(slices.Index(o.stores, a.Store), slices.Index(o.stores, b.Store)),
			cmp.Compare(slices.Index(o.pending, a.Pending), slices.Index(o.pending, b.Pending)))
	})
	rep.Finished = time.Now().UTC()
	rep.Host.LoadEnd = loadAvg()
	return rep, nil
}

// roundOptions are the decision phase's options for one round of n
// decisions sent at once to bench.yaml's ask flow.
func roundOptions(n int) options {
	return options{runs: n, concurrency: min(n, 32), askFlow: "bench"}
}

func summarize(d []time.Duration) latency {
	return latency{P50: msFloat(pct(d, 50)), P99: msFloat(pct(d, 99))}
}

func msFloat(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// loadAvg is /proc/loadavg's three load averages ("" where there is none):
// every figure is printed beside the load it was taken under.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
