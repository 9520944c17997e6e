package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsgate/opsgate/core/tools"
)

// client is one upstream server: a loop that keeps a session open
// (connecting, listing tools, restarting a crashed process with backoff)
// and the last good tool list, which calls and lookups read.
type client struct {
	srv Server
	log *slog.Logger
	m   *masker
	sdk *mcp.Client

	mu      sync.Mutex
	sess    *mcp.ClientSession // nil while disconnected
	tools   map[string]*tools.Tool
	infos   []ToolInfo
	listed  bool  // a tools/list succeeded at least once
	lastErr error // why the last attempt failed; nil while connected
	closed  bool
	// attempts counts finished connection attempts, so a call waiting
	// for a reconnect knows when the one it asked for has ended.
	attempts int
	// changed is closed and replaced on every state change, so waiters
	// wake without polling.
	changed chan struct{}

	// first is closed when the first connection attempt has ended either
	// way: lookups wait for it rather than failing at startup.
	first chan struct{}
	// refresh asks the loop for a tools/list (list_changed); kick asks a
	// disconnected loop to reconnect now instead of after its backoff.
	refresh chan struct{}
	kick    chan struct{}
	// lost is signalled by a call that saw the connection break, so the
	// loop does not wait for the SDK to notice.
	lost chan struct{}

	// flights are the calls in flight, for their progress and questions.
	flights flights
}

func newClient(s Server, log *slog.Logger) *client {
	m := newMasker(s.secrets())
	c := &client{
		srv: s, m: m, log: log.With("server", s.Name),
		tools: map[string]*tools.Tool{}, changed: make(chan struct{}),
		first: make(chan struct{}), refresh: make(chan struct{}, 1), kick: make(chan struct{}, 1), lost: make(chan struct{}, 1),
	}
	c.log = slog.New(maskHandler{Handler: c.log.Handler(), m: m})
	c.sdk = mcp.NewClient(&mcp.Implementation{Name: "opsgate", Version: "1"}, &mcp.ClientOptions{
		Logger: c.log.With("component", "mcp-sdk"),
		// Roots without roots: roots/list answers an empty list (opsgate
		// shows a server none of its files). No sampling: opsgate is a
		// gate, not a host whose models a server may use (refused with a
		// clear error, below). Form elicitation: a question to the run's
		// people (flight.go); progress goes to the call's output.
		//lint:ignore SA1019 roots stay in the protocol for their deprecation window (SEP-2577); servers still ask
		Capabilities:                &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{}},
		MultiRoundTrip:              &mcp.MultiRoundTripOptions{Disabled: true},
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { signal(c.refresh) },
		ElicitationHandler:          c.elicitation,
		ProgressNotificationHandler: c.progress,
	})
	c.sdk.AddReceivingMiddleware(refuseSampling)
	return c
}

// errSamplingRefused answers a server's sampling/createMessage.
const errSamplingRefused = "opsgate does not let upstream MCP servers use its models: sampling is refused (docs/mcp-servers.md)"

// refuseSampling answers sampling/createMessage with a clear refusal
// instead of the SDK's "method not found": a server that samples anyway
// learns why.
func refuseSampling(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "sampling/createMessage" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: errSamplingRefused}
		}
		return next(ctx, method, req)
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// setState records a state change and wakes waiters.
func (c *client) setState(f func()) {
	c.mu.Lock()
	f()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// run keeps the server connected until ctx ends.
func (c *client) run(ctx context.Context) {
	backoff := c.srv.MinBackoff
	firstDone := false
	doneFirst := func() {
		if !firstDone {
			firstDone = true
			close(c.first)
		}
	}
	defer doneFirst()
	for ctx.Err() == nil {
		sess, proc, err := c.connect(ctx)
		if err == nil {
			err = c.list(ctx, sess)
		}
		if err != nil {
			if sess != nil {
				_ = sess.Close()
			}
			if proc != nil {
				proc.stop()
			}
			if ctx.Err() != nil {
				return
			}
			err = c.m.Error(err)
			c.setState(func() { c.lastErr = err; c.attempts++ })
			doneFirst()
			c.log.Warn("upstream server unavailable; retrying", "server_at", c.srv.describe(c.m), "err", err, "retry_in", backoff)
			if !c.wait(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, c.srv.MaxBackoff)
			continue
		}
		c.setState(func() {
			c.sess, c.lastErr = sess, nil
			c.attempts++
			select {
			case <-c.lost:
			default:
			}
		})
		doneFirst()
		c.log.Info("upstream server connected", "server_at", c.srv.describe(c.m),
			"protocol", sess.InitializeResult().ProtocolVersion, "tools", c.offeredCount())
		since := time.Now()
		why := c.serve(ctx, sess, proc)
		_ = sess.Close()
		if proc != nil {
			proc.stop()
			why = fmt.Errorf("%w (process: %s)", why, proc.exitStatus())
		}
		why = c.m.Error(why)
		c.setState(func() { c.sess, c.lastErr = nil, why })
		if ctx.Err() != nil {
			return
		}
		if time.Since(since) > stableAfter {
			backoff = c.srv.MinBackoff
		}
		c.log.Warn("upstream server disconnected; reconnecting", "err", c.m.Error(why), "retry_in", backoff)
		if !c.wait(ctx, backoff) {
			return
		}
		backoff = min(backoff*2, c.srv.MaxBackoff)
	}
}

// wait sleeps d, or less when a call kicks; false when ctx ended.
func (c *client) wait(ctx context.Context, d time.Duration) bool {
	select {
	case <-c.kick: // drained: one kick, one early attempt
	default:
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		case <-c.kick:
		}
	}
	return ctx.Err() == nil
}

