package email

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// The whole walk over real IMAP and SMTP: a request mail, the card mail to
// the approver (and a copy without a reply token to the requester) in the
// request's thread, a Gmail-shaped
// "approve" reply with the card quoted below it, the tool runs once, and
// the result and the closing "Approved by" mail are threaded under the
// request.
func TestApproveByReply(t *testing.T) {
	t.Parallel()
	for _, client := range []string{"gmail_reply.eml", "outlook_reply.eml", "apple_mail_reply.eml"} {
		t.Run(client, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{})
			req := e.Request("deploy api 1.2.3")
			card, ap := e.Card()

			if !slices.Equal(card.Rcpt, []string{bob}) {
				t.Errorf("card envelope recipients %v, want the approver alone", card.Rcpt)
			}
			if to, cc := card.Header.Get("To"), card.Header.Get("Cc"); !strings.Contains(to, bob) || cc != "" {
				t.Errorf("card To %q Cc %q: want To the approver, no Cc", to, cc)
			}
			copyMail := e.WaitMail("the requester's copy", func(m sent) bool { return slices.Equal(m.Rcpt, []string{alice}) && m.Subject == card.Subject })
			if copyMail.Header.Get("Reply-To") != "" || strings.Contains(copyMail.Text+copyMail.HTML, "ops+") ||
				!strings.Contains(copyMail.Text, "for your information") {
				t.Errorf("the requester's copy carries a way to decide: Reply-To %q\n%s", copyMail.Header.Get("Reply-To"), copyMail.Text)
			}
			if len(card.InReplyTo) != 1 || card.InReplyTo[0] != req || card.References[0] != req {
				t.Errorf("card not in the request's thread: In-Reply-To %v References %v", card.InReplyTo, card.References)
			}
			for _, want := range []string{"deploy", "service=api", "version=1.2.3"} {
				if !strings.Contains(card.Subject, want) {
					t.Errorf("card subject %q lacks %q", card.Subject, want)
				}
			}
			for _, part := range []string{card.Text, card.HTML} {
				for _, want := range []string{"deploy", "api", "1.2.3", "staging", "high_impact", Actor(alice), Actor(bob),
					"would deploy api 1.2.3 to staging", "approve", "reject: ", "edit", "Expires", ap.ID} {
					if !strings.Contains(part, want) && !strings.Contains(part, strings.ReplaceAll(want, "<", "&lt;")) {
						t.Errorf("card part lacks %q:\n%s", want, part)
					}
				}
			}
			if got := card.Header.Get("Auto-Submitted"); got != "auto-replied" {
				t.Errorf("Auto-Submitted %q", got)
			}
			if strings.Contains(card.HTML, "href=\"http") && strings.Contains(card.HTML, "approve?") {
				t.Error("the card carries a link that decides")
			}

			e.ReplyTo(card, client, bob, "", "approve")
			run := e.h.WaitRun(e.OnlyRun().ID, core.RunSucceeded)
			if d := e.h.Dispatches(); len(d) != 1 || d[0].Args["version"] != "1.2.3" {
				t.Fatalf("dispatches %+v, want one of version 1.2.3", d)
			}
			result := e.WaitMail("the result mail", func(m sent) bool { return strings.Contains(m.Text, "deployed api 1.2.3 to staging") })
			if result.Header.Get("To") == "" || !strings.Contains(result.Header.Get("To"), alice) ||
				len(result.InReplyTo) != 1 || result.InReplyTo[0] != req || result.References[0] != req ||
				result.Subject != "Re: deploy api 1.2.3" {
				t.Errorf("result not threaded under the request: To %q In-Reply-To %v References %v Subject %q",
					result.Header.Get("To"), result.InReplyTo, result.References, result.Subject)
			}
			if !strings.Contains(result.HTML, "deployed api 1.2.3 to staging") {
				t.Errorf("result HTML part %q", result.HTML)
			}
			closing := e.WaitMail("the closing mail", func(m sent) bool { return strings.Contains(m.Text, "Approved by "+Actor(bob)) })
			if !slices.Contains(closing.InReplyTo, card.MessageID) || !strings.Contains(closing.Subject, card.Subject) {
				t.Errorf("closing mail not threaded under the card: In-Reply-To %v Subject %q", closing.InReplyTo, closing.Subject)
			}
			if run.Requester != Actor(alice) || run.Thread.Channel != ChannelName {
				t.Errorf("run requester %q thread %v", run.Requester, run.Thread)
			}
		})
	}
}

