package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// interaction holds the fields of block_actions and view_submission
// payloads that opsgate reads.
type interaction struct {
	Type      string `json:"type"`
	TriggerID string `json:"trigger_id"`
	Team      struct {
		ID string `json:"id"`
	} `json:"team"`
	User struct {
		ID       string `json:"id"`
		Username string `json:"username"`
		TeamID   string `json:"team_id"`
	} `json:"user"`
	Channel struct {
		ID string `json:"id"`
	} `json:"channel"`
	Container struct {
		ChannelID string `json:"channel_id"`
		MessageTS string `json:"message_ts"`
		ThreadTS  string `json:"thread_ts"`
	} `json:"container"`
	Message struct {
		TS       string `json:"ts"`
		ThreadTS string `json:"thread_ts"`
	} `json:"message"`
	Actions []blockAction `json:"actions"`
	View    struct {
		ID              string `json:"id"`
		CallbackID      string `json:"callback_id"`
		PrivateMetadata string `json:"private_metadata"`
		Hash            string `json:"hash"`
		State           struct {
			Values map[string]map[string]struct {
				Type  string  `json:"type"`
				Value *string `json:"value"`
			} `json:"values"`
		} `json:"state"`
	} `json:"view"`
}

// blockAction is one clicked element of a block_actions payload.
type blockAction struct {
	ActionID string `json:"action_id"`
	BlockID  string `json:"block_id"`
	Value    string `json:"value"`
}

// parseInteractionForm reads the form Slack POSTs to /slack/interactivity:
// one field, payload, holding JSON.
func parseInteractionForm(body []byte) (interaction, []byte, error) {
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return interaction{}, nil, fmt.Errorf("%w: interaction form: %w", ErrMalformed, err)
	}
	p := v.Get("payload")
	if p == "" {
		return interaction{}, nil, fmt.Errorf("%w: interaction form without payload", ErrMalformed)
	}
	in, err := parseInteraction([]byte(p))
	return in, []byte(p), err
}

// parseInteraction decodes an interaction payload (the form's payload
// field, or a Socket Mode interactive envelope's payload).
func parseInteraction(payload []byte) (interaction, error) {
	var in interaction
	if err := json.Unmarshal(payload, &in); err != nil {
		return in, fmt.Errorf("%w: interaction payload: %w", ErrMalformed, err)
	}
	if in.Type == "" || in.User.ID == "" {
		return in, fmt.Errorf("%w: interaction without type or user", ErrMalformed)
	}
	return in, nil
}

func (in interaction) team() string {
	if in.Team.ID != "" {
		return in.Team.ID
	}
	return in.User.TeamID
}

// Answers to payloads that are valid Slack payloads but whose opsgate
// reference is forged, tampered with or from an older key. They carry no
// trustworthy approval id, so nothing is recorded or audited for them.
const (
	notValidButton = "⛔ This button is not valid (forged, or from an older version of this bot)."
	notValidForm   = "⛔ This form is not valid (forged, or from an older version of this bot)."
)

// handleInteraction answers a button click or a modal submission, all of
// it within AckBudget.
func (a *Adapter) handleInteraction(ctx context.Context, in interaction, raw []byte) answer {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.AckBudget)
	defer cancel()
	switch in.Type {
	case "block_actions":
		return a.handleBlockAction(ctx, in, raw)
	case "view_submission":
		return a.handleViewSubmission(ctx, in, raw)
	}
	// view_closed, shortcuts and the like: nothing to do.
	return answerOK
}

