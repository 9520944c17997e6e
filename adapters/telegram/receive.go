package telegram

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/approvalref"
)

// secretHeader carries setWebhook's secret_token on every webhook request.
const secretHeader = "X-Telegram-Bot-Api-Secret-Token"

// handleTimeout bounds the work done for one update. It is detached from
// the webhook request, so Telegram closing the connection cannot cut a
// commit in half.
const handleTimeout = 50 * time.Second

// Routes implements core.HTTPReceiver: the webhook in webhook mode, nothing
// in polling mode.
func (a *Adapter) Routes() map[string]http.Handler {
	if a.cfg.Mode == ModePolling {
		return nil
	}
	return map[string]http.Handler{"POST " + WebhookPath: a.WebhookHandler()}
}

// WebhookHandler serves POST /telegram/webhook. A request is answered 200
// only after its update is durably recorded (or recognised as a duplicate,
// or ignored as not for us); a wrong or missing secret header is 401, a
// malformed or oversized body 400/413, with nothing recorded; a failure to
// record is 500, so Telegram delivers the update again.
func (a *Adapter) WebhookHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		got := r.Header.Get(secretHeader)
		if a.cfg.WebhookSecret == "" || subtle.ConstantTimeCompare([]byte(got), []byte(a.cfg.WebhookSecret)) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
		if err != nil {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "cannot read body", http.StatusBadRequest)
			return
		}
		u, err := parseUpdate(body)
		if err != nil {
			http.Error(w, "malformed update", http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), handleTimeout)
		defer cancel()
		if err := a.handleUpdate(ctx, body, u); err != nil {
			if errors.Is(err, core.ErrInvalidInput) {
				a.log.Warn("webhook update refused", "update_id", *u.UpdateID, "err", err)
				http.Error(w, core.IngressMessage(err), http.StatusBadRequest)
				return
			}
			a.log.Error("webhook update not recorded; Telegram will retry", "update_id", *u.UpdateID, "err", err)
			if core.IngressStatus(err) == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", core.StoreRetryAfter)
			}
			http.Error(w, "temporarily unavailable", max(core.IngressStatus(err), http.StatusInternalServerError))
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

// handleUpdate turns one update into at most one event for the sink and
// answers what must be answered (callbacks, prompts). It returns an error
// only when the update must be delivered again: the sink could not record
// it. Everything else — not for us, forged, refused — is done with.
func (a *Adapter) handleUpdate(ctx context.Context, raw []byte, u *tgUpdate) error {
	switch {
	case u.CallbackQuery != nil:
		return a.handleCallback(ctx, raw, u)
	case u.Message != nil:
		return a.handleMessage(ctx, raw, u)
	}
	return nil
}

func (a *Adapter) event(raw []byte, u *tgUpdate, from tgUser, k threadKey) core.ChannelEvent {
	return core.ChannelEvent{
		Channel:    ChannelName,
		EventID:    strconv.FormatInt(*u.UpdateID, 10),
		Actor:      core.Actor{ID: ChannelName + ":" + strconv.FormatInt(from.ID, 10), Name: from.displayName()},
		Thread:     core.Thread{Channel: ChannelName, Key: k.String()},
		Raw:        json.RawMessage(raw),
		ReceivedAt: a.now().UTC(),
	}
}

func (a *Adapter) handleMessage(ctx context.Context, raw []byte, u *tgUpdate) error {
	m := u.Message
	if m.From == nil || m.From.IsBot {
		return nil // channel posts, anonymous admins, other bots
	}
	var replyTo *core.MessageRef
	if p := m.ReplyToMessage; p != nil && p.From != nil && p.From.ID == a.botID {
		if ref, ok := promptRef(p.Text); ok {
			return a.handlePromptReply(ctx, raw, u, ref)
		}
		// A reply to one of the bot's messages continues its conversation
		// (the engine finds the thread it went to) and addresses the bot.
		replyTo = &core.MessageRef{Channel: ChannelName, ID: messageRef(m.Chat.ID, p.MessageID)}
	}
	name, err := a.botUsername(ctx)
	if err != nil {
		return fmt.Errorf("telegram: learn bot username: %w", err)
	}
	text, files, ok := a.requestOf(m, name)
	if !ok && replyTo != nil {
		// A reply to the bot addresses it: its text (or a file's caption),
		// or only files.
		body := strings.TrimSpace(m.Text)
		if body == "" {
			body = strings.TrimSpace(m.Caption)
		}
		text, ok = body, body != "" || len(files) > 0
	}
	if !ok {
		return nil
	}
	ev := a.event(raw, u, *m.From, keyOf(m))
	ev.Text, ev.ReplyTo, ev.Attachments = text, replyTo, files
	if _, err := a.sink.HandleEvent(ctx, ev); err != nil {
		return fmt.Errorf("telegram: record message %s: %w", ev.EventID, err) // ErrInvalidInput: skipped by the poller, 400 on the webhook
	}
	return nil
}