func TestRejectByReply(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.Request("deploy api 1.2.3")
	card, _ := e.Card()
	e.ReplyTo(card, "outlook_original_message.eml", bob, "", "reject: not during the freeze")
	e.h.WaitRun(e.OnlyRun().ID, core.RunRejected)
	e.WaitMail("the closing mail", func(m sent) bool {
		return strings.Contains(m.Text, "Rejected by "+Actor(bob)) && strings.Contains(m.Text, "not during the freeze")
	})
	if d := e.h.Dispatches(); len(d) != 0 {
		t.Errorf("rejected call dispatched: %+v", d)
	}
}

// An edit with invalid arguments is answered in the thread and changes
// nothing; a second edit, replying to that answer, runs the tool with the
// new arguments.
func TestEditByReply(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.Request("deploy api 1.2.3")
	card, ap := e.Card()
	e.ReplyTo(card, "gmail_reply.eml", bob, "", "edit\nservice: API!\nversion: 1.2.4")
	invalid := e.WaitMail("the validation answer", func(m sent) bool { return strings.Contains(m.Text, "Arguments not accepted") })
	if !strings.Contains(invalid.Text, "service") || invalid.Header.Get("To") == "" || !strings.Contains(invalid.Header.Get("To"), bob) {
		t.Errorf("validation answer: To %q text %q", invalid.Header.Get("To"), invalid.Text)
	}
	if got, _ := e.h.Store.ApprovalGet(context.Background(), ap.ID); got.Status != approvals.StatusPending {
		t.Fatalf("approval %s after an invalid edit, want pending", got.Status)
	}
	e.ReplyTo(invalid, "apple_mail_reply.eml", bob, "", "edit {\"service\":\"api\",\"version\":\"1.2.4\"}")
	e.h.WaitRun(e.OnlyRun().ID, core.RunSucceeded)
	if d := e.h.Dispatches(); len(d) != 1 || d[0].Args["version"] != "1.2.4" || d[0].Args["env"] != "staging" {
		t.Fatalf("dispatches %+v, want one with the edited version and the schema default env", d)
	}
	if got, _ := e.h.Store.ApprovalGet(context.Background(), ap.ID); got.Status != approvals.StatusEdited {
		t.Errorf("approval %s, want edited", got.Status)
	}
}