// connect opens a session: starts the process (stdio) or reaches the URL,
// then initializes, all within ConnectTimeout.
func (c *client) connect(ctx context.Context) (*mcp.ClientSession, *process, error) {
	cctx, cancel := context.WithTimeout(ctx, c.srv.ConnectTimeout)
	defer cancel()
	var (
		t    mcp.Transport
		proc *process
	)
	if c.srv.Transport() == TransportStdio {
		p, err := startProcess(&c.srv, c.log, c.m)
		if err != nil {
			return nil, nil, err
		}
		proc = p
		t = &mcp.IOTransport{Reader: p.stdout, Writer: p.stdin, MaxLineLength: int(c.srv.MaxMessage)}
	} else {
		// MaxRetries -1: a call's event stream that breaks is not resumed
		// (the SDK would retry a dead server with backoff until the call's
		// timeout); the call fails at once, its outcome unknown, and the
		// loop reconnects.
		t = &mcp.StreamableClientTransport{Endpoint: c.srv.URL, HTTPClient: httpClient(&c.srv), MaxEventSize: int(c.srv.MaxMessage), MaxRetries: -1}
	}
	type connected struct {
		s   *mcp.ClientSession
		err error
	}
	// Connect is waited for with the timeout, but a transport that
	// ignores its context (a process that never answers initialize) is
	// not trusted to return: stopping the process ends it.
	ch := make(chan connected, 1)
	go func() {
		s, err := c.sdk.Connect(cctx, t, nil)
		ch <- connected{s, err}
	}()
	var r connected
	select {
	case r = <-ch:
	case <-cctx.Done():
		if proc != nil {
			proc.stop()
		}
		r = <-ch
		if r.s != nil {
			_ = r.s.Close()
		}
		r.s, r.err = nil, cctx.Err()
	}
	if r.err != nil {
		if proc != nil {
			proc.stop()
		}
		return nil, nil, c.connectError(ctx, cctx, proc, r.err)
	}
	return r.s, proc, nil
}

func (c *client) connectError(ctx, cctx context.Context, proc *process, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		err = fmt.Errorf("no answer to initialize within %s", c.srv.ConnectTimeout)
	}
	if proc != nil {
		return fmt.Errorf("connect: %w (process: %s)", err, proc.exitStatus())
	}
	return fmt.Errorf("connect: %w", err)
}

// serve holds a session until it ends or ctx does, refreshing the tool
// list on list_changed and every RefreshInterval. It returns why the
// session ended.
func (c *client) serve(ctx context.Context, sess *mcp.ClientSession, proc *process) error {
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	var exited chan struct{}
	if proc != nil {
		exited = proc.exited
	}
	tick := time.NewTicker(c.srv.RefreshInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-done:
			if err == nil {
				err = errors.New("the server closed the connection")
			}
			return fmt.Errorf("session ended: %w", err)
		case <-exited:
			return errors.New("the server process exited")
		case <-c.lost:
			return errors.New("a call found the connection broken")
		case <-c.refresh:
			c.refreshTools(ctx, sess, "list_changed")
		case <-tick.C:
			c.refreshTools(ctx, sess, "periodic")
		}
	}
}

func (c *client) refreshTools(ctx context.Context, sess *mcp.ClientSession, why string) {
	if err := c.list(ctx, sess); err != nil && ctx.Err() == nil {
		c.log.Warn("upstream tools/list failed; keeping the last list", "why", why, "err", c.m.Error(err))
	}
}

