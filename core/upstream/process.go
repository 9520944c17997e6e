package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// inheritedEnv is what a stdio server gets from opsgate's environment,
// the same as exec tools: nothing of opsgate's own secrets.
var inheritedEnv = []string{"PATH", "HOME", "LANG", "TZ"}

// process is a running stdio server: its own process group, stdin and
// stdout for the protocol, stderr logged line by line.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File // our end
	stdout *os.File // our end
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
	log    *slog.Logger
	m      *masker
	once   sync.Once
}

func startProcess(s *Server, log *slog.Logger, m *masker) (*process, error) {
	cmd := exec.Command(s.Command[0], s.Command[1:]...)
	cmd.Dir = s.Dir
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for k, v := range s.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// Its own group: a Ctrl-C to opsgate's terminal does not kill the
	// server under a draining run, and Close kills whatever it spawned.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, fmt.Errorf("start %s: %w", s.Command[0], err)
	}
	closeAll(inR, outW, errW) // the child's ends
	p := &process{cmd: cmd, stdin: inW, stdout: outR, exited: make(chan struct{}), log: log, m: m}
	go p.logStderr(errR)
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// logStderr logs each stderr line with the server's name (the logger
// carries it), masked and capped.
func (p *process) logStderr(r *os.File) {
	defer r.Close()
	br := bufio.NewReaderSize(r, stderrLineMax)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if text := string(bytes.TrimRight(line, "\r\n")); text != "" {
				p.log.Info("upstream stderr", "line", p.m.String(text))
			}
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF), errors.Is(err, os.ErrClosed):
			return
		default:
			return
		}
	}
}

// exitStatus describes how the process ended, once it has.
func (p *process) exitStatus() string {
	select {
	case <-p.exited:
	default:
		return "still running"
	}
	if p.err == nil {
		return "exit status 0"
	}
	return p.err.Error()
}

// stop ends the process: stdin closed (MCP's shutdown for stdio), then
// SIGKILL to the whole group after terminateGrace. It returns when the
// process has exited.
func (p *process) stop() { p.once.Do(p.terminate) }

func (p *process) terminate() {
	_ = p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(terminateGrace):
	}
	// Also after a clean exit: children it left behind (npx → node) die
	// with the group.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	_ = p.stdout.Close()
}
