package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	discordapi "github.com/bwmarrin/discordgo"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/approvalref"
)

// decisionThread is the thread a decision belongs to: the channel of the
// card's message (a thread or a channel), under the interaction's guild.
func decisionThread(in *interaction) threadKey { return in.here() }

// handleComponent answers a button click. Approve is recorded at once and
// answered ephemerally; Reject and Edit open a modal, after checking that
// the approval is still pending and the clicker may decide. Otherwise the
// click goes to the engine as a decision attempt, so the refusal (already
// decided, expired, not an approver) is the engine's and is audited, like
// a refused Approve click. A forged or stale custom_id carries no
// trustworthy approval id: it is refused here, logged, and not audited.
// The card itself is updated by the outbox after any decision.
func (a *Adapter) handleComponent(ctx context.Context, raw []byte, in *interaction) (*discordapi.InteractionResponse, error) {
	data := in.MessageComponentData()
	p, err := a.buttons.Decode(data.CustomID)
	if err != nil {
		a.log.Warn("refused component payload", "interaction", in.ID, "user", in.user().ID, "err", err)
		return ephemeral("⛔ This button is not valid (forged, or from an older version of this bot)."), nil
	}
	switch p.Action {
	case approvalref.Approve, approvalref.ApproveAll:
		ev := a.event(raw, in, decisionThread(in))
		ev.Decision = &core.Decision{ApprovalID: p.ApprovalID, Action: p.Action.Decision()}
		rc, err := a.sink.HandleEvent(ctx, ev)
		var de *core.DecisionError
		switch {
		case errors.As(err, &de):
			return refused(de), nil
		case err != nil:
			return nil, fmt.Errorf("discord: record approval %s: %w", ev.EventID, err)
		}
		return ephemeral(core.AckText(rc)), nil
	case approvalref.Answer, approvalref.Skip:
		return a.answer(ctx, raw, in, &core.AnswerEvent{RunID: p.RunID, ActionID: core.AskActionID(p.Step), Choice: p.Choice, Skip: p.Action == approvalref.Skip})
	case approvalref.Form:
		// Whether the question still waits is judged when the form comes back.
		return &discordapi.InteractionResponse{Type: discordapi.InteractionResponseModal, Data: answerModal(data.CustomID)}, nil
	}
	c, refusal, err := a.decidableCard(ctx, in, p.ApprovalID)
	if err != nil {
		return nil, err
	}
	if refusal != nil {
		if !refusal.record {
			return refusal.resp, nil
		}
		// Closed, or refused for who clicked: record the attempt through
		// the engine, which refuses it and audits it like a refused
		// Approve click. No modal opens, so it carries no text.
		ev := a.event(raw, in, decisionThread(in))
		ev.Decision = &core.Decision{ApprovalID: p.ApprovalID, Action: p.Action.Decision()}
		_, err := a.sink.HandleEvent(ctx, ev)
		var de *core.DecisionError
		switch {
		case errors.As(err, &de):
			return refused(de), nil
		case err != nil:
			return nil, fmt.Errorf("discord: record refused click %s: %w", ev.EventID, err)
		}
		return refusal.resp, nil // a redelivered interaction already recorded
	}
	if p.Action == approvalref.Reject {
		return &discordapi.InteractionResponse{Type: discordapi.InteractionResponseModal, Data: rejectModal(data.CustomID, c)}, nil
	}
	return &discordapi.InteractionResponse{Type: discordapi.InteractionResponseModal, Data: editModal(data.CustomID, c)}, nil
}

// cardRefusal is why a Reject or Edit click cannot open its modal: resp
// is the local answer; record says the approval exists, so the attempt is
// a decision the engine must refuse and audit (closed approval, clicker
// not eligible) rather than a click on nothing.
type cardRefusal struct {
	resp   *discordapi.InteractionResponse
	record bool
}

// decidableCard fetches the card and refuses, before a modal opens, a click
// on an unknown, decided or expired approval or by someone who may not
// decide.
func (a *Adapter) decidableCard(ctx context.Context, in *interaction, id string) (core.Card, *cardRefusal, error) {
	c, err := a.cards.CardByApproval(ctx, id)
	switch {
	case errors.Is(err, core.ErrNotFound):
		return c, &cardRefusal{resp: ephemeral("❓ Unknown approval.")}, nil
	case err != nil:
		return c, nil, fmt.Errorf("discord: card %s: %w", id, err)
	case !c.Pending():
		line := c.OutcomeLine()
		if line == "" {
			line = "This approval is " + string(c.Status)
		}
		return c, &cardRefusal{resp: ephemeral("ℹ️ " + plain(line) + "."), record: true}, nil
	case len(c.Eligible) > 0 && !slices.Contains(c.Eligible, in.actor().ID):
		return c, &cardRefusal{resp: refused(&core.DecisionError{Code: core.DecisionNotApprover}), record: true}, nil
	}
	return c, nil, nil
}

// modalValues collects a modal's text inputs by custom_id.
func modalValues(d discordapi.ModalSubmitInteractionData) map[string]string {
	out := map[string]string{}
	var walk func([]discordapi.MessageComponent)
	walk = func(cs []discordapi.MessageComponent) {
		for _, c := range cs {
			switch v := c.(type) {
			case *discordapi.ActionsRow:
				walk(v.Components)
			case discordapi.ActionsRow:
				walk(v.Components)
			case *discordapi.TextInput:
				out[v.CustomID] = v.Value
			case discordapi.TextInput:
				out[v.CustomID] = v.Value
			}
		}
	}
	walk(d.Components)
	return out
}