// handleBlockAction handles a card button. Approve is decided at once;
// Reject and Edit open a modal when the approval is pending and the
// clicker may decide it (so nobody fills in a form only to be refused);
// otherwise they are decision attempts the engine refuses and audits, like
// Approve's. Only views.open, which must use the trigger_id before it
// expires, talks to Slack before the answer; every notice to the clicker
// is an ephemeral sent after it.
func (a *Adapter) handleBlockAction(ctx context.Context, in interaction, raw []byte) answer {
	i := slices.IndexFunc(in.Actions, func(x blockAction) bool { return strings.HasPrefix(x.ActionID, "opsgate:") })
	if i < 0 {
		return answerOK // someone else's button
	}
	act := in.Actions[i]
	channel := in.Channel.ID
	if channel == "" {
		channel = in.Container.ChannelID
	}
	msgTS := in.Container.MessageTS
	if msgTS == "" {
		msgTS = in.Message.TS
	}
	root := in.Message.ThreadTS
	if root == "" {
		root = in.Container.ThreadTS
	}
	if root == "" {
		root = msgTS
	}
	if channel == "" || root == "" || in.TriggerID == "" {
		return answer{status: http.StatusBadRequest}
	}
	tk := threadKey{Team: in.team(), Channel: channel, TS: root}
	id, err := a.sign.parseButtonValue(act.ActionID, act.Value)
	if err != nil {
		a.log.WarnContext(ctx, "slack: refused button payload", "action_id", act.ActionID, "user", in.User.ID,
			"channel_id", channel, "err", err)
		a.tellLater(ctx, tk, in.User.ID, notValidButton)
		return answerOK
	}
	actor := core.Actor{ID: channelName + ":" + in.User.ID, Name: in.User.Username}

	switch act.ActionID {
	case actionApprove:
		return a.decideClick(ctx, in, raw, tk, actor, &core.Decision{ApprovalID: id, Action: approvals.ActionApprove}, "")
	case actionApproveAll:
		return a.decideClick(ctx, in, raw, tk, actor, &core.Decision{ApprovalID: id, Action: core.ActionApproveAll}, "")
	case actionAnswer:
		parts := strings.Split(id, "|")
		skip := len(parts) == 3 && parts[2] == skipChoice
		choice, err := strconv.Atoi(parts[len(parts)-1])
		if len(parts) != 3 || (err != nil && !skip) {
			a.tellLater(ctx, tk, in.User.ID, notValidButton)
			return answerOK
		}
		ev := core.ChannelEvent{Channel: channelName, EventID: "action:" + in.TriggerID, Actor: actor, Thread: tk.thread(),
			Answer: &core.AnswerEvent{RunID: parts[0], ActionID: parts[1], Choice: choice, Skip: skip}, Raw: raw, ReceivedAt: a.now()}
		_, err = a.sink.HandleEvent(ctx, ev)
		var de *core.DecisionError
		switch {
		case errors.As(err, &de):
			a.tellLater(ctx, tk, in.User.ID, core.RefusalText(de))
		case err != nil:
			a.log.ErrorContext(ctx, "slack: record answer", "run", parts[0], "err", err)
			return ingressAnswer(err)
		}
		return answerOK
	case actionReject, actionEdit:
		action, callback := approvals.ActionReject, callbackReject
		if act.ActionID == actionEdit {
			action, callback = approvals.ActionEdit, callbackEdit
		}
		card, err := a.cards.CardByApproval(ctx, id)
		if errors.Is(err, core.ErrNotFound) {
			a.tellLater(ctx, tk, in.User.ID, "This approval no longer exists.")
			return answerOK
		}
		if err != nil {
			a.log.ErrorContext(ctx, "slack: load card for modal", "approval_id", id, "err", err)
			return answer{status: http.StatusInternalServerError}
		}
		if why := mayDecide(card, actor.ID); why != "" {
			// Closed, or not this person's to decide: record the attempt
			// through the engine, so the refusal is audited like any
			// other, and never open the form.
			return a.decideClick(ctx, in, raw, tk, actor, &core.Decision{ApprovalID: id, Action: action}, why)
		}
		meta := a.sign.encodeModalRef(modalRef{Callback: callback, ApprovalID: id, Thread: tk})
		view, err := buildModal(callback, card, meta)
		if err != nil {
			a.tellLater(ctx, tk, in.User.ID, err.Error())
			return answerOK
		}
		if _, err := a.api.OpenViewContext(ctx, in.TriggerID, view); err != nil {
			a.log.WarnContext(ctx, "slack: views.open", "approval_id", id, "err", err)
			a.tellLater(ctx, tk, in.User.ID, "Slack could not open the form ("+err.Error()+"). Click the button again, or decide in the console.")
		}
		return answerOK
	}
	return answerOK
}

// decideClick hands a click's decision to the engine and, after the ack,
// shows the clicker a refusal. fallback is shown when the engine accepts
// a click the card said it would refuse ("" shows nothing).
func (a *Adapter) decideClick(ctx context.Context, in interaction, raw []byte, tk threadKey, actor core.Actor, d *core.Decision, fallback string) answer {
	ev := core.ChannelEvent{
		Channel: channelName, EventID: "action:" + in.TriggerID, Actor: actor, Thread: tk.thread(),
		Decision: d, Raw: raw, ReceivedAt: a.now(),
	}
	_, err := a.sink.HandleEvent(ctx, ev)
	var de *core.DecisionError
	switch {
	case errors.As(err, &de):
		a.tellLater(ctx, tk, in.User.ID, core.RefusalText(de))
	case err != nil:
		a.log.ErrorContext(ctx, "slack: record click", "approval_id", d.ApprovalID, "action", d.Action, "err", err)
		return ingressAnswer(err)
	case fallback != "":
		a.tellLater(ctx, tk, in.User.ID, fallback)
	}
	return answerOK
}

// mayDecideCard reports whether actor is among the card's eligible
// approvers (an empty list leaves the judgement to the engine).
func mayDecideCard(card core.Card, actor string) bool {
	return len(card.Eligible) == 0 || slices.Contains(card.Eligible, actor)
}

