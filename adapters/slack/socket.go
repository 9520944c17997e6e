package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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

// consume handles the client's events until ctx ends.
func (a *Adapter) consume(ctx context.Context, smc *socketmode.Client) {
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
			ans := a.handleSocketRequest(ctx, evt.Request.Type, evt.Request.Payload)
			if ans.status >= http.StatusInternalServerError {
				a.log.WarnContext(ctx, "slack: socket mode envelope not acked; Slack will redeliver", "type", evt.Request.Type)
				continue
			}
			if err := smc.AckCtx(ctx, evt.Request.EnvelopeID, ans.body); err != nil {
				a.log.WarnContext(ctx, "slack: socket mode ack", "err", err)
			}
		}
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