// ErrBadArgs is edited arguments the adapter could not read at all
// (invalid JSON); the schema's verdict comes from the core.
var ErrBadArgs = errors.New("discord: unreadable arguments")

// modalArgs reads an Edit modal: one input per argument (typed back to
// JSON values where the card showed JSON), or one JSON object.
func modalArgs(vals map[string]string, c core.Card) (map[string]any, error) {
	if js, ok := vals[inputJSON]; ok {
		var args map[string]any
		dec := json.NewDecoder(strings.NewReader(js))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil || args == nil {
			if err == nil {
				err = errors.New("want a JSON object")
			}
			return nil, fmt.Errorf("%w: %v", ErrBadArgs, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("%w: text after the JSON object", ErrBadArgs)
		}
		return normalizeNumbers(args).(map[string]any), nil
	}
	shown := map[string]string{}
	for _, a := range c.Args {
		shown[a.Name] = a.Value
	}
	args := map[string]any{}
	for k, v := range vals {
		name, ok := strings.CutPrefix(k, inputArg)
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if v == "" {
			continue // cleared: the schema's default (or its refusal) applies
		}
		args[name] = argValue(shown[name], v)
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("%w: no arguments given", ErrBadArgs)
	}
	return args, nil
}

// normalizeNumbers turns json.Number into int64 where exact, else float64,
// so validators see ordinary JSON values.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	}
	return v
}

// handleModal turns a submitted Reject or Edit modal into a decision.
// Invalid arguments are answered with the validator's message, ephemerally;
// the approver presses Edit again to retry.
func (a *Adapter) handleModal(ctx context.Context, raw []byte, in *interaction) (*discordapi.InteractionResponse, error) {
	data := in.ModalSubmitData()
	p, err := a.buttons.Decode(data.CustomID)
	if err != nil || p.Action == approvalref.Approve {
		a.log.Warn("refused modal payload", "interaction", in.ID, "user", in.user().ID, "err", err)
		return ephemeral("⛔ This form is not valid (forged, or from an older version of this bot)."), nil
	}
	vals := modalValues(data)
	if p.Action == approvalref.Form {
		return a.answer(ctx, raw, in, &core.AnswerEvent{RunID: p.RunID, ActionID: core.AskActionID(p.Step), Text: strings.TrimSpace(vals[inputAnswer])})
	}
	if p.Action.Question() {
		return ephemeral("⛔ This form is not valid (forged, or from an older version of this bot)."), nil
	}
	d := &core.Decision{ApprovalID: p.ApprovalID}
	if p.Action == approvalref.Reject {
		d.Action, d.Reason = approvals.ActionReject, strings.TrimSpace(vals[inputReason])
		if d.Reason == "" {
			return ephemeral("✍️ Please give a reason: the run receives it as feedback. Press Reject again."), nil
		}
	} else {
		c, refusal, err := a.decidableCard(ctx, in, p.ApprovalID)
		if err != nil {
			return nil, err
		}
		if refusal != nil && !refusal.record {
			return refusal.resp, nil
		}
		// A closed approval or an ineligible submitter goes on to the
		// engine with the submitted arguments: refused and audited there.
		args, err := modalArgs(vals, c)
		if err != nil {
			if refusal != nil {
				return refusal.resp, nil
			}
			return ephemeral("⚠️ Arguments not accepted: " + plain(err.Error()) + ". Press Edit to try again."), nil
		}
		d.Action, d.Args = approvals.ActionEdit, args
	}
	ev := a.event(raw, in, decisionThread(in))
	ev.Decision = d
	rc, err := a.sink.HandleEvent(ctx, ev)
	var de *core.DecisionError
	switch {
	case errors.As(err, &de) && de.Code == core.DecisionInvalidArgs:
		return ephemeral(plain(core.RefusalText(de)) + " Press Edit to try again."), nil
	case errors.As(err, &de):
		return refused(de), nil
	case err != nil:
		return nil, fmt.Errorf("discord: record %s decision %s: %w", d.Action, ev.EventID, err)
	case rc.Duplicate:
		return ephemeral("ℹ️ Already recorded."), nil
	}
	if d.Action == approvals.ActionReject {
		return ephemeral("❌ Rejected; the run gets your feedback."), nil
	}
	if rc.ApprovalStatus == "pending" {
		return ephemeral("✏️ Edit recorded; more approvers are needed."), nil
	}
	return ephemeral("✏️ Edited and approved."), nil
}

// refused is the ephemeral answer to a refused decision or answer, in
// core's words.
func refused(de *core.DecisionError) *discordapi.InteractionResponse {
	return ephemeral(plain(core.RefusalText(de)))
}

// answer records a question's button or form as its answer.
func (a *Adapter) answer(ctx context.Context, raw []byte, in *interaction, an *core.AnswerEvent) (*discordapi.InteractionResponse, error) {
	ev := a.event(raw, in, decisionThread(in))
	ev.Answer = an
	_, err := a.sink.HandleEvent(ctx, ev)
	var de *core.DecisionError
	switch {
	case errors.As(err, &de):
		return refused(de), nil
	case err != nil:
		return nil, fmt.Errorf("discord: record answer %s: %w", ev.EventID, err)
	}
	return ephemeral(core.AnsweredText), nil
}
