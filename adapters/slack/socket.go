package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/slack-go/slack/socketmode"
)

// Run receives events over Socket Mode until ctx ends: the same
// normalization, dedup and answers as the HTTP endpoints, with each
// envelope acknowledged after its event is recorded (an envelope whose
// recording failed is not acked, so Slack redelivers it). A lost
// connection is reopened with exponential backoff. In ModeHTTP it returns
// at once: the HTTP handlers receive everything.
func (a *Adapter) Run(ctx context.Context) error {
	if a.cfg.Mode != ModeSocket {
		return nil
	}
	smc := socketmode.New(a.api)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.consume(ctx, smc)
	}()
	backoff := time.Second
	for {
		start := a.now()
		err := smc.RunContext(ctx)
		if ctx.Err() != nil {
			<-done
			return nil
		}
		if a.now().Sub(start) > time.Minute {
			backoff = time.Second // it ran a while: a fresh failure
		}
		a.log.WarnContext(ctx, "slack: socket mode connection ended; reconnecting", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			<-done
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Minute)
	}
}

// maxEnvelopes bounds how many Socket Mode envelopes are handled at once;
// each is bounded by AckBudget, so this caps memory, not latency.
const maxEnvelopes = 64

// ackTimeout bounds handing an ack to the websocket writer.
const ackTimeout = time.Second

// consume handles the client's events until ctx ends. Each envelope is
// handled in a goroutine of its own and acked as soon as its event is
// recorded, so one that waits on a slow Slack (a root post, views.open)
// never delays the acks of the others; consume returns once they are done.
func (a *Adapter) consume(ctx context.Context, smc *socketmode.Client) {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, maxEnvelopes)
	for {
		select {
		case <-ctx.Done():
			return
		case evt := <-smc.Events:
			if evt.Request == nil || evt.Request.EnvelopeID == "" {
				if evt.Type == socketmode.EventTypeInvalidAuth {
					a.log.ErrorContext(ctx, "slack: socket mode: invalid app token")
				}
				continue
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			req := *evt.Request
			wg.Add(1)
			a.bg.Go(func() {
				defer wg.Done()
				defer func() { <-slots }()
				a.serveEnvelope(ctx, smc, req)
			})
		}
	}
}

// serveEnvelope handles one envelope within AckBudget and acks it, unless
// handling failed (5xx), in which case Slack redelivers it.
func (a *Adapter) serveEnvelope(ctx context.Context, smc *socketmode.Client, req socketmode.Request) {
	hctx, cancel := context.WithTimeout(ctx, a.cfg.AckBudget)
	ans := a.handleSocketRequest(hctx, req.Type, req.Payload)
	cancel()
	if ans.status >= http.StatusInternalServerError {
		a.log.WarnContext(ctx, "slack: socket mode envelope not acked; Slack will redeliver", "type", req.Type)
		return
	}
	actx, cancel := context.WithTimeout(ctx, ackTimeout)
	defer cancel()
	if err := smc.AckCtx(actx, req.EnvelopeID, ans.body); err != nil {
		a.log.WarnContext(ctx, "slack: socket mode ack", "type", req.Type, "err", err)
	}
}

// handleSocketRequest dispatches one envelope's payload to the handler its
// HTTP twin uses. Malformed payloads answer 400 and are acked (a redelivery
// would be just as malformed).
func (a *Adapter) handleSocketRequest(ctx context.Context, typ string, payload []byte) answer {
	bad := func(err error) answer {
		a.log.WarnContext(ctx, "slack: socket mode: refused payload", "type", typ, "err", err)
		return answer{status: http.StatusBadRequest}
	}
	switch typ {
	case socketmode.RequestTypeEventsAPI:
		env, err := parseEnvelope(payload)
		if err != nil {
			return bad(err)
		}
		return a.handleEnvelope(ctx, env, payload)
	case socketmode.RequestTypeSlashCommands:
		c, err := parseSlashJSON(payload)
		if err != nil {
			return bad(err)
		}
		return a.handleSlash(ctx, c)
	case socketmode.RequestTypeInteractive:
		in, err := parseInteraction(payload)
		if err != nil {
			return bad(err)
		}
		return a.handleInteraction(ctx, in, payload)
	}
	return bad(fmt.Errorf("%w: unknown envelope type %q", errors.ErrUnsupported, typ))
}