// mayDecide returns why actor may not decide card now, or "".
func mayDecide(card core.Card, actor string) string {
	if !card.Pending() {
		if line := card.OutcomeLine(); line != "" {
			return "This approval is closed: " + line + "."
		}
		return "This approval is closed (" + string(card.Status) + ")."
	}
	if !mayDecideCard(card, actor) {
		return "You may not decide this approval: it needs one of " + strings.Join(card.Approvers, ", ") + ". Nothing was changed."
	}
	return ""
}

// afterAckTimeout bounds a notice sent after the ack: long enough to ride
// out a slow Slack, short enough that Drain returns promptly.
const afterAckTimeout = 10 * time.Second

// tellLater sends tellEphemeral's notice in the background, so a slow
// Slack never delays the ack; it outlives the request (its context is
// detached) but not afterAckTimeout, and Drain waits for it.
func (a *Adapter) tellLater(ctx context.Context, tk threadKey, user, text string) {
	ctx = context.WithoutCancel(ctx)
	a.bg.Go(func() {
		ctx, cancel := context.WithTimeout(ctx, afterAckTimeout)
		defer cancel()
		a.tellEphemeral(ctx, tk, user, text)
	})
}

// tellEphemeral shows text to one person in the card's thread; the card
// itself is left as it is.
func (a *Adapter) tellEphemeral(ctx context.Context, tk threadKey, user, text string) {
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(escapeMrkdwn(text), false)}
	if tk.TS != "" {
		opts = append(opts, slackapi.MsgOptionTS(tk.TS))
	}
	if _, err := a.api.PostEphemeralContext(ctx, tk.Channel, user, opts...); err != nil {
		a.log.WarnContext(ctx, "slack: chat.postEphemeral", "user", user, "err", err)
	}
}

// handleViewSubmission records the decision a Reject or Edit modal carries.
// A refusal is shown inside the modal (response_action: errors) next to the
// offending field, and the modal stays open for a correction.
func (a *Adapter) handleViewSubmission(ctx context.Context, in interaction, raw []byte) answer {
	cb := in.View.CallbackID
	if cb != callbackReject && cb != callbackEdit {
		return answerOK
	}
	values := map[string]string{}
	for block, acts := range in.View.State.Values {
		if v, ok := acts["value"]; ok {
			values[block] = ""
			if v.Value != nil {
				values[block] = *v.Value
			}
		}
	}
	ref, err := a.sign.parseModalRef(cb, in.View.PrivateMetadata)
	if err != nil {
		a.log.WarnContext(ctx, "slack: refused modal metadata", "user", in.User.ID, "view_id", in.View.ID, "err", err)
		return notValidModal(values)
	}
	d := &core.Decision{ApprovalID: ref.ApprovalID, Reason: strings.TrimSpace(values[blockReason])}
	firstBlock := blockReason
	if cb == callbackReject {
		d.Action = approvals.ActionReject
	} else {
		d.Action = approvals.ActionEdit
		args, block, err := argsFromModal(values)
		if err != nil {
			return modalErrors(block, err.Error())
		}
		d.Args, firstBlock = args, block
	}
	eventID := "view:" + in.TriggerID
	if in.TriggerID == "" {
		eventID = "view:" + in.View.ID + ":" + in.View.Hash
	}
	ev := core.ChannelEvent{
		Channel: channelName, EventID: eventID,
		Actor:  core.Actor{ID: channelName + ":" + in.User.ID, Name: in.User.Username},
		Thread: ref.Thread.thread(), Decision: d, Raw: raw, ReceivedAt: a.now(),
	}
	_, err = a.sink.HandleEvent(ctx, ev)
	var de *core.DecisionError
	switch {
	case errors.As(err, &de):
		block := firstBlock
		if de.Code == core.DecisionInvalidArgs && de.Field != "" {
			name, _, _ := strings.Cut(de.Field, ".")
			if _, ok := values[argBlock(name)]; ok {
				block = argBlock(name)
			}
		}
		return modalErrors(block, de.Message)
	case err != nil:
		a.log.ErrorContext(ctx, "slack: record modal decision", "approval_id", ref.ApprovalID, "err", err)
		return modalErrors(firstBlock, "opsgate could not record the decision; please submit again.")
	}
	return answerOK
}

// notValidModal answers a submission whose metadata is forged: the
// "not valid" message under the reason field (or the first field the view
// has), or, for a view without fields, a plain 200 that closes it.
func notValidModal(values map[string]string) answer {
	if _, ok := values[blockReason]; ok {
		return modalErrors(blockReason, notValidForm)
	}
	if len(values) == 0 {
		return answerOK
	}
	return modalErrors(slices.Sorted(maps.Keys(values))[0], notValidForm)
}

// modalErrors keeps the modal open with msg under block.
func modalErrors(block, msg string) answer {
	if len(msg) > 2000 {
		msg = msg[:1997] + "..."
	}
	return answer{status: http.StatusOK, body: map[string]any{
		"response_action": "errors",
		"errors":          map[string]string{block: msg},
	}}
}