// Replies that fail a check are refused, answered and audited, and decide
// nothing: no token (sent to the bare address), a forged From with a
// stolen Message-ID, a non-approver holding the token.
func TestRefusedReplies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.Request("deploy api 1.2.3")
	card, ap := e.Card()
	sentBefore := len(e.smtp.Sent())

	e.ReplyTo(card, "gmail_reply.eml", bob, botAddr, "approve") // no token
	e.WaitMail("the no-token refusal", func(m sent) bool { return strings.Contains(m.Text, "approval's own reply address") })

	// A forger who saw the card's Message-ID (say, in a forwarded
	// thread) but not its Reply-To, posing as the approver.
	forged := testMail{From: "Bob <" + bob + ">", Subject: "Re: " + card.Subject, InReplyTo: card.MessageID,
		References: "<" + card.MessageID + ">", Body: "approve"}
	e.Deliver(forged)

	e.ReplyTo(card, "outlook_reply.eml", carol, "", "approve") // bob's token, another sender
	e.WaitMail("the wrong-sender refusal", func(m sent) bool { return strings.Contains(m.Text, "sent to another approver") })

	e.h.Eventually("three refusals audited", func() bool { return len(e.Audit("approval.refused")) >= 3 })
	refused := e.Audit("approval.refused")
	var actors []string
	for _, a := range refused {
		actors = append(actors, a.Actor)
		if a.ApprovalID != ap.ID {
			t.Errorf("refusal audited against %q, want %q", a.ApprovalID, ap.ID)
		}
	}
	if !strings.Contains(string(refused[0].Detail), "missing_reply_token") || !slices.Contains(actors, Actor(carol)) {
		t.Errorf("audit %v / %s: want the missing token and carol's attempt", actors, refused[0].Detail)
	}
	if got, _ := e.h.Store.ApprovalGet(context.Background(), ap.ID); got.Status != approvals.StatusPending || len(got.Decisions) != 0 {
		t.Errorf("approval %s with %d decisions after refused replies", got.Status, len(got.Decisions))
	}
	if d := e.h.Dispatches(); len(d) != 0 {
		t.Errorf("refused replies dispatched %+v", d)
	}
	if n := len(e.smtp.Sent()) - sentBefore; n != 3 {
		t.Errorf("%d answers to 3 refused replies", n)
	}
	// Refusals of unverified mail carry no token to reply with.
	for _, m := range e.smtp.Sent()[sentBefore:] {
		if m.Header.Get("Reply-To") != "" {
			t.Errorf("refusal %q hands out a reply address %q", m.Text, m.Header.Get("Reply-To"))
		}
	}
}

// With require_dmarc, a reply holding the token from the right person still
// needs our MX to vouch for its domain.
func TestRequireDMARC(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{RequireDMARC: true})
	e.Deliver(testMail{From: alice, Subject: "deploy api 1.2.3",
		Headers: []string{"Authentication-Results: mx.example.com; dkim=pass header.d=example.com"}})
	card, ap := e.Card()
	reply := func(ar string) {
		e.Deliver(testMail{From: bob, To: replyAddress(t, card), Subject: "Re: " + card.Subject, InReplyTo: card.MessageID,
			References: "<" + card.MessageID + ">", Body: "approve", Headers: []string{"Authentication-Results: " + ar}})
	}
	reply("mx.example.com; dkim=pass header.d=evil.example; dmarc=fail header.from=example.com")
	e.WaitMail("the authentication refusal", func(m sent) bool { return strings.Contains(m.Text, "could not be authenticated") })
	if got, _ := e.h.Store.ApprovalGet(context.Background(), ap.ID); got.Status != approvals.StatusPending {
		t.Fatalf("approval %s after an unauthenticated reply", got.Status)
	}
	reply("mx.example.com; dkim=pass header.d=example.com; dmarc=pass header.from=example.com")
	e.h.WaitRun(e.OnlyRun().ID, core.RunSucceeded)

	// A request without our MX's word is dropped unanswered.
	before := len(e.smtp.Sent())
	e.Deliver(testMail{From: alice, Subject: "deploy web 2"})
	e.WaitCursor(e.a, 4)
	if runs := e.Runs(); len(runs) != 1 {
		t.Errorf("%d runs: an unauthenticated request started one", len(runs))
	}
	e.h.WaitIdle()
	for _, m := range e.smtp.Sent()[before:] {
		if strings.Contains(m.Subject, "deploy web 2") {
			t.Errorf("unauthenticated request answered: %q", m.Subject)
		}
	}
}

