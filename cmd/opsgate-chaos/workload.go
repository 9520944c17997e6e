package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// chatBase numbers the workload's chats: request n talks in chat chatBase+n.
const chatBase = 700000

const (
	requesterID = 1001 // telegram:1001 asks
	approverID  = 2001 // telegram:2001 presses Approve
)

// world is one chaos run.
type world struct {
	o      options
	rng    *rand.Rand
	fake   *fake
	api    *api
	srv    *server
	stdout io.Writer

	reqs []*request
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// retry calls f until it succeeds or ctx ends, pausing between attempts:
// the server may be down (killed, restarting) at any moment.
func retry(ctx context.Context, what string, f func() error) error {
	var last error
	for {
		err := f()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// thread is request n's thread: its own private chat, which is one
// conversation (docs/telegram.md, "Conversations").
func thread(n int) string { return "telegram:" + strconv.Itoa(chatBase+n) + "/0/0" }

func chatOf(n int) map[string]any {
	return map[string]any{"id": chatBase + n, "type": "private"}
}

// workload sends every request (retried until acknowledged), decides every
// deploy, and kills and restarts the server meanwhile; it returns when all
// three are done.
func (w *world) workload(ctx context.Context) error {
	for n := range w.o.requests {
		r := &request{N: n, UpdateID: int64(n + 1)}
		switch x := w.rng.IntN(10); {
		case x < 5:
			r.Flow, r.Decision = "deploy", "approve"
			if w.rng.IntN(4) == 0 {
				r.Decision = "reject"
			}
			r.Text = fmt.Sprintf("/ops deploy svc-%d 1.%d", n, n)
		case x < 8:
			r.Flow, r.Text = "status", fmt.Sprintf("/ops status svc-%d", n)
		default:
			r.Flow, r.Text = "restart", fmt.Sprintf("/ops restart svc-%d", n)
		}
		w.reqs = append(w.reqs, r)
	}
	kills := make([]time.Duration, w.o.kills)
	for i := range kills {
		kills[i] = 300*time.Millisecond + time.Duration(w.rng.Int64N(int64(1700*time.Millisecond)))
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 3)
	var senders sync.WaitGroup
	next := atomic.Int64{}
	for range 6 {
		senders.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(w.reqs) {
					return
				}
				if err := w.send(ctx, w.reqs[i]); err != nil {
					errs <- err
					return
				}
				// Spread the load a little, so kills find work in every state.
				time.Sleep(rand.N(30 * time.Millisecond))
			}
		})
	}
	var others sync.WaitGroup
	sent := make(chan struct{})
	go func() { senders.Wait(); close(sent) }()
	others.Go(func() {
		if err := w.decideAll(ctx, sent); err != nil {
			errs <- err
		}
	})
	others.Go(func() {
		for _, d := range kills {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
			w.srv.kill()
			if err := w.srv.start(ctx); err != nil {
				errs <- fmt.Errorf("restart after kill %d: %w", w.srv.kills, err)
				return
			}
		}
	})
	done := make(chan struct{})
	go func() { senders.Wait(); others.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case err := <-errs:
		cancel()
		<-done
		return err
	}
}

// send posts a request's message update until the webhook acknowledges it.
func (w *world) send(ctx context.Context, r *request) error {
	u := map[string]any{"update_id": r.UpdateID, "message": map[string]any{
		"message_id": 1, "date": time.Now().Unix(), "text": r.Text, "chat": chatOf(r.N),
		"from": map[string]any{"id": requesterID, "is_bot": false, "first_name": "Req"},
	}}
	return retry(ctx, "send request "+strconv.Itoa(r.N), func() error {
		ok, err := w.api.webhook(ctx, u)
		if ok {
			r.Acked = true
		}
		return err
	})
}

// cardWait bounds how long, once every request is sent, the decider waits
// for a card that does not come: it then stops, and the checks report what
// is missing instead of the run timing out.
const cardWait = 45 * time.Second

// decideAll decides every deploy once its card is out: Approve by pressing
// the card's button (a callback query through the webhook), reject through
// the API as another surface would. sent closes when every request is sent.
func (w *world) decideAll(ctx context.Context, sent <-chan struct{}) error {
	pending := map[int]*request{}
	for _, r := range w.reqs {
		if r.Flow == "deploy" {
			pending[r.N] = r
		}
	}
	progress := time.Now()
	for len(pending) > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("decide: %w (%d deploys undecided)", ctx.Err(), len(pending))
		case <-time.After(100 * time.Millisecond):
		}
		select {
		case <-sent:
			if time.Since(progress) > cardWait {
				fmt.Fprintf(w.stdout, "chaos: no card for %d deploys after %s; checking what there is\n", len(pending), cardWait)
				return nil
			}
		default:
			progress = time.Now()
		}
		cards := w.fake.cards()
		for n, r := range pending {
			c, ok := cards[int64(chatBase+n)]
			if !ok {
				continue // the card is not out yet (or not sent yet after a kill)
			}
			var err error
			if r.Decision == "approve" {
				err = w.press(ctx, r, c)
			} else {
				err = w.reject(ctx, r)
			}
			if err != nil {
				return err
			}
			delete(pending, n)
			progress = time.Now()
		}
	}
	return nil
}

