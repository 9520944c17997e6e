package signal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/core/markdown"
)

// MaxText is the longest message sent inline, in UTF-16 code units:
// Signal clients turn longer text into an attachment.
const MaxText = 2000

// Format implements delivery.Platform: plain text (markdown.Plain: Signal
// renders no markup from text), cut at MaxText.
func (a *Adapter) Format() delivery.Format {
	return delivery.Format{Limit: MaxText, Unit: chunk.UTF16, Syntax: chunk.Markdown, Markers: true,
		Render: func(md string) string { return markdown.Convert(md, markdown.Plain) }}
}

// Pacing implements delivery.Platform: Signal rate-limits accounts that
// send fast (and asks for a captcha); opsgate sends at most one message a
// second per conversation and two per account, and honours signal-cli's
// rate-limit errors on top.
func (a *Adapter) Pacing() delivery.Pacing {
	return delivery.Pacing{
		Conversation: delivery.Rate{Every: time.Second, Burst: 2},
		Account:      delivery.Rate{Every: 500 * time.Millisecond, Burst: 3},
	}
}

// Buckets implements delivery.Platform: one bucket per conversation.
func (a *Adapter) Buckets(t core.Thread) delivery.Buckets {
	return delivery.Buckets{Conversation: t.Key}
}

// Send implements core.Adapter.
func (a *Adapter) Send(ctx context.Context, m core.Outbound) (core.MessageRef, error) {
	k, err := parseThreadKey(m.Thread.Key)
	if err != nil {
		return core.MessageRef{}, &core.PermanentError{Err: err}
	}
	switch m.Kind {
	case core.KindReply:
		ts, err := a.send(ctx, k, m.Text, 0)
		if err != nil {
			return core.MessageRef{}, deliveryError(err)
		}
		return core.MessageRef{Channel: ChannelName, ID: messageRef(k, ts)}, nil
	case core.KindQuestionUpdate:
		// An answered question: its message is edited to show the answer,
		// or, when it can no longer be edited, the answer follows.
		if ref, edited, err := a.edit(ctx, m.Edit, m.Text); edited || err != nil {
			return ref, err
		}
		ts, err := a.send(ctx, k, m.Text, 0)
		if err != nil {
			return core.MessageRef{}, deliveryError(err)
		}
		return core.MessageRef{Channel: ChannelName, ID: messageRef(k, ts)}, nil
	case core.KindCard, core.KindCardUpdate:
		if m.Card == nil {
			return core.MessageRef{}, &core.PermanentError{Err: fmt.Errorf("signal: %s without a card", m.Kind)}
		}
		code, err := a.assignCode(ctx, m.Card.ApprovalID)
		if err != nil {
			return core.MessageRef{}, err
		}
		text := cardText(*m.Card, code)
		if m.Kind == core.KindCardUpdate {
			if ref, edited, err := a.edit(ctx, m.Edit, text); edited || err != nil {
				return ref, err
			}
		}
		ts, err := a.send(ctx, k, text, 0)
		if err != nil {
			return core.MessageRef{}, deliveryError(err)
		}
		if err := a.store.StatePut(ctx, a.cardKey(ts), []byte(m.Card.ApprovalID), a.now()); err != nil {
			return core.MessageRef{}, fmt.Errorf("signal: remember card: %w", err)
		}
		return core.MessageRef{Channel: ChannelName, ID: messageRef(k, ts)}, nil
	}
	return core.MessageRef{}, &core.PermanentError{Err: fmt.Errorf("signal: unknown message kind %q", m.Kind)}
}

// edit rewrites the message ref names with text. edited is false when
// there is nothing to edit, or the message can no longer be edited (the
// caller then sends text anew); err is a failure worth retrying.
func (a *Adapter) edit(ctx context.Context, ref *core.MessageRef, text string) (_ core.MessageRef, edited bool, _ error) {
	if ref == nil || ref.Channel != ChannelName {
		return core.MessageRef{}, false, nil
	}
	ek, ts, err := parseMessageRef(ref.ID)
	if err != nil {
		return core.MessageRef{}, false, nil
	}
	if _, err := a.send(ctx, ek, text, ts); err != nil {
		if de := deliveryError(err); !isPermanent(de) {
			return core.MessageRef{}, false, de
		}
		a.log.Info("message no longer editable; posting it again", "ref", ref.ID)
		return core.MessageRef{}, false, nil
	}
	return *ref, true, nil
}

func isPermanent(err error) bool {
	var pe *core.PermanentError
	return errors.As(err, &pe)
}

// send is JSON-RPC "send" to k (an edit of the message sent at edit when
// edit > 0) and returns the new message's timestamp.
func (a *Adapter) send(ctx context.Context, k threadKey, text string, edit int64) (int64, error) {
	p := k.params(a.cfg.Account)
	p["message"] = text
	if edit > 0 {
		p["editTimestamp"] = edit
	}
	var r sendResult
	if err := a.rpc.call(ctx, "send", p, &r); err != nil {
		return 0, err
	}
	if r.Timestamp <= 0 {
		return 0, fmt.Errorf("signal-cli send: result without a timestamp")
	}
	return r.Timestamp, nil
}

// assignCode returns the approval's short code, storing code → approval
// the first time. Codes are derived from the id (4 characters); the rare
// code already taken by another approval grows a character.
func (a *Adapter) assignCode(ctx context.Context, approvalID string) (string, error) {
	for n := 4; n <= 8; n++ {
		code := codeFor(approvalID, n)
		got, err := a.lookup(ctx, a.codeKey(code))
		if err != nil {
			return "", err
		}
		switch got {
		case approvalID:
			return code, nil
		case "":
			if err := a.store.StatePut(ctx, a.codeKey(code), []byte(approvalID), a.now()); err != nil {
				return "", fmt.Errorf("signal: store approval code: %w", err)
			}
			return code, nil
		}
	}
	return "", fmt.Errorf("signal: no free approval code for %s", approvalID)
}
