package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/opsgate/opsgate/core/pace"

	"github.com/opsgate/opsgate/core"
)

// allowedUpdates are the update kinds the adapter reads.
var allowedUpdates = []string{"message", "callback_query"}

// Run receives updates until ctx ends. In webhook mode it registers the
// webhook (setWebhook with PublicURL+WebhookPath and the secret) and then
// waits; updates arrive through WebhookHandler. In polling mode it removes
// any webhook (getUpdates is refused while one is set) and long-polls.
// Failures are retried with capped backoff, a 429 after its retry_after;
// Run returns nil when ctx ends.
func (a *Adapter) Run(ctx context.Context) error {
	bo := pace.BackoffPolicy{Base: time.Second, Cap: 30 * time.Second}
	retry := func(what string, f func() error) bool {
		for attempt := 0; ; attempt++ {
			err := f()
			if err == nil {
				return true
			}
			if ctx.Err() != nil {
				return false
			}
			wait := bo.Backoff(attempt)
			var ae *APIError
			if errors.As(err, &ae) && ae.RetryAfter > 0 {
				wait = ae.RetryAfter
			}
			a.log.Error(what+" failed; retrying", "err", err, "in", wait)
			if sleep(ctx, wait) != nil {
				return false
			}
		}
	}
	if !retry("getMe", func() error { _, err := a.botUsername(ctx); return err }) {
		return nil
	}
	if a.cfg.Mode == ModeWebhook {
		if !retry("setWebhook", func() error { return a.RegisterWebhook(ctx) }) {
			return nil
		}
		a.log.Info("webhook registered", "url", a.cfg.webhookURL())
		<-ctx.Done()
		return nil
	}
	if !retry("deleteWebhook", func() error {
		return a.api.call(ctx, "deleteWebhook", map[string]any{"drop_pending_updates": false}, nil)
	}) {
		return nil
	}
	a.log.Info("polling for updates")
	a.poll(ctx, bo)
	return nil
}

// RegisterWebhook tells Telegram where to POST updates and which secret to
// send with them.
func (a *Adapter) RegisterWebhook(ctx context.Context) error {
	return a.api.call(ctx, "setWebhook", map[string]any{
		"url": a.cfg.webhookURL(), "secret_token": a.cfg.WebhookSecret,
		"allowed_updates": allowedUpdates, "drop_pending_updates": false,
	}, nil)
}

// poll is the getUpdates loop. Telegram forgets updates below the offset
// we send, so the offset moves past an update only after the sink recorded
// it: a crash anywhere replays from the first unrecorded update, and the
// sink's dedup on update_id absorbs the replay. Updates are not filtered by
// "greater than the last one": ids are Telegram's, and dedup is by id.
func (a *Adapter) poll(ctx context.Context, bo pace.BackoffPolicy) {
	var offset int64
	fails := 0
	for ctx.Err() == nil {
		raws, err := a.getUpdates(ctx, offset)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			wait := bo.Backoff(fails)
			fails++
			var ae *APIError
			if errors.As(err, &ae) {
				if ae.RetryAfter > 0 {
					wait = ae.RetryAfter
				}
				if ae.Code == http.StatusConflict {
					a.log.Error("getUpdates conflict: another poller or a webhook is active for this bot", "err", err)
				}
			}
			a.log.Warn("getUpdates failed", "err", err, "retry_in", wait)
			if sleep(ctx, wait) != nil {
				return
			}
			continue
		}
		fails = 0
		for _, raw := range raws {
			next, ok := a.pollOne(ctx, raw, bo)
			if !ok {
				return
			}
			if next > offset {
				offset = next
			}
		}
	}
}

// pollOne records one polled update, retrying until the sink accepts it or
// ctx ends, and returns the offset that confirms it.
func (a *Adapter) pollOne(ctx context.Context, raw json.RawMessage, bo pace.BackoffPolicy) (int64, bool) {
	u, err := parseUpdate(raw)
	if err != nil {
		var probe struct {
			UpdateID int64 `json:"update_id"`
		}
		_ = json.Unmarshal(raw, &probe)
		a.log.Error("skipping malformed update", "update_id", probe.UpdateID, "err", err)
		if probe.UpdateID > 0 {
			return probe.UpdateID + 1, true
		}
		return 0, true
	}
	for attempt := 0; ; attempt++ {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handleTimeout)
		err := a.handleUpdate(hctx, raw, u)
		cancel()
		if err == nil {
			return *u.UpdateID + 1, true
		}
		if errors.Is(err, core.ErrInvalidInput) {
			a.log.Error("skipping refused update", "update_id", *u.UpdateID, "err", err)
			return *u.UpdateID + 1, true
		}
		wait := bo.Backoff(attempt)
		a.log.Error("update not recorded; retrying before confirming it", "update_id", *u.UpdateID, "err", err, "retry_in", wait)
		if sleep(ctx, wait) != nil {
			return 0, false
		}
	}
}

func (a *Adapter) getUpdates(ctx context.Context, offset int64) ([]json.RawMessage, error) {
	var out []json.RawMessage
	p := map[string]any{
		"timeout": int(a.cfg.PollTimeout / time.Second), "allowed_updates": allowedUpdates,
	}
	if offset > 0 {
		p["offset"] = offset
	}
	if err := a.api.call(ctx, "getUpdates", p, &out); err != nil {
		return nil, fmt.Errorf("telegram: poll: %w", err)
	}
	return out, nil
}
