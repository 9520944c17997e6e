package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
	"github.com/opsgate/opsgate/core/pace"
)

// deliver sends one claimed message from its first unsent chunk and records
// the outcome. When ctx ends (shutdown, lease lost) it stops without
// recording anything: the message stays leased until its lease lapses and
// the next owner resumes it at the first chunk not recorded as sent.
func (w *Worker) deliver(ctx context.Context, d *core.Delivery) {
	log := w.log.With("outbox_id", d.ID, "thread", d.Thread.String(), "kind", string(d.Kind))
	outs, err := w.prepare(ctx, d)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		w.fail(ctx, d, err, 0, log)
		return
	}
	keys := w.keys(d.Thread)
	last, oneStep := w.o.Store.(lastChunkRecorder)
	for i := d.ChunksSent; i < len(outs); i++ {
		ref, retryAfter, err := w.send(ctx, keys, outs[i])
		if err != nil && (d.Kind == core.KindCardUpdate || d.Kind == core.KindQuestionUpdate) && outs[i].Edit != nil && errors.Is(err, core.ErrNotSupported) {
			// The platform cannot edit: the outcome goes as a new message.
			outs[i].Edit = nil
			ref, retryAfter, err = w.send(ctx, keys, outs[i])
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.fail(ctx, d, err, retryAfter, log)
			return
		}
		if oneStep && i == len(outs)-1 {
			if err := w.record(ctx, func(ctx context.Context) error {
				return last.OutboxLastChunkSent(ctx, d.ID, w.o.Owner, i, ref, w.o.Now())
			}); err != nil {
				if ctx.Err() == nil {
					log.Error("delivery: record last chunk sent", "chunk", i, "err", err)
				}
				return
			}
			w.m.chunks.WithLabelValues(w.channel).Inc()
			w.m.sent.WithLabelValues(w.channel).Inc()
			return
		}
		if err := w.record(ctx, func(ctx context.Context) error {
			return w.o.Store.OutboxChunkSent(ctx, d.ID, w.o.Owner, i, ref, w.o.Now())
		}); err != nil {
			// The chunk left but is not recorded: the next attempt may
			// send it again. Nothing better is possible without the store.
			if ctx.Err() == nil {
				log.Error("delivery: record chunk sent", "chunk", i, "err", err)
			}
			return
		}
		w.m.chunks.WithLabelValues(w.channel).Inc()
	}
	if err := w.record(ctx, func(ctx context.Context) error {
		return w.o.Store.OutboxDone(ctx, d.ID, w.o.Owner, w.o.Now())
	}); err != nil {
		if ctx.Err() == nil {
			log.Error("delivery: record done", "err", err)
		}
		return
	}
	w.m.sent.WithLabelValues(w.channel).Inc()
}

// lastChunkRecorder is an optional store capability: record a message's
// last chunk and mark the message sent in one step (store/sqlstore: one
// statement), exactly as OutboxChunkSent followed by OutboxDone.
type lastChunkRecorder interface {
	OutboxLastChunkSent(ctx context.Context, id, owner string, chunk int, ref core.MessageRef, now time.Time) error
}

// prepare turns a message into the Outbounds to send: a reply rendered and
// cut to the platform's limit, or a card rendered from the approval's state
// now (a card queued before its approval was decided shows the outcome).
func (w *Worker) prepare(ctx context.Context, d *core.Delivery) ([]core.Outbound, error) {
	key := func(i int) string { return d.ID + "/" + strconv.Itoa(i) }
	switch d.Kind {
	case core.KindReply, "":
		outs := w.chunks(d, core.KindReply)
		if qr, ok := w.o.Platform.(core.QuestionRenderer); ok && qr.RendersQuestions() && w.o.Questions != nil && d.RunID != "" && len(outs) > 0 {
			q, err := w.o.Questions.QuestionForMessage(ctx, d.RunID, d.ID)
			if err != nil {
				return nil, fmt.Errorf("question of run %s: %w", d.RunID, err)
			}
			outs[len(outs)-1].Question = q
		}
		return outs, nil
	case core.KindStream, core.KindStreamEnd, core.KindProgress:
		return w.prepareStream(ctx, d)
	case core.KindQuestionUpdate:
		return w.prepareQuestionUpdate(ctx, d)
	case core.KindCard, core.KindCardUpdate:
		card, err := w.o.Cards.CardByApproval(ctx, d.ApprovalID)
		if err != nil {
			if errors.Is(err, core.ErrNotFound) {
				return nil, &core.PermanentError{Err: fmt.Errorf("card for approval %q: %w", d.ApprovalID, err)}
			}
			return nil, fmt.Errorf("card for approval %q: %w", d.ApprovalID, err)
		}
		out := core.Outbound{Key: key(0), Thread: d.Thread, Kind: d.Kind, Text: card.PlainText(), Part: 1, Parts: 1, Card: &card}
		if d.Kind == core.KindCardUpdate {
			// A batch card is edited as one: its ref is the lead approval's.
			ref, err := w.o.Store.OutboxCardRef(ctx, card.ApprovalID, d.Thread)
			switch {
			case err == nil:
				out.Edit = ref
			case errors.Is(err, core.ErrNotFound):
				// The card never reached this thread: send the outcome new.
			default:
				return nil, fmt.Errorf("card ref for approval %q: %w", d.ApprovalID, err)
			}
		}
		return []core.Outbound{out}, nil
	}
	return nil, &core.PermanentError{Err: fmt.Errorf("unknown message kind %q", d.Kind)}
}

