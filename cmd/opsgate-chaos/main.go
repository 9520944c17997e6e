// Command opsgate-chaos kills opsgate with SIGKILL, again and again, under a
// mixed workload, and then checks that nothing was lost and nothing done
// twice.
//
// It builds (or takes, --opsgate) the opsgate binary, starts one fake
// platform on loopback — the Telegram Bot API opsgate sends to, and the
// HTTP endpoint its tools call, which logs every dispatch — and runs
// `opsgate serve` on SQLite or Postgres with Telegram in webhook mode.
// The workload: --requests chat messages, each in its own chat, posted to
// the webhook and retried until acknowledged, as Telegram does: deploys
// that ask for approval (approved by a button press, or rejected through
// the API), status checks and idempotent restarts, each tool call taking
// up to --tool-delay. Meanwhile the server is killed --kills times at
// random moments and started again at once. When the workload is done it
// waits for everything to settle and checks, from the API and the fake's
// log: every acknowledged message has exactly one run; no run or step is
// left unfinished; a tool not declared idempotent was called at most once
// per idempotency key, and every run's outcome agrees with its calls;
// every reply and card was delivered (the platform has it) or
// dead-lettered; the audit chain verifies. It exits 1 on any violation.
//
// A short pass (what .ci/run does):
//
//	go run ./cmd/opsgate-chaos --kills 3 --requests 40
//	go run ./cmd/opsgate-chaos --kills 3 --requests 40 --store postgres
//
// A long one:
//
//	go run ./cmd/opsgate-chaos --kills 50 --requests 600 --timeout 30m --store postgres
//
// With --store postgres it creates a fresh database on the server of
// --pg-dsn (an admin DSN; default $OPSGATE_TEST_POSTGRES_DSN) and drops it
// afterwards. Everything listens on 127.0.0.1 only.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "opsgate-chaos: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	opsgate   string
	store     string
	pgDSN     string
	requests  int
	kills     int
	toolDelay time.Duration
	timeout   time.Duration
	keep      bool
	seed      uint64
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("opsgate-chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.opsgate, "opsgate", "", "opsgate binary to run (default: go build ./cmd/opsgate into a temp dir)")
	fs.StringVar(&o.store, "store", "sqlite", "sqlite or postgres")
	fs.StringVar(&o.pgDSN, "pg-dsn", os.Getenv("OPSGATE_TEST_POSTGRES_DSN"), "admin DSN of a Postgres server to create the run's database on (--store postgres)")
	fs.IntVar(&o.requests, "requests", 40, "chat messages in the workload, each in its own chat")
	fs.IntVar(&o.kills, "kills", 3, "SIGKILLs (each followed by a restart) during the workload")
	fs.DurationVar(&o.toolDelay, "tool-delay", 300*time.Millisecond, "a tool call takes up to this long, so kills land mid-call")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "bound of the whole run")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (config, logs, SQLite file) and the Postgres database")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the kill schedule and the workload mix (0: random)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.store != "sqlite" && o.store != "postgres":
		return o, fmt.Errorf("--store %q: want sqlite or postgres", o.store)
	case o.store == "postgres" && o.pgDSN == "":
		return o, errors.New("--store postgres needs --pg-dsn or $OPSGATE_TEST_POSTGRES_DSN")
	case o.requests < 1 || o.requests > 100000:
		return o, fmt.Errorf("--requests %d: want 1..100000", o.requests)
	case o.kills < 0 || o.kills > 10000:
		return o, fmt.Errorf("--kills %d: want 0..10000", o.kills)
	case o.timeout <= 0:
		return o, errors.New("--timeout must be positive")
	}
	if o.seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		for _, x := range b {
			o.seed = o.seed<<8 | uint64(x)
		}
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "opsgate-chaos-")
	if err != nil {
		return err
	}
	failed := true
	defer func() {
		if o.keep || failed {
			fmt.Fprintf(stdout, "chaos: work directory kept: %s\n", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	bin := o.opsgate
	if bin == "" {
		bin = filepath.Join(dir, "opsgate")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/opsgate/opsgate/cmd/opsgate")
		build.Stdout, build.Stderr = stderr, stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build opsgate: %w", err)
		}
	}
	storeYAML := fmt.Sprintf("store:\n  driver: sqlite\n  dsn: %s\n", filepath.Join(dir, "data", "opsgate.db"))
	if o.store == "postgres" {
		dsn, name, drop, err := createDatabase(ctx, o.pgDSN)
		if err != nil {
			return err
		}
		defer func() {
			if o.keep || failed {
				fmt.Fprintf(stdout, "chaos: database kept: %s\n", name)
				return
			}
			drop()
		}()
		storeYAML = fmt.Sprintf("store:\n  driver: postgres\n  dsn: %q\n", dsn)
	}

	botToken := "4242:" + randHex(16)
	f, err := startFake(botToken, o.toolDelay)
	if err != nil {
		return err
	}
	defer f.close()
	port, err := freePort()
	if err != nil {
		return err
	}
	w := &world{o: o, rng: newRand(o.seed), fake: f, stdout: stdout}
	w.api = &api{base: fmt.Sprintf("http://127.0.0.1:%d", port), token: randHex(24), secret: randHex(16), hc: &http.Client{}}
	cfg := filepath.Join(dir, "opsgate.yaml")
	if err := os.WriteFile(cfg, []byte(config(port, dir, storeYAML, w.api, botToken, f.url())), 0o600); err != nil {
		return err
	}
	w.srv = &server{bin: bin, cfg: cfg, dir: dir, port: port, logPath: filepath.Join(dir, "opsgate.log")}
	defer w.srv.stop()
	if err := w.srv.start(ctx); err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(stdout, "chaos: store=%s requests=%d kills=%d seed=%d\n", o.store, o.requests, o.kills, o.seed)
	if err := w.workload(ctx); err != nil {
		return fmt.Errorf("%w (server log: %s)", err, w.srv.logPath)
	}
	// Settling is bounded on its own, so what did not settle is reported
	// by the checks below rather than as a timeout.
	sctx, scancel := context.WithTimeout(ctx, settleWait)
	if err := w.settle(sctx); err != nil {
		fmt.Fprintf(stdout, "chaos: %v\n", err)
	}
	scancel()
	obs, err := w.observe(ctx)
	if err != nil {
		return err
	}
	bad, s := check(obs)
	plan := map[string]int{}
	for _, r := range w.reqs {
		plan[r.Flow+"/"+r.Decision]++
	}
	fmt.Fprintf(stdout, "chaos: workload %v\n", plan)
	_, _, sends, edits, notMod := f.snapshot()
	fmt.Fprintf(stdout, "chaos: %d kills, %d starts in %s; runs %v; %d tool calls (%d idempotent re-dispatches); "+
		"%d deliveries sent (%d messages, %d edits, %d refused as not modified, %d resent after a kill), %d dead; audit ok=%v\n",
		w.srv.kills, w.srv.starts, time.Since(start).Round(100*time.Millisecond), s.Runs, s.Dispatches, s.Redispatched,
		s.Sent, sends, edits, notMod, s.DuplicateSends, s.Dead, obs.AuditOK)
	if len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(stdout, "chaos: VIOLATION:", b)
		}
		return fmt.Errorf("%d invariant violations (seed %d; server log: %s)", len(bad), o.seed, w.srv.logPath)
	}
	fmt.Fprintln(stdout, "chaos: PASS")
	failed = false
	return nil
}

