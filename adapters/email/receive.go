package email

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/opsgate/opsgate/core"
)

// handle reads one raw mail and hands it to the sink. It returns an error
// only when the mail must be read again later (the sink failed); a mail
// that is unreadable, automatic, or refused is handled (and the cursor may
// move past it).
func (a *Adapter) handle(ctx context.Context, raw []byte, pos mailPos) error {
	in, err := parseMail(raw)
	if err != nil {
		a.log.Warn("email: skipped unreadable mail", "err", err)
		return nil
	}
	log := a.log.With("message_id", in.MessageID, "from", in.From)
	if in.From == a.cfg.Address || isOurMessageID(in.MessageID, a.domain) {
		log.Debug("email: skipped our own mail")
		return nil
	}
	if in.AutoReason != "" {
		// RFC 3834: never answer a robot, a bounce or a list.
		log.Info("email: ignored automatic mail", "reason", in.AutoReason)
		return nil
	}
	authFail := ""
	if a.cfg.RequireDMARC && !a.authenticated(in) {
		authFail = "no dkim=pass or dmarc=pass for the sender's domain in Authentication-Results from " + a.cfg.AuthservID
	}
	if apID, tagged, ok := a.approvalOf(in); ok {
		return a.handleAnswer(ctx, in, apID, tagged, authFail)
	}
	if authFail != "" {
		// A request whose sender cannot be trusted is dropped unanswered:
		// answering forged mail would mail the person it impersonates.
		log.Warn("email: ignored unauthenticated request", "reason", authFail)
		return nil
	}
	key, reply := a.threadOf(in)
	ev := core.ChannelEvent{
		Channel: ChannelName, EventID: in.MessageID, Actor: core.Actor{ID: Actor(in.From)},
		Thread: key.thread(), Text: requestText(in, reply), Raw: rawOf(in), ReceivedAt: a.now(),
		Attachments: a.attachmentsOf(in, pos),
	}
	for _, id := range in.InReplyTo {
		if isOurMessageID(id, a.domain) {
			// A reply to one of our mails continues its conversation,
			// whoever replies and whatever the subject became.
			ev.ReplyTo = &core.MessageRef{Channel: ChannelName, ID: strings.Trim(id, "<> \t")}
			break
		}
	}
	rc, err := a.sink.HandleEvent(ctx, ev)
	if errors.Is(err, core.ErrInvalidInput) { // retrying cannot help: drop it
		log.Warn("email: request refused", "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("email: record %s: %w", in.MessageID, err)
	}
	log.Info("email: request recorded", "run", rc.RunID, "duplicate", rc.Duplicate)
	return nil
}

// authenticated applies require_dmarc: the topmost Authentication-Results
// written by our authserv-id must vouch for the From domain.
func (a *Adapter) authenticated(in *inbound) bool {
	for _, v := range in.AuthResults {
		ar, err := ParseAuthResults(v)
		if err != nil || !strings.EqualFold(ar.AuthservID, a.cfg.AuthservID) {
			continue
		}
		return ar.Passes(domainPart(in.From))
	}
	return false
}

// approvalOf finds the approval a reply answers: an In-Reply-To naming
// one of our approval Message-IDs. tagged reports whether the id's tag
// verified; an id in our approval format with a bad tag is still returned
// (untagged), so the attempt is refused and audited rather than read as a
// new request.
func (a *Adapter) approvalOf(in *inbound) (apID string, tagged, ok bool) {
	for _, id := range in.InReplyTo {
		if ap, ok := a.tok.approvalOfMessageID(id, a.domain); ok {
			return ap, true, true
		}
	}
	for _, id := range in.InReplyTo {
		left, _, _ := strings.Cut(id, "@")
		if parts := strings.Split(left, "."); isOurMessageID(id, a.domain) && len(parts) == 5 && parts[1] == "a" {
			if ap, ok := decodeApprovalID(parts[2]); ok {
				return ap, false, true
			}
		}
	}
	return "", false, false
}

// threadOf places a mail in its thread: the first Message-ID of its
// References (or its In-Reply-To) is the thread's root, so a reply to any
// of our answers lands in the thread of the request that started it; a
// mail that references nothing starts its own thread.
func (a *Adapter) threadOf(in *inbound) (threadKey, bool) {
	k := threadKey{Addr: in.From, Root: in.MessageID, Subject: baseSubject(in.Subject)}
	switch {
	case len(in.References) > 0:
		k.Root = in.References[0]
	case len(in.InReplyTo) > 0:
		k.Root = in.InReplyTo[0]
	default:
		return k, false
	}
	return k, true
}

// requestText is the command a mail carries. A new mail's command is its
// subject, or the first line of its body when the subject is empty; a
// reply's is the first line of its new text (its subject is "Re: …" of
// what came before). The rest of the body is not part of the command: the
// router reads every whitespace-separated word as an argument, so a
// greeting or signature would become one.
func requestText(in *inbound, reply bool) string {
	subject := baseSubject(in.Subject)
	body := StripQuotes(in.Text)
	first := ""
	for _, l := range strings.Split(body, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			first = l
			break
		}
	}
	if reply || subject == "" {
		if first != "" {
			return first
		}
	}
	return subject
}

