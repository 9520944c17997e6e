package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// server runs `opsgate serve` as a child process, kills it with SIGKILL and
// starts it again, always on the same config, data and port.
type server struct {
	bin, cfg, dir string
	port          int
	logPath       string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
	// starts counts the processes started; kills the SIGKILLs sent.
	starts, kills int
}

func (s *server) base() string { return "http://127.0.0.1:" + strconv.Itoa(s.port) }

// start runs a new process and waits (bounded) until /healthz answers.
func (s *server) start(ctx context.Context) error {
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return errors.New("server already running")
	}
	if s.log == nil {
		f, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		s.log = f
	}
	cmd := exec.Command(s.bin, "serve", "--config", s.cfg, "--log-format", "json")
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "OPSGATE_LISTEN=127.0.0.1:"+strconv.Itoa(s.port), "OPSGATE_CONFIG=", "OPSGATE_TOKEN=", "OPSGATE_SERVER=")
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("start opsgate: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	s.starts++
	s.mu.Unlock()

	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("opsgate exited during start; see %s", s.logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		resp, err := http.Get(s.base() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("opsgate not healthy after 60s; see %s", s.logPath)
		}
	}
}

// kill ends the process with SIGKILL: no drain, no cleanup, like a crash.
func (s *server) kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	if cmd != nil {
		s.kills++
	}
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// stop ends the process gracefully (SIGTERM), for the end of the run.
func (s *server) stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
	}
	if s.log != nil {
		_ = s.log.Close()
	}
}

// api is a small client of opsgate's HTTP API and Telegram webhook. Every
// call is bounded; a connection refused (the server is down) is an error
// the caller retries.
type api struct {
	base, token, secret string
	hc                  *http.Client
}

func (a *api) do(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// webhook posts one update as Telegram does and reports whether it was
// acknowledged (200).
func (a *api) webhook(ctx context.Context, update any) (bool, error) {
	b, err := json.Marshal(update)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", a.base+"/telegram/webhook", bytes.NewReader(b))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", a.secret)
	resp, err := a.hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return false, fmt.Errorf("webhook: HTTP %d", resp.StatusCode)
	}
	return true, nil
}

// list pages through a list endpoint ({"items","next_cursor"}).
func list[T any](ctx context.Context, a *api, path string) ([]T, error) {
	var all []T
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	cursor := ""
	for range 10000 {
		var page struct {
			Items      []T    `json:"items"`
			NextCursor string `json:"next_cursor"`
		}
		p := path + sep + "limit=200"
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		if _, err := a.do(ctx, "GET", p, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if page.NextCursor == "" {
			return all, nil
		}
		cursor = page.NextCursor
	}
	return nil, errors.New("list: too many pages")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