// settleWait bounds the wait for the last runs and deliveries after the
// workload: a killed server's runs move on after the 3 s lease, its
// account's sending after the 9 s delivery lease, retries after backoff.
const settleWait = 2 * time.Minute

// config is the server's: Telegram in webhook mode against the fake, three
// HTTP tools calling the fake, a deploy that asks, short leases so a
// killed server's runs move on quickly.
func config(port int, dir, storeYAML string, a *api, botToken, fakeURL string) string {
	tool := func(name, risk string, extra string) string {
		return fmt.Sprintf(`  - name: %s
    risk: %s%s
    input_schema: {type: object, required: [service], properties: {service: {type: string, pattern: "^[a-z0-9-]+$"}, version: {type: string}}}
    http: {method: POST, url: "%s/tool/%s", body: '{"service": {{json .service}}}', timeout: 30s}
`, name, risk, extra, fakeURL, name)
	}
	return fmt.Sprintf(`server:
  listen: 127.0.0.1:%d
  public_url: https://127.0.0.1:%d   # only registered with the fake (setWebhook) and shown in links
  data_dir: %s
%sengine:
  lease: 3s
  poll_interval: 250ms
api:
  tokens:
    - {name: chaos, token: %q, actor: "console:chaos"}
channels:
  telegram:
    enabled: true
    mode: webhook
    bot_token: %q
    bot_username: chaos_bot
    webhook_secret: %q
    api_url: %q
    requesters: ["telegram:1001"]
    rate_limits:
      conversation: {rate: "50/s", burst: 5}
      account: {rate: "500/s", burst: 50}
approvers:
  groups:
    sre: ["telegram:2001", "console:chaos"]
tools:
%s%s%sflows:
  - {name: deploy, command: "deploy {service} {version}", steps: [{tool: deploy, args: {service: "{{.service}}", version: "{{.version}}"}}]}
  - {name: status, command: "status {service}", steps: [{tool: status, args: {service: "{{.service}}"}}]}
  - {name: restart, command: "restart {service}", steps: [{tool: restart, args: {service: "{{.service}}"}}]}
approvals:
  ttl: 1h
`, port, port, filepath.Join(dir, "data"), storeYAML, a.token, botToken, a.secret, fakeURL,
		tool("deploy", "high_impact", "\n    destructive: true"), tool("status", "read", ""), tool("restart", "reversible", "\n    idempotent: true"))
}

// createDatabase makes a fresh database on the admin DSN's server and
// returns its DSN, its name and a function that drops it.
func createDatabase(ctx context.Context, admin string) (dsn, name string, drop func(), err error) {
	name = "opsgate_chaos_" + randHex(6)
	exec := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		return err
	}
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", "", nil, errors.New("--pg-dsn: want a postgres:// URL")
	}
	if err := exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", "", nil, fmt.Errorf("create database: %w", err)
	}
	u.Path = "/" + name
	drop = func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(dctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "opsgate-chaos: drop database %s: %v\n", name, err)
		}
	}
	return u.String(), name, drop, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
