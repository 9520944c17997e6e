package email

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
	"github.com/opsgate/opsgate/core/delivery"
)

// MaxBodyBytes is the largest reply body one mail carries. Mail has no
// protocol limit worth the name (servers refuse somewhere past 10–35 MB);
// this keeps a runaway tool output to readable mails.
const MaxBodyBytes = 512 << 10

// Format implements delivery.Platform: replies are rendered to email HTML
// (the text part is derived from it at send time) and measured in bytes.
func (a *Adapter) Format() delivery.Format {
	return delivery.Format{Limit: MaxBodyBytes, Unit: chunk.Bytes, Syntax: chunk.HTML, Render: renderReply}
}

// Pacing implements delivery.Platform: one mail per SendInterval (1/s) for
// the whole account, well under every provider's sending limits.
func (a *Adapter) Pacing() delivery.Pacing {
	return delivery.Pacing{Account: delivery.Rate{Every: a.cfg.SendInterval, Burst: 1}}
}

// Buckets implements delivery.Platform: the conversation is the
// correspondent (no per-conversation limit is set; the account one holds).
func (a *Adapter) Buckets(t core.Thread) delivery.Buckets {
	if k, err := parseThreadKey(t.Key); err == nil {
		return delivery.Buckets{Conversation: k.Addr}
	}
	return delivery.Buckets{Conversation: t.Key}
}

// Send implements core.Adapter: a reply chunk, a card or a card's outcome
// becomes one mail in the thread, and its Message-ID is the reference.
func (a *Adapter) Send(ctx context.Context, m core.Outbound) (core.MessageRef, error) {
	key, err := parseThreadKey(m.Thread.Key)
	if err != nil {
		return core.MessageRef{}, &core.PermanentError{Err: err}
	}
	var mail outMail
	switch m.Kind {
	case core.KindReply, core.KindQuestionUpdate: // a sent mail cannot change: an update is a new one
		subject := "Re: " + subjectOr(key.Subject)
		if m.Parts > 1 {
			subject += fmt.Sprintf(" (%d/%d)", m.Part, m.Parts)
		}
		mail = outMail{
			To: []string{key.Addr}, Subject: subject, MessageID: a.tok.newMessageID(a.domain, ""),
			InReplyTo: key.Root, References: []string{key.Root},
			Text: htmlToText(m.Text), HTML: `<div style="font-family:sans-serif">` + m.Text + "</div>\n",
		}
	case core.KindCard:
		if m.Card == nil {
			return core.MessageRef{}, &core.PermanentError{Err: fmt.Errorf("email: %s without a card", m.Kind)}
		}
		return a.sendCard(ctx, *m.Card, key)
	case core.KindCardUpdate:
		if m.Card == nil {
			return core.MessageRef{}, &core.PermanentError{Err: fmt.Errorf("email: %s without a card", m.Kind)}
		}
		c := *m.Card
		to, cc := cardRecipients(c, key)
		mail = outMail{
			To: to, Cc: cc, MessageID: a.tok.newMessageID(a.domain, c.ApprovalID),
			InReplyTo: key.Root, References: []string{key.Root}, Subject: "Re: " + cardSubject(c),
		}
		if m.Edit != nil && m.Edit.ID != "" {
			mail.InReplyTo = m.Edit.ID
			mail.References = append(mail.References, m.Edit.ID)
		}
		t := outcomeText(c)
		mail.Text, mail.HTML = t, textToHTML(t)
	default:
		return core.MessageRef{}, &core.PermanentError{Err: fmt.Errorf("email: unknown message kind %q", m.Kind)}
	}
	if err := a.deliver(ctx, mail); err != nil {
		return core.MessageRef{}, err
	}
	return core.MessageRef{Channel: ChannelName, ID: mail.MessageID}, nil
}

// deliver composes and submits one mail to all its recipients.
func (a *Adapter) deliver(ctx context.Context, m outMail) error {
	raw, err := a.compose(m)
	if err != nil {
		return &core.PermanentError{Err: err}
	}
	var rcpts []string
	for _, r := range append(slices.Clone(m.To), m.Cc...) {
		if !slices.Contains(rcpts, r) {
			rcpts = append(rcpts, r)
		}
	}
	return a.submit(ctx, rcpts, raw)
}

// sendCard mails a new card: one mail to each eligible approver with an
// email identity, each with a reply token bound to that approver alone, and
// a token-less copy to the requester (who may not approve their own call,
// and must not hold a token someone could use in their name). With no
// approver reachable by mail, the requester's copy says where to decide.
// The reference returned is the first mail's, for the closing mail to
// thread under. A failure part-way is retried whole: an approver may then
// get the card twice, each copy with the same valid token.
func (a *Adapter) sendCard(ctx context.Context, c core.Card, key threadKey) (core.MessageRef, error) {
	requester := requesterAddress(c, key)
	var mails []outMail
	for _, addr := range approverAddresses(c) {
		if addr == requester {
			continue
		}
		mails = append(mails, outMail{
			To: []string{addr}, MessageID: a.tok.newMessageID(a.domain, c.ApprovalID), InReplyTo: key.Root,
			References: []string{key.Root}, Subject: cardSubject(c), ReplyTo: a.tok.plusAddress(a.cfg.Address, c.ApprovalID, addr),
			Text: cardText(c, true), HTML: cardHTML(c, true),
		})
	}
	mails = append(mails, outMail{
		To: []string{requester}, MessageID: a.tok.newMessageID(a.domain, c.ApprovalID), InReplyTo: key.Root,
		References: []string{key.Root}, Subject: cardSubject(c), Text: cardText(c, false), HTML: cardHTML(c, false),
	})
	for i, mail := range mails {
		if i > 0 {
			if err := a.pace(ctx); err != nil {
				return core.MessageRef{}, err
			}
		}
		if err := a.deliver(ctx, mail); err != nil {
			return core.MessageRef{}, err
		}
	}
	return core.MessageRef{Channel: ChannelName, ID: mails[0].MessageID}, nil
}

// approverAddresses are the mail addresses among the card's eligible
// approvers, lowercased, without duplicates.
func approverAddresses(c core.Card) []string {
	var out []string
	for _, id := range c.Eligible {
		if addr, ok := strings.CutPrefix(id, ChannelName+":"); ok && strings.Contains(addr, "@") {
			addr = strings.ToLower(addr)
			if !slices.Contains(out, addr) {
				out = append(out, addr)
			}
		}
	}
	return out
}

// requesterAddress is where the requester reads mail: their email identity,
// else the thread's correspondent.
func requesterAddress(c core.Card, key threadKey) string {
	if addr, ok := strings.CutPrefix(c.Requester, ChannelName+":"); ok && strings.Contains(addr, "@") {
		return strings.ToLower(addr)
	}
	return strings.ToLower(key.Addr)
}

// cardRecipients addresses the closing mail of an approval (no token in
// it): To the approvers reachable by mail, Cc the requester.
func cardRecipients(c core.Card, key threadKey) (to, cc []string) {
	to = approverAddresses(c)
	requester := requesterAddress(c, key)
	if len(to) == 0 {
		return []string{requester}, nil
	}
	if !slices.Contains(to, requester) {
		cc = []string{requester}
	}
	return to, cc
}

func subjectOr(s string) string {
	if s == "" {
		return "opsgate"
	}
	return s
}
