package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/opsgate/opsgate/core"
)

// pool runs fn(i) for i in [0, n) on at most workers goroutines and returns
// the first error, cancelling the rest: every phase's load is bounded by n.
func pool(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, max(n, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

type ingestResult struct {
	elapsed time.Duration
	lat     []time.Duration
}

// ingest posts o.messages messages, each to its own thread, from
// o.concurrency clients. Each POST returns after the commit, so the rate is
// what the server durably accepts.
func ingest(ctx context.Context, c *client, o options, nonce string) (ingestResult, error) {
	lat := make([]time.Duration, o.messages)
	start := time.Now()
	err := pool(ctx, o.messages, o.concurrency, func(ctx context.Context, i int) error {
		t0 := time.Now()
		_, err := c.postMessage(ctx, fmt.Sprintf("bench-%s-ingest-%d", nonce, i), o.ingestText)
		if err != nil && !(errors.Is(err, errNoRun) && o.ingestText != o.pingFlow) {
			return err
		}
		lat[i] = time.Since(t0)
		return nil
	})
	return ingestResult{elapsed: time.Since(start), lat: lat}, err
}

// waitDrained waits until no run is queued or running, so the next phase
// measures latency rather than the ingest backlog.
func waitDrained(ctx context.Context, c *client) (time.Duration, error) {
	start := time.Now()
	for {
		busy := false
		for _, st := range []string{"queued", "running"} {
			var p runPage
			if err := c.get(ctx, "/api/v1/runs?limit=1&status="+st, &p); err != nil {
				return 0, err
			}
			busy = busy || len(p.Items) > 0
		}
		if !busy {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

type decisionResult struct {
	sse, started, post []time.Duration
}

// decideDispatch starts o.runs runs of the ask flow, waits until every one is
// waiting for approval, then approves all of them — at once, or one every
// o.decideEvery — and times each decision to its tool.started event.
func decideDispatch(ctx context.Context, c *client, o options, nonce string) (decisionResult, error) {
	n := o.runs
	runs := make([]*apiRun, n)
	err := pool(ctx, n, o.concurrency, func(ctx context.Context, i int) error {
		r, err := c.postMessage(ctx, fmt.Sprintf("bench-%s-ask-%d", nonce, i), o.askFlow)
		runs[i] = r
		return err
	})
	if err != nil {
		return decisionResult{}, fmt.Errorf("start runs: %w", err)
	}
	// Wait until all are pending, and learn their approval ids.
	approvalIDs := make([]string, n)
	err = pool(ctx, n, o.concurrency, func(ctx context.Context, i int) error {
		for {
			r, err := c.getRun(ctx, runs[i].ID)
			if err != nil {
				return err
			}
			if r.Status == "waiting_approval" && len(r.Steps) > 0 && r.Steps[len(r.Steps)-1].ApprovalID != "" {
				approvalIDs[i] = r.Steps[len(r.Steps)-1].ApprovalID
				return nil
			}
			if isFinal(r.Status) {
				return fmt.Errorf("run %s ended %s before asking; does flow %q's tool ask?", r.ID, r.Status, o.askFlow)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	if err != nil {
		return decisionResult{}, fmt.Errorf("wait for pending approvals: %w", err)
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	streams := make([]<-chan sseEvent, n)
	for i := range n {
		if streams[i], err = c.openEvents(sctx, runs[i].ID); err != nil {
			return decisionResult{}, err
		}
	}

	res := decisionResult{sse: make([]time.Duration, n), started: make([]time.Duration, n), post: make([]time.Duration, n)}
	sent := make([]time.Time, n)
	gate := make(chan struct{})
	var start time.Time
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			// Paced: decision i leaves at start + i*every, so each is
			// timed on its own rather than behind the whole burst.
			if wait := time.Until(start.Add(time.Duration(i) * o.decideEvery)); wait > 0 {
				select {
				case <-time.After(wait):
				case <-sctx.Done():
					errs <- sctx.Err()
					return
				}
			}
			sent[i] = time.Now()
			body := map[string]any{"action": "approve", "reason": "opsgate-bench"}
			if err := c.do(sctx, http.MethodPost, "/api/v1/approvals/"+url.PathEscape(approvalIDs[i])+"/decision", body, nil); err != nil {
				errs <- fmt.Errorf("approve %s: %w", approvalIDs[i], err)
				return
			}
			res.post[i] = time.Since(sent[i])
			for ev := range streams[i] {
				if ev.typ == "tool.started" {
					res.sse[i] = ev.at.Sub(sent[i])
					return
				}
			}
			errs <- fmt.Errorf("run %s: event stream ended without tool.started", runs[i].ID)
		}()
	}
	start = time.Now()
	close(gate)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	cancel()
	// The server's own record of when the tool was dispatched.
	err = pool(ctx, n, o.concurrency, func(ctx context.Context, i int) error {
		r, err := waitFinal(ctx, c, runs[i].ID)
		if err != nil {
			return err
		}
		if len(r.Steps) == 0 || r.Steps[len(r.Steps)-1].StartedAt == nil {
			return fmt.Errorf("run %s: no step started_at", r.ID)
		}
		res.started[i] = r.Steps[len(r.Steps)-1].StartedAt.Sub(sent[i])
		return nil
	})
	return res, err
}

// endToEnd times o.e2eRuns runs of the ping flow from sending the message
// to the run being final, o.concurrency at a time.
func endToEnd(ctx context.Context, c *client, o options, nonce string) ([]time.Duration, error) {
	lat := make([]time.Duration, o.e2eRuns)
	err := pool(ctx, o.e2eRuns, o.concurrency, func(ctx context.Context, i int) error {
		t0 := time.Now()
		r, err := c.postMessage(ctx, fmt.Sprintf("bench-%s-e2e-%d", nonce, i), o.pingFlow)
		if err != nil {
			return err
		}
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		events, err := c.openEvents(sctx, r.ID)
		if err != nil {
			return err
		}
		var end time.Time
		for ev := range events {
			if ev.typ == "turn.finished" {
				end = ev.at
				break
			}
		}
		cancel()
		fr, err := waitFinal(ctx, c, r.ID)
		if err != nil {
			return err
		}
		if end.IsZero() {
			end = time.Now()
		}
		if fr.Status != "succeeded" {
			return fmt.Errorf("run %s ended %s", fr.ID, fr.Status)
		}
		lat[i] = end.Sub(t0)
		return nil
	})
	return lat, err
}

// waitFinal polls a run until it is final.
func waitFinal(ctx context.Context, c *client, id string) (*apiRun, error) {
	for {
		r, err := c.getRun(ctx, id)
		if err != nil {
			return nil, err
		}
		if isFinal(r.Status) {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("run %s still %s: %w", id, r.Status, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func isFinal(s string) bool { return core.RunStatus(s).Final() }