// prepareStream turns an agent's streamed text into an edit of the message
// the run's first streamed text went out as (or that first message), and
// the final answer into reply chunks whose first edits it; a run's status
// (KindProgress) likewise edits its first status message. A platform that
// cannot edit replies gets no streamed text and no status, and the final
// answer as a plain reply.
func (w *Worker) prepareStream(ctx context.Context, d *core.Delivery) ([]core.Outbound, error) {
	re, ok := w.o.Platform.(core.ReplyEditor)
	editor := ok && re.EditsReplies()
	if !editor && d.Kind != core.KindStreamEnd {
		return nil, nil // nothing to send: done
	}
	refKind := core.KindStream
	if d.Kind == core.KindProgress {
		refKind = core.KindProgress
	}
	var ref *core.MessageRef
	if rs, ok := w.o.Store.(core.OutboxRefStore); ok && editor && d.Replaces != "" {
		// The segment's first message (which names itself while unsent).
		refs, err := rs.OutboxRefs(ctx, d.Replaces)
		switch {
		case err == nil && len(refs) > 0:
			ref = &refs[0]
		case err != nil && !errors.Is(err, core.ErrNotFound):
			return nil, fmt.Errorf("streamed message %q of run %s: %w", d.Replaces, d.RunID, err)
		}
	} else if rs, ok := w.o.Store.(core.StreamRefStore); ok && editor {
		r, err := rs.OutboxStreamRef(ctx, d.RunID, d.Thread, refKind)
		switch {
		case err == nil:
			ref = r
		case !errors.Is(err, core.ErrNotFound):
			return nil, fmt.Errorf("streamed message of run %s: %w", d.RunID, err)
		}
	}
	outs := w.chunks(d, core.KindReply)
	if len(outs) == 0 {
		return nil, nil
	}
	if d.Kind == core.KindStream || d.Kind == core.KindProgress {
		// Only what fits one message streams; the end sends the rest.
		out := outs[0]
		out.Parts, out.Edit = 1, ref
		return []core.Outbound{out}, nil
	}
	outs[0].Edit = ref
	return outs, nil
}

// prepareQuestionUpdate renders an answered question's new text like a
// reply; its first chunk edits the question's message (the last chunk the
// question went out as, which carried its buttons) when the store knows
// it, and is sent new otherwise.
func (w *Worker) prepareQuestionUpdate(ctx context.Context, d *core.Delivery) ([]core.Outbound, error) {
	outs := w.chunks(d, core.KindQuestionUpdate)
	rs, ok := w.o.Store.(core.OutboxRefStore)
	if len(outs) == 0 || !ok || d.Replaces == "" {
		return outs, nil
	}
	refs, err := rs.OutboxRefs(ctx, d.Replaces)
	switch {
	case err == nil && len(refs) > 0:
		outs[0].Edit = &refs[len(refs)-1]
	case err != nil && !errors.Is(err, core.ErrNotFound):
		return nil, fmt.Errorf("question message %q: %w", d.Replaces, err)
	}
	return outs, nil
}

// chunks renders d's text in the platform's format and cuts it to its
// limit: the Outbounds of kind, numbered, keyed by outbox id and chunk.
func (w *Worker) chunks(d *core.Delivery, kind core.MessageKind) []core.Outbound {
	f := w.o.Platform.Format()
	text := d.Text
	if f.Render != nil {
		text = f.Render(text)
	}
	parts := chunk.Split(text, chunk.Options{Limit: f.Limit, Unit: f.Unit, Syntax: f.Syntax, Markers: f.Markers})
	outs := make([]core.Outbound, len(parts))
	for i, p := range parts {
		outs[i] = core.Outbound{Key: d.ID + "/" + strconv.Itoa(i), Thread: d.Thread, Kind: kind, Text: p, Part: i + 1, Parts: len(parts)}
	}
	return outs
}

// keys names the buckets a message to thread draws from.
func (w *Worker) keys(t core.Thread) pace.Keys {
	b := w.o.Platform.Buckets(t)
	return pace.Keys{Conversation: b.Conversation, Group: b.Group, Account: w.channel}
}