var refRE = regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(refLabel) + `([A-Za-z0-9_.\-]{4,64})\s*$`)

// promptRef finds the signed reference in a prompt's text, as quoted back
// in the reply_to_message of the approver's answer.
func promptRef(text string) (string, bool) {
	m := refRE.FindStringSubmatch(text)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// handleCallback answers every button press, whatever becomes of it: the
// client shows a spinner until answerCallbackQuery. The only press left
// unanswered is one the sink failed to record; it comes back with the
// update's redelivery and is answered then.
func (a *Adapter) handleCallback(ctx context.Context, raw []byte, u *tgUpdate) error {
	q := u.CallbackQuery
	answer := func(text string, alert bool) {
		if err := a.api.call(ctx, "answerCallbackQuery", map[string]any{
			"callback_query_id": q.ID, "text": cutUTF16(text, 190), "show_alert": alert,
		}, nil); err != nil {
			a.log.Warn("answer callback query", "update_id", *u.UpdateID, "err", err)
		}
	}
	p, err := a.buttons.Decode(q.Data)
	if err != nil {
		a.log.Warn("refused button payload", "update_id", *u.UpdateID, "user", q.From.ID, "err", err)
		answer("⛔ This button is not valid (forged, or from an older version of this bot).", true)
		return nil
	}
	var k threadKey
	if q.Message != nil {
		k = keyOf(q.Message)
	}
	switch p.Action {
	case approvalref.Answer, approvalref.Skip:
		ev := a.event(raw, u, q.From, k)
		ev.Answer = &core.AnswerEvent{RunID: p.RunID, ActionID: core.AskActionID(p.Step), Choice: p.Choice, Skip: p.Action == approvalref.Skip}
		_, err := a.sink.HandleEvent(ctx, ev)
		var de *core.DecisionError
		switch {
		case errors.As(err, &de):
			answer(core.RefusalText(de), true)
		case err != nil:
			return fmt.Errorf("telegram: record answer %s: %w", ev.EventID, err)
		default:
			answer(core.AnsweredText, false)
		}
		return nil
	case approvalref.Approve, approvalref.ApproveAll:
		ev := a.event(raw, u, q.From, k)
		ev.Decision = &core.Decision{ApprovalID: p.ApprovalID, Action: p.Action.Decision()}
		rc, err := a.sink.HandleEvent(ctx, ev)
		var de *core.DecisionError
		switch {
		case errors.As(err, &de):
			answer(core.RefusalText(de), true)
			return nil
		case err != nil:
			return fmt.Errorf("telegram: record approval %s: %w", ev.EventID, err)
		}
		answer(core.AckText(rc), false)
		return nil
	default: // reject or edit: ask for the text first
		c, err := a.cards.CardByApproval(ctx, p.ApprovalID)
		switch {
		case errors.Is(err, core.ErrNotFound):
			answer("❓ Unknown approval.", true)
			return nil
		case err != nil:
			return fmt.Errorf("telegram: card %s: %w", p.ApprovalID, err)
		case !c.Pending():
			// Closed (decided or expired): the engine refuses the attempt
			// and audits it, like a late Approve press.
			line := c.OutcomeLine()
			if line == "" {
				line = "This approval is " + string(c.Status)
			}
			return a.refusePress(ctx, raw, u, q.From, k, p, "ℹ️ "+line+".", answer)
		case len(c.Eligible) > 0 && !contains(c.Eligible, ChannelName+":"+strconv.FormatInt(q.From.ID, 10)):
			// Record the attempt through the engine, so the refusal is
			// audited like any other, and never send the prompt.
			return a.refusePress(ctx, raw, u, q.From, k, p,
				core.RefusalText(&core.DecisionError{Code: core.DecisionNotApprover}), answer)
		case q.Message == nil:
			answer("This card cannot take a reply here; decide in the console.", true)
			return nil
		}
		if err := a.sendPrompt(ctx, k, q.From, c, p, ""); err != nil {
			var ae *APIError
			if errors.As(err, &ae) && ae.Code == http.StatusTooManyRequests {
				answer("⏳ Telegram is rate limiting this bot; press again in "+fmtWait(ae.RetryAfter)+".", true)
			} else {
				a.log.Error("send prompt", "approval", p.ApprovalID, "err", err)
				answer("⚠️ Could not open the prompt; press again.", true)
			}
			return nil
		}
		if p.Action == approvalref.Reject {
			answer("✍️ Reply to my message with your feedback.", false)
		} else {
			answer("✍️ Reply to my message with the new arguments.", false)
		}
		return nil
	}
}

// refusePress records a Reject or Edit press the card already shows will
// be refused (approval closed, or clicker not eligible) as a decision
// attempt, so the engine refuses it and audits the refusal exactly as it
// does a refused Approve press, then answers the press with the refusal.
// The attempt carries no reason or arguments: the prompt is never sent.
// When the engine gives no refusal (a redelivered update it already
// recorded), the press is answered with fallback.
func (a *Adapter) refusePress(ctx context.Context, raw []byte, u *tgUpdate, from tgUser, k threadKey, p approvalref.Ref, fallback string, answer func(string, bool)) error {
	ev := a.event(raw, u, from, k)
	ev.Decision = &core.Decision{ApprovalID: p.ApprovalID, Action: p.Action.Decision()}
	_, err := a.sink.HandleEvent(ctx, ev)
	var de *core.DecisionError
	switch {
	case errors.As(err, &de):
		answer(core.RefusalText(de), true)
	case err != nil:
		return fmt.Errorf("telegram: record refused press %s: %w", ev.EventID, err)
	default:
		answer(fallback, true)
	}
	return nil
}

// sendPrompt posts a force_reply prompt in the card's chat and topic,
// answering the message at k, carrying the signed reference in its text.
func (a *Adapter) sendPrompt(ctx context.Context, k threadKey, who tgUser, c core.Card, p approvalref.Ref, problem string) error {
	ref, err := a.buttons.Encode(p)
	if err != nil {
		return err
	}
	ph := "Your feedback"
	if p.Action == approvalref.Edit {
		ph = "key=value lines or JSON"
	}
	_, err = a.sendMessage(ctx, k, promptHTML(who, c, p.Action, ref, problem),
		forceReply{ForceReply: true, Selective: true, Placeholder: ph})
	return err
}

// handlePromptReply turns an answer to a Reject or Edit prompt into a
// decision. Invalid arguments get the validator's message and a new prompt.
func (a *Adapter) handlePromptReply(ctx context.Context, raw []byte, u *tgUpdate, ref string) error {
	m := u.Message
	k := keyOf(m)
	p, err := a.buttons.Decode(ref)
	if err != nil || p.Action == approvalref.Approve {
		a.log.Warn("refused prompt reference", "update_id", *u.UpdateID, "user", m.From.ID, "err", err)
		a.notify(ctx, k, "⛔ That prompt is not valid (forged, or from an older version of this bot).")
		return nil
	}
	reprompt := func(problem string) error {
		c, err := a.cards.CardByApproval(ctx, p.ApprovalID)
		if err != nil {
			if errors.Is(err, core.ErrNotFound) {
				a.notify(ctx, k, "❓ Unknown approval.")
				return nil
			}
			return fmt.Errorf("telegram: card %s: %w", p.ApprovalID, err)
		}
		if err := a.sendPrompt(ctx, k, *m.From, c, p, problem); err != nil {
			a.log.Error("send prompt", "approval", p.ApprovalID, "err", err)
		}
		return nil
	}
	d := &core.Decision{ApprovalID: p.ApprovalID}
	if p.Action == approvalref.Reject {
		d.Action, d.Reason = approvals.ActionReject, strings.TrimSpace(m.Text)
		if d.Reason == "" {
			return reprompt("Please give a reason: the run receives it as feedback.")
		}
	} else {
		args, perr := parseArgs(m.Text)
		if perr != nil {
			return reprompt("Arguments not accepted: " + perr.Error())
		}
		d.Action, d.Args = approvals.ActionEdit, args
	}
	ev := a.event(raw, u, *m.From, k)
	ev.Decision = d
	_, err = a.sink.HandleEvent(ctx, ev)
	var de *core.DecisionError
	switch {
	case errors.As(err, &de) && de.Code == core.DecisionInvalidArgs:
		return reprompt("Arguments not accepted: " + de.Message)
	case errors.As(err, &de):
		a.notify(ctx, k, core.RefusalText(de))
		return nil
	case err != nil:
		return fmt.Errorf("telegram: record %s decision %s: %w", d.Action, ev.EventID, err)
	}
	return nil
}

// notify sends a short plain answer outside the outbox (a refusal, which
// nothing needs to remember); failures are logged, not retried.
func (a *Adapter) notify(ctx context.Context, k threadKey, text string) {
	if _, err := a.sendMessage(ctx, k, esc(text), nil); err != nil {
		a.log.Warn("send notice", "chat", k.Chat, "err", err)
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
