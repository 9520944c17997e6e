package email

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/opsgate/opsgate/adapters/adaptertest"
)

// allowedTags are the elements markdown.RenderHTML may emit; any
// other tag in a rendering of hostile text is live markup.
var (
	tagRE       = regexp.MustCompile(`</?([a-zA-Z][a-zA-Z0-9]*)[^>]*>`)
	allowedTags = map[string]bool{"p": true, "br": true, "strong": true, "em": true, "code": true, "pre": true,
		"a": true, "ul": true, "ol": true, "li": true, "blockquote": true}
)

// inertHTML fails a rendering that holds a tag outside the dialect, any
// link (no hostile input is a safe Markdown link), or unbalanced emphasis.
func inertHTML(input, rendered string) error {
	for _, m := range tagRE.FindAllStringSubmatch(rendered, -1) {
		if !allowedTags[strings.ToLower(m[1])] {
			return fmt.Errorf("live <%s> tag", m[1])
		}
	}
	if strings.Contains(rendered, "<a ") {
		return fmt.Errorf("a live link")
	}
	for _, tag := range []string{"strong", "em", "code", "pre"} {
		if o, c := strings.Count(rendered, "<"+tag+">")+strings.Count(rendered, "<"+tag+" "), strings.Count(rendered, "</"+tag+">"); o != c {
			return fmt.Errorf("<%s> opened %d times, closed %d", tag, o, c)
		}
	}
	return nil
}

// mailDriver speaks to the adapter as a mail client does: a new mail to the
// bot's address (the subject is the request), or a reply to one of the
// bot's mails (In-Reply-To, References, the original quoted below, sent to
// the address the mail asks replies to go to).
type mailDriver struct{ e *env }

func address(actor string) string { return strings.TrimPrefix(actor, ChannelName+":") }

func (d mailDriver) Say(t *testing.T, actor, text string) {
	d.e.Deliver(testMail{From: address(actor), Subject: text, Body: "Thanks"})
}

func (d mailDriver) Reply(t *testing.T, actor string, to adaptertest.Message, text string) {
	var orig *sent
	for _, m := range d.e.smtp.Sent() {
		if m.MessageID == to.ID {
			orig = &m
			break
		}
	}
	if orig == nil {
		t.Fatalf("no mail %s was sent", to.ID)
	}
	dest := botAddr
	if rt, err := orig.Header.AddressList("Reply-To"); err == nil && len(rt) > 0 {
		dest = rt[0].Address
	}
	refs := "<" + strings.Join(append(orig.References, orig.MessageID), "> <") + ">"
	quoted := "> " + strings.ReplaceAll(strings.TrimSpace(orig.Text), "\n", "\n> ")
	d.e.Deliver(testMail{From: address(actor), To: dest, Subject: "Re: " + orig.Subject, InReplyTo: orig.MessageID,
		References: refs, Body: text + "\n\nOn Mon, ops wrote:\n" + quoted})
}

func TestConformance(t *testing.T) {
	thread := threadKey{Addr: alice, Root: "conformance-root@example.com", Subject: "deploy api 1.2.3"}.thread()
	var envs sync.Map // *adaptertest.Harness → *env
	adaptertest.RunConformance(t, adaptertest.Suite{
		New: func(t *testing.T, o adaptertest.HarnessOptions) (*adaptertest.Harness, adaptertest.Fake) {
			e := newEnv(t, envOptions{Approvers: []string{Actor(bob), "console:admin"}, NoRun: true, Base: o})
			e.smtp.threads["conformance-root@example.com"] = thread
			envs.Store(e.h, e)
			return e.h, e.smtp
		},
		Chat: func(t *testing.T, h *adaptertest.Harness) adaptertest.Chat {
			v, _ := envs.Load(h)
			e := v.(*env)
			e.Start(e.a)
			return mailDriver{e}
		},
		Lacks: map[adaptertest.Capability]string{
			adaptertest.CapButtons: "mail has no buttons: a question is answered by replying to it, a batch by replying \"approve all\" to its card",
			adaptertest.CapForms:   "mail has no forms: a reply answers",
			adaptertest.CapEdit:    "a sent mail cannot change: the answer to a question comes as a new mail in the thread",
			adaptertest.CapDirect:  "mail has no private chat: a reply continues the conversation (In-Reply-To)",
		},
		Thread: thread, Requester: Actor(alice), Approver: Actor(bob),
		Inert: inertHTML,
		// The email channel's inbound endpoint is the mailbox: forged and
		// malformed mail is delivered there and must change nothing.
		BadInput: func(t *testing.T, h *adaptertest.Harness) {
			v, _ := envs.Load(h)
			e := v.(*env)
			e.Start(e.a)
			e.imap.Deliver(t, "this is not a mail\n\n")
			e.imap.Deliver(t, "Subject: no sender\n\nbody\n")
			e.Deliver(testMail{From: alice, Subject: "Out of office", Headers: []string{"Auto-Submitted: auto-replied"}})
			e.Deliver(testMail{From: "MAILER-DAEMON@mx.example.com", Subject: "failure notice", Headers: []string{"Return-Path: <>"}})
			// A reply to an approval that never existed, with a forged tag.
			e.Deliver(testMail{From: bob, Subject: "Re: x", InReplyTo: "og.a.inope." + strings.Repeat("a", tokenLen) + ".x@example.com", Body: "approve"})
			e.WaitCursor(e.a, 5)
			if s := e.smtp.Sent(); len(s) != 0 {
				t.Errorf("bad input answered: %q", s[0].Subject)
			}
		},
	})
}
