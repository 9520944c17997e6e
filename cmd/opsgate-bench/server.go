package main

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// benchYAML is the server configuration the report runs every server with:
// the same file run.sh and issue-figures.sh use, so the figures agree.
//
//go:embed bench.yaml
var benchYAML []byte

// readyTimeout bounds how long a started server may take to answer /readyz
// (it migrates nothing: the report migrates before preloading).
const readyTimeout = 2 * time.Minute

// benchServer is one opsgate process the report started, on its own store.
type benchServer struct {
	store   string
	base    *url.URL
	token   string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has exited
}

// storeDSN makes an empty store for one server: a SQLite file in dir, or a
// fresh database on the Postgres server adminDSN names (a postgres:// URL
// of a role that may CREATE DATABASE). drop removes the database again.
func storeDSN(ctx context.Context, store, adminDSN, dir string) (dsn string, drop func(), err error) {
	if store == "sqlite" {
		return filepath.Join(dir, "opsgate.db"), func() {}, nil
	}
	u, err := url.Parse(adminDSN)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, errors.New("--postgres: want a postgres:// URL of a role that may create databases")
	}
	name := "opsgate_report_" + randHex(6)
	admin := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, adminDSN)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("postgres: create database: %w", err)
	}
	u.Path, u.RawPath = "/"+name, ""
	if q := u.Query(); q.Has("dbname") { // would override the path
		q.Del("dbname")
		u.RawQuery = q.Encode()
	}
	drop = func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin(dctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "opsgate-bench: drop database %s: %v\n", name, err)
		}
	}
	return u.String(), drop, nil
}

// serverEnv is the environment bench.yaml reads, on top of ours minus the
// variables that would point the server elsewhere.
func serverEnv(store, dsn, dir, listen, token string) []string {
	env := []string{"OPSGATE_CONFIG=", "OPSGATE_TOKEN=", "OPSGATE_SERVER="}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPSGATE_") && !strings.HasPrefix(kv, "BENCH_") {
			env = append(env, kv)
		}
	}
	return append(env, "BENCH_LISTEN="+listen, "BENCH_DATA_DIR="+dir, "BENCH_STORE_DRIVER="+store,
		"BENCH_STORE_DSN="+dsn, "OPSGATE_BENCH_TOKEN="+token, "BENCH_SLACK=false")
}

// startServer migrates the store, preloads pending approvals into it and
// starts `opsgate serve` on a free loopback port, returning once /readyz
// answers 200. It returns how long the preload took.
func startServer(ctx context.Context, bin, store, dsn, dir string, pending int) (*benchServer, time.Duration, error) {
	cfg := filepath.Join(dir, "bench.yaml")
	if err := os.WriteFile(cfg, benchYAML, 0o600); err != nil {
		return nil, 0, err
	}
	port, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	s := &benchServer{store: store, token: randHex(16), logPath: filepath.Join(dir, "server.log"),
		base: &url.URL{Scheme: "http", Host: listen}}
	env := serverEnv(store, dsn, dir, listen, s.token)

	migrate := exec.CommandContext(ctx, bin, "migrate", "--config", cfg)
	migrate.Env, migrate.Dir = env, dir
	if out, err := migrate.CombinedOutput(); err != nil {
		return nil, 0, fmt.Errorf("%s: opsgate migrate: %w\n%s", store, err, out)
	}
	t0 := time.Now()
	if pending > 0 {
		if err := preload(ctx, preloadOptions{driver: store, dsn: dsn, pending: pending}, io.Discard); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", store, err)
		}
	}
	took := time.Since(t0)

	log, err := os.Create(s.logPath)
	if err != nil {
		return nil, 0, err
	}
	defer log.Close() // the child holds its own descriptor
	s.cmd = exec.Command(bin, "serve", "--config", cfg, "--log-level", "warn")
	s.cmd.Env, s.cmd.Dir, s.cmd.Stdout, s.cmd.Stderr = env, dir, log, log
	if err := s.cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("%s: start opsgate: %w", store, err)
	}
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	if err := s.waitReady(ctx); err != nil {
		s.stop()
		return nil, 0, err
	}
	return s, took, nil
}

// waitReady polls /readyz until it answers 200, the process exits or
// readyTimeout passes.
func (s *benchServer) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base.String()+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("%s: opsgate exited during start:\n%s", s.store, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("%s: opsgate not ready: %w\n%s", s.store, ctx.Err(), s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop ends the server gracefully (SIGTERM), or with SIGKILL if it has not
// exited 30 seconds later.
func (s *benchServer) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// logTail is the end of the server's log, for an error message.
func (s *benchServer) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