// rawOf is what the audit keeps of a mail: its identifying headers and
// the new text, not the whole message.
func rawOf(in *inbound) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"message_id": in.MessageID, "from": in.From, "subject": in.Subject,
		"in_reply_to": in.InReplyTo, "references": in.References, "text": clip(StripQuotes(in.Text), 4000),
	})
	return b
}

// handleAnswer judges a reply to an approval mail and hands it to the core
// as a decision attempt — also when the adapter already knows it will be
// refused (no token, unreadable, approval closed), so that the core records
// its Message-ID and audits it. Every refusal is answered by mail in the
// same thread, but only on the first sighting of the Message-ID: a mail
// read again (lost cursor, new UIDVALIDITY, a second replica) comes back as
// a duplicate receipt and is answered no more, since answers are mailed
// directly rather than through the outbox.
func (a *Adapter) handleAnswer(ctx context.Context, in *inbound, apID string, tagged bool, authFail string) error {
	log := a.log.With("message_id", in.MessageID, "from", in.From, "approval", apID)
	card, err := a.cards.CardByApproval(ctx, apID)
	if errors.Is(err, core.ErrNotFound) {
		log.Warn("email: reply to an unknown approval")
		return nil
	}
	if err != nil {
		return fmt.Errorf("email: card %s: %w", apID, err)
	}
	closed := tagged && !card.Pending()
	refusal := ""
	switch {
	case !tagged:
		refusal = "bad_message_tag"
	default:
		refusal = a.replyTokenProblem(in, apID, card)
	}
	if refusal == "" && authFail != "" {
		refusal = "sender_not_authenticated"
	}
	ans, parseErr := ParseAnswer(StripQuotes(in.Text))
	d := core.Decision{ApprovalID: apID}
	switch {
	case refusal != "":
		// The core refuses an unverified decision before judging it and
		// audits the attempt with the reason, whatever it asked for.
		d.Action, d.Unverified = "unknown", "email: "+refusal
		if parseErr == nil {
			d.Action = ans.Action
		}
	case parseErr != nil:
		// Nothing to decide, but the attempt is recorded and audited all
		// the same, so that a second reading of this mail is recognised.
		d.Action, d.Unverified = "unknown", "email: "+parseErr.Error()
	default:
		d.Action, d.Args, d.Reason = ans.Action, ans.Args, ans.Reason
	}
	ev := core.ChannelEvent{
		Channel: ChannelName, EventID: in.MessageID, Actor: core.Actor{ID: Actor(in.From)},
		Thread: threadKeyOf(a, in).thread(), Raw: rawOf(in), ReceivedAt: a.now(), Decision: &d,
	}
	rc, err := a.sink.HandleEvent(ctx, ev)
	var de *core.DecisionError
	if err != nil && !errors.As(err, &de) {
		return fmt.Errorf("email: record reply %s: %w", in.MessageID, err)
	}
	if rc.Duplicate {
		log.Debug("email: reply seen before; it was answered then")
		return nil
	}
	switch {
	case closed && de != nil:
		log.Info("email: reply to a closed approval", "code", de.Code)
		a.answer(ctx, in, "", "This approval is already closed: "+card.OutcomeLine()+".\n")
	case refusal != "":
		log.Warn("email: refused approval reply", "reason", refusal)
		a.answer(ctx, in, "", unverifiedText(refusal, authFail))
	case parseErr != nil:
		log.Info("email: unreadable approval reply", "err", parseErr)
		a.answer(ctx, in, apID, "Your reply was not understood: "+strings.TrimPrefix(parseErr.Error(), ErrUnreadableReply.Error()+": ")+
			".\n\n"+answerHelp)
	case de != nil:
		log.Info("email: decision refused", "code", de.Code)
		// Only a refusal the sender can fix by replying again keeps the
		// approval's reply address.
		retry := ""
		if de.Code == core.DecisionInvalidArgs || de.Code == core.DecisionDenied || de.Code == core.DecisionBadRequest {
			retry = apID
		}
		a.answer(ctx, in, retry, decisionRefusalText(de))
	case rc.ApprovalStatus == "pending":
		a.answer(ctx, in, apID, core.AckText(rc)+"\n")
	default:
		log.Info("email: decision recorded", "status", rc.ApprovalStatus)
	}
	return nil
}