// list fetches every page of tools/list (bounded) and installs the result.
func (c *client) list(ctx context.Context, sess *mcp.ClientSession) error {
	lctx, cancel := context.WithTimeout(ctx, c.srv.ConnectTimeout)
	defer cancel()
	var all []*mcp.Tool
	params := &mcp.ListToolsParams{}
	for page := 0; ; page++ {
		if page == maxPages {
			return fmt.Errorf("tools/list: more than %d pages", maxPages)
		}
		res, err := sess.ListTools(lctx, params)
		if err != nil {
			if errors.Is(lctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("tools/list: no answer within %s", c.srv.ConnectTimeout)
			}
			return fmt.Errorf("tools/list: %w", err)
		}
		all = append(all, res.Tools...)
		if len(all) > maxTools {
			return fmt.Errorf("tools/list: more than %d tools", maxTools)
		}
		if res.NextCursor == "" || res.NextCursor == params.Cursor {
			break
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	infos, offered := c.buildTools(all)
	var added, removed []string
	var relisted bool
	c.setState(func() {
		relisted = c.listed
		for name := range offered {
			if c.tools[name] == nil {
				added = append(added, name)
			}
		}
		for name := range c.tools {
			if offered[name] == nil {
				removed = append(removed, name)
			}
		}
		c.tools, c.infos, c.listed = offered, infos, true
	})
	for _, in := range infos {
		if in.Problem != "" {
			c.log.Warn("upstream tool not offered", "tool", in.Name, "problem", in.Problem)
		}
	}
	if relisted && (len(added) > 0 || len(removed) > 0) {
		slices.Sort(added)
		slices.Sort(removed)
		c.log.Info("upstream tools changed", "added", added, "removed", removed)
	}
	return nil
}

func (c *client) offeredCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.tools)
}

// session returns the open session, kicking one reconnect attempt when
// there is none and waiting for its outcome (bounded by ctx).
func (c *client) session(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	s, ch, closed, lastErr, start := c.sess, c.changed, c.closed, c.lastErr, c.attempts
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if s != nil {
		return s, nil
	}
	signal(c.kick)
	// Wait for the attempt under way (or the one just kicked) to end.
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: upstream %s is not connected (%v)", ErrUnavailable, c.srv.Name, orNot(lastErr))
		case <-ch:
		}
		c.mu.Lock()
		s, ch, closed, lastErr = c.sess, c.changed, c.closed, c.lastErr
		ended := c.attempts > start
		c.mu.Unlock()
		switch {
		case closed:
			return nil, ErrClosed
		case s != nil:
			return s, nil
		case ended && lastErr != nil:
			return nil, fmt.Errorf("%w: upstream %s: %v", ErrUnavailable, c.srv.Name, lastErr)
		}
	}
}

func orNot(err error) string {
	if err == nil {
		return "connecting"
	}
	return err.Error()
}

// connectionLost records that a call saw sess break: later calls wait for
// a new session instead of failing on the dead one, and the loop
// reconnects without waiting for the SDK to notice.
func (c *client) connectionLost(sess *mcp.ClientSession) {
	c.setState(func() {
		// Signalled under the lock that installs sessions (which drains
		// lost), so a signal about an old session never ends a new one.
		if c.sess == sess {
			c.sess = nil
			signal(c.lost)
		}
	})
}

// lookup returns an offered tool, waiting for the first connection
// attempt so a run at startup does not fail for want of a list.
func (c *client) lookup(ctx context.Context, name string) (*tools.Tool, error) {
	select {
	case <-c.first:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.tools[name]; t != nil {
		return t, nil
	}
	if !c.listed {
		return nil, fmt.Errorf("%w: upstream %s has not listed its tools yet (%v)", ErrUnavailable, c.srv.Name, orNot(c.lastErr))
	}
	for _, in := range c.infos {
		if in.Name == name {
			why := in.Problem
			if in.Excluded {
				why = "not in its tools globs"
			}
			return nil, fmt.Errorf("%w %q: upstream %s lists it but it is not offered: %s", tools.ErrUnknownTool, name, c.srv.Name, why)
		}
	}
	return nil, fmt.Errorf("%w %q: upstream %s does not offer it (any more)", tools.ErrUnknownTool, name, c.srv.Name)
}

// snapshot is the state for listings.
func (c *client) snapshot() (infos []ToolInfo, listed, connected bool, lastErr error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.infos), c.listed, c.sess != nil, c.lastErr
}