func (w *world) press(ctx context.Context, r *request, c card) error {
	u := map[string]any{"update_id": 1_000_000 + r.UpdateID, "callback_query": map[string]any{
		"id": "cq-" + strconv.Itoa(r.N), "data": c.approve,
		"from": map[string]any{"id": approverID, "is_bot": false, "first_name": "Ann"},
		"message": map[string]any{"message_id": c.id, "date": time.Now().Unix(), "text": "card", "chat": chatOf(r.N),
			"from": map[string]any{"id": 4242, "is_bot": true, "first_name": "Ops"}},
	}}
	return retry(ctx, "press approve "+strconv.Itoa(r.N), func() error {
		_, err := w.api.webhook(ctx, u)
		return err
	})
}

func (w *world) reject(ctx context.Context, r *request) error {
	return retry(ctx, "reject "+strconv.Itoa(r.N), func() error {
		runs, err := list[apiRun](ctx, w.api, "/api/v1/runs?thread="+url.QueryEscape(thread(r.N)))
		if err != nil {
			return err
		}
		if len(runs) != 1 {
			return fmt.Errorf("thread %s has %d runs", thread(r.N), len(runs))
		}
		as, err := list[apiApproval](ctx, w.api, "/api/v1/approvals?run_id="+url.QueryEscape(runs[0].ID))
		if err != nil {
			return err
		}
		if len(as) == 0 {
			return errors.New("no approval yet")
		}
		code, err := w.api.do(ctx, "POST", "/api/v1/approvals/"+url.PathEscape(as[0].ID)+"/decision",
			map[string]any{"action": "reject", "reason": "chaos says no"}, nil)
		if code == 409 || code == 410 {
			return nil // an earlier attempt landed (its answer was lost to a kill)
		}
		return err
	})
}

// settle waits until nothing is left to do: every run final, no approval
// pending, no delivery pending.
func (w *world) settle(ctx context.Context) error {
	var last string
	err := retry(ctx, "settle", func() error {
		runs, err := list[apiRun](ctx, w.api, "/api/v1/runs")
		if err != nil {
			return err
		}
		open := 0
		for _, r := range runs {
			if r.Status != "succeeded" && r.Status != "failed" && r.Status != "rejected" && r.Status != "cancelled" && r.Status != "interrupted" {
				open++
			}
		}
		pa, err := list[apiApproval](ctx, w.api, "/api/v1/approvals?status=pending")
		if err != nil {
			return err
		}
		pd, err := list[apiDelivery](ctx, w.api, "/api/v1/deliveries?status=pending")
		if err != nil {
			return err
		}
		if open+len(pa)+len(pd) > 0 {
			last = fmt.Sprintf("%d runs open, %d approvals pending, %d deliveries pending", open, len(pa), len(pd))
			return errors.New(last)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("did not settle: %s: %w", last, err)
	}
	return nil
}

// observe reads back everything the invariants need.
func (w *world) observe(ctx context.Context) (observed, error) {
	o := observed{Requests: w.reqs, Runs: map[int][]apiRun{}}
	for _, r := range w.reqs {
		runs, err := list[apiRun](ctx, w.api, "/api/v1/runs?thread="+url.QueryEscape(thread(r.N)))
		if err != nil {
			return o, err
		}
		for i, run := range runs {
			var full apiRun
			if _, err := w.api.do(ctx, "GET", "/api/v1/runs/"+url.PathEscape(run.ID), nil, &full); err != nil {
				return o, err
			}
			runs[i] = full
		}
		o.Runs[r.N] = runs
	}
	var err error
	if o.Approvals, err = list[apiApproval](ctx, w.api, "/api/v1/approvals"); err != nil {
		return o, err
	}
	for _, st := range []string{"pending", "sent", "dead"} {
		ds, err := list[apiDelivery](ctx, w.api, "/api/v1/deliveries?status="+st)
		if err != nil {
			return o, err
		}
		o.Deliveries = append(o.Deliveries, ds...)
	}
	var v struct {
		OK          bool  `json:"ok"`
		FirstBadSeq int64 `json:"first_bad_seq"`
	}
	if _, err := w.api.do(ctx, "GET", "/api/v1/audit/verify", nil, &v); err != nil {
		return o, err
	}
	o.AuditOK, o.AuditBad = v.OK, v.FirstBadSeq
	o.Messages, o.Calls, _, _, _ = w.fake.snapshot()
	return o, nil
}