func threadKeyOf(a *Adapter, in *inbound) threadKey {
	k, _ := a.threadOf(in)
	return k
}

// replyTokenProblem checks the reply token among the mail's recipients (To,
// Cc, or the delivery headers our server adds): "" when one was issued to
// the sender for this approval, "sender_mismatch" when the mail carries a
// token issued to someone else (a forwarded card, or a forged From), and
// "missing_reply_token" otherwise.
func (a *Adapter) replyTokenProblem(in *inbound, apID string, card core.Card) string {
	problem := "missing_reply_token"
	for _, r := range in.Recipients {
		tag, ok := plusTag(r, a.cfg.Address)
		if !ok {
			continue
		}
		if a.tok.validReply(apID, in.From, tag) {
			return ""
		}
		for _, addr := range approverAddresses(card) {
			if a.tok.validReply(apID, addr, tag) {
				problem = "sender_mismatch"
			}
		}
	}
	return problem
}

const answerHelp = "Reply to the approval mail with one of:\n\n  approve\n  reject: <reason>\n  edit\n  <name>: <value>   (one line per argument, or one JSON object)\n"

// unverifiedText is why a reply whose sender could not be verified (the
// mail's own reply tokens and authentication) was not counted.
func unverifiedText(code, authFail string) string {
	switch code {
	case "missing_reply_token":
		return "Your reply was not counted: it was not sent to the approval's own reply address. " +
			"Use \"Reply\" on the approval mail itself, so that it goes to the address the mail asks replies to go to.\n"
	case "sender_not_authenticated":
		return "Your reply was not counted: its sender could not be authenticated (" + authFail + ").\n"
	case "sender_mismatch":
		return "Your reply was not counted: the approval mail it answers was sent to another approver, and each " +
			"approver's reply address counts only from that approver's own address. Reply to the approval mail you received yourself.\n"
	default:
		return "Your reply was not counted: it does not answer an approval mail sent by opsgate.\n"
	}
}

// decisionRefusalText is a refused decision as a mail says it: core's
// words, and how to try again where a new reply can fix it.
func decisionRefusalText(de *core.DecisionError) string {
	text := core.RefusalText(de) + "\n"
	if de.Code == core.DecisionInvalidArgs {
		if de.Field != "" {
			text = strings.TrimSuffix(text, ".\n") + " (argument " + de.Field + ").\n"
		}
		text += "Nothing changed; the approval still waits. Reply again with corrected arguments.\n\n" + answerHelp
	}
	return text
}

// answer mails text to the sender of in, threaded under in and the
// approval's mails. With apID (only for senders that proved they hold the
// approval's token) the answer carries the approval's Message-ID tag and
// reply address, so replying to it works like replying to the card;
// refusals of unverified mail carry neither. A failure is logged, not retried: the decision (or
// refusal) is already recorded and audited, and a retry would need the
// mail read again.
func (a *Adapter) answer(ctx context.Context, in *inbound, apID, text string) {
	refs := append(append([]string{}, in.References...), in.MessageID)
	if len(refs) > 20 {
		refs = append(refs[:1], refs[len(refs)-19:]...)
	}
	m := outMail{
		To: []string{in.From}, Subject: "Re: " + subjectOr(baseSubject(in.Subject)),
		MessageID: a.tok.newMessageID(a.domain, apID), InReplyTo: in.MessageID, References: refs,
		Text: text, HTML: textToHTML(text),
	}
	if apID != "" {
		m.ReplyTo = a.tok.plusAddress(a.cfg.Address, apID, in.From)
	}
	if err := a.pace(ctx); err != nil {
		return
	}
	if err := a.deliver(ctx, m); err != nil {
		a.log.Error("email: answer not sent", "to", in.From, "err", err)
	}
}