// send waits for a token and sends one Outbound. A 429 pauses the bucket the
// platform named for its Retry-After and the same Outbound is sent again
// once every bucket grants — never earlier. After MaxRateLimited 429s in a
// row it gives up with the last one, and retryAfter says how long the
// platform asked to wait.
func (w *Worker) send(ctx context.Context, keys pace.Keys, out core.Outbound) (ref core.MessageRef, retryAfter time.Duration, err error) {
	for limited := 0; ; limited++ {
		if err := w.lim.Wait(ctx, keys); err != nil {
			return core.MessageRef{}, 0, err
		}
		if err := ctx.Err(); err != nil { // Wait grants at once when nothing limits
			return core.MessageRef{}, 0, err
		}
		ref, err = w.sendOnce(ctx, out)
		if err == nil {
			return ref, 0, nil
		}
		var rl *core.RateLimitError
		if !errors.As(err, &rl) {
			return core.MessageRef{}, 0, err
		}
		// The pause is kept even when ctx ended while the request was out
		// (shutdown, lease lost): the hand-over passes it to the next
		// holder, which must not send to that bucket before it ends.
		w.m.limited.WithLabelValues(w.channel).Inc()
		d := rl.RetryAfter
		if d <= 0 {
			d = time.Second // a 429 without Retry-After: wait a conservative second
		}
		scope, key := w.scopeOf(rl.Scope, keys)
		w.lim.Pause(scope, key, d)
		select {
		case w.paused <- struct{}{}:
		default:
		}
		if ctx.Err() != nil {
			return core.MessageRef{}, 0, err
		}
		if limited+1 >= w.o.MaxRateLimited {
			return core.MessageRef{}, d, err
		}
	}
}

// sendOnce calls Platform.Send. Once a send has started it is not cut off
// when ctx ends (shutdown, lease lost): a request the platform processed
// but whose answer we dropped would be sent again by the next owner. It is
// bounded by SendTimeout instead. (A send whose answer is lost all the same
// — a timeout, a crash — is retried: delivery is at least once, with
// Outbound.Key for platforms that deduplicate.)
func (w *Worker) sendOnce(ctx context.Context, out core.Outbound) (core.MessageRef, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.o.SendTimeout)
	defer cancel()
	return w.o.Platform.Send(sctx, out)
}

// scopeOf maps a RateLimitError's Scope to the limiter bucket to pause.
// A scope the pipeline has no bucket for (a platform route key) pauses the
// conversation: the message is held back no less than the platform asked.
func (w *Worker) scopeOf(s string, keys pace.Keys) (pace.Scope, string) {
	switch s {
	case "group":
		if keys.Group != "" {
			return pace.Group, keys.Group
		}
	case "global", "account":
		return pace.Account, keys.Account
	}
	if keys.Conversation == "" {
		return pace.Account, keys.Account
	}
	return pace.Conversation, keys.Conversation
}

// fail records a failed attempt: dead at once for a permanent error or once
// MaxAttempts are spent, otherwise a retry after capped exponential backoff
// (and never before the platform's Retry-After).
func (w *Worker) fail(ctx context.Context, d *core.Delivery, err error, retryAfter time.Duration, log *slog.Logger) {
	var perm *core.PermanentError
	dead := errors.As(err, &perm) || errors.Is(err, core.ErrNotSupported) || d.Attempts+1 >= w.o.MaxAttempts
	now := w.o.Now()
	at := now.Add(max(w.o.Backoff.Backoff(d.Attempts), retryAfter))
	if rerr := w.record(ctx, func(ctx context.Context) error {
		return w.o.Store.OutboxRetry(ctx, core.OutboxRetryParams{
			ID: d.ID, Owner: w.o.Owner, Error: err.Error(), RetryAt: at, Dead: dead, Now: now,
		})
	}); rerr != nil {
		if ctx.Err() == nil {
			log.Warn("delivery: record failed attempt", "err", rerr, "send_err", err)
		}
		return
	}
	if dead {
		w.m.dead.WithLabelValues(w.channel).Inc()
		log.Warn("delivery: dead-lettered", "attempts", d.Attempts+1, "err", err)
		return
	}
	w.noteRetry(at)
	log.Warn("delivery: send failed; will retry", "attempt", d.Attempts+1, "retry_at", at, "err", err)
}

// record runs a store write, retrying briefly on errors other than a lost
// lease (ErrConflict) or not found: a chunk that reached the platform must
// be recorded, or it is sent again. It outlives ctx by a few seconds for
// the same reason: a shutdown that lands between a send and its record
// would otherwise duplicate the chunk on resume (the store's owner guard
// still refuses the write if another replica took the message over).
func (w *Worker) record(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var err error
	for i := range 5 {
		if err = f(ctx); err == nil || errors.Is(err, core.ErrConflict) || errors.Is(err, core.ErrNotFound) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(50<<i) * time.Millisecond):
		}
	}
	return err
}