// Auto-replies, bounces and list mail are never answered and start nothing.
func TestAutomaticMailIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.Deliver(testMail{From: alice, Subject: "Automatic reply: deploy api 1.2.3", Body: "deploy api 1.2.3",
		Headers: []string{"Auto-Submitted: auto-replied"}})
	e.Deliver(testMail{From: "Mail Delivery Subsystem <MAILER-DAEMON@mx.example.com>", Subject: "Undelivered Mail Returned to Sender",
		Headers: []string{"Return-Path: <>"}, Body: "deploy api 1.2.3"})
	e.Deliver(testMail{From: alice, Subject: "deploy api 1.2.3", Headers: []string{"List-Id: <ops.lists.example.com>"}})
	e.Deliver(testMail{From: alice, Subject: "deploy api 1.2.3", Headers: []string{"Precedence: bulk"}})
	e.Deliver(testMail{From: botAddr, Subject: "deploy api 1.2.3"}) // our own mail, looped back
	e.WaitCursor(e.a, 5)
	e.h.StoreEmpty(t)
	if s := e.smtp.Sent(); len(s) != 0 {
		t.Errorf("automatic mail answered: %+v", s[0].Subject)
	}
}

// A mail that matches no command gets the help text in its thread; a
// reply in that thread (to our answer) is a request of the same thread.
func TestRepliesStayInThread(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	req := e.Request("hello there")
	help := e.WaitSent(1)
	if !strings.Contains(help.Text, "deploy") || help.InReplyTo[0] != req {
		t.Fatalf("help answer %q In-Reply-To %v", help.Text, help.InReplyTo)
	}
	e.Deliver(testMail{From: alice, Subject: "Re: hello there", InReplyTo: help.MessageID,
		References: "<" + req + "> <" + help.MessageID + ">", Body: "deploy api 1.2.3\n\nOn Sun, 29 Nov 2026 at 13:00, ops wrote:\n> commands:"})
	run := e.OnlyRun()
	if want := (threadKey{Addr: alice, Root: req, Subject: "hello there"}).thread(); run.Thread != want {
		t.Errorf("run thread %v, want %v", run.Thread, want)
	}
	if run.Args["service"] != "api" || run.Args["version"] != "1.2.3" {
		t.Errorf("run args %v", run.Args)
	}
}

// With a quorum of two, the first approval is counted and answered; the
// second ends the approval.
func TestQuorumByReply(t *testing.T) {
	t.Parallel()
	dave := "dave@example.com"
	e := newEnv(t, envOptions{Policy: &approvals.Policy{Rules: []approvals.Rule{
		{Tool: "deploy", Effect: approvals.EffectAsk, Approvers: []string{Actor(bob), Actor(dave)}, Quorum: 2},
	}}})
	e.Request("deploy api 1.2.3")
	e.Card()
	card, daves := e.CardFor(bob), e.CardFor(dave)
	if replyAddress(t, card) == replyAddress(t, daves) {
		t.Errorf("both approvers got the same reply token: %s", replyAddress(t, card))
	}
	e.ReplyTo(card, "gmail_reply.eml", bob, "", "approve")
	counted := e.WaitMail("the counted answer", func(m sent) bool { return strings.Contains(m.Text, "counted") })
	if !strings.Contains(counted.Header.Get("To"), bob) {
		t.Errorf("counted answer to %q", counted.Header.Get("To"))
	}
	e.ReplyTo(card, "apple_mail_reply.eml", bob, "", "approve") // twice is still one
	e.WaitMail("the duplicate refusal", func(m sent) bool { return strings.Contains(m.Text, "already counted") })
	if len(e.h.Dispatches()) != 0 {
		t.Fatal("dispatched before the quorum")
	}
	e.ReplyTo(daves, "outlook_reply.eml", dave, "", "approve")
	e.h.WaitRun(e.OnlyRun().ID, core.RunSucceeded)
	if n := len(e.h.Dispatches()); n != 1 {
		t.Errorf("%d dispatches", n)
	}
}

// The same walk with IMAP over implicit TLS and SMTP with STARTTLS and
// AUTH, certificates verified.
func TestOverTLS(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{TLS: true})
	e.Request("deploy api 1.2.3")
	card, _ := e.Card()
	e.ReplyTo(card, "gmail_reply.eml", bob, "", "approve")
	e.h.WaitRun(e.OnlyRun().ID, core.RunSucceeded)
}
