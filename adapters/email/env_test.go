package email

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

const (
	botAddr  = "ops@example.com"
	alice    = "alice@example.com" // asks
	bob      = "bob@example.com"   // approves
	carol    = "carol@example.com" // may not approve
	tokenKey = "test-token-key-0123456789"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is one test's world: the real engine and delivery pipeline on a
// fresh SQLite store, an in-process IMAP server holding the bot's mailbox,
// a capturing SMTP server, and the adapter between them.
type env struct {
	t    *testing.T
	h    *adaptertest.Harness
	a    *Adapter
	cfg  Config
	imap *imapFake
	smtp *smtpCapture
	seq  atomic.Int64
	deps Deps
}

type envOptions struct {
	Approvers    []string
	NoIdle       bool
	RequireDMARC bool
	SMTPAuth     bool
	// NoRun leaves the IMAP watcher stopped (Start starts it).
	NoRun bool
	// TLS serves IMAP over implicit TLS and SMTP with STARTTLS (and AUTH),
	// with a certificate the adapter is told to trust.
	TLS bool
	// Policy replaces the harness's "ask Approvers for deploy".
	Policy *approvals.Policy
	// Base is the harness's options as a case asked for them.
	Base adaptertest.HarnessOptions
	// Harness adjusts the harness's options (agents, tools, pacing).
	Harness func(*adaptertest.HarnessOptions)
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	e := &env{t: t, deps: Deps{Logger: quiet}}
	switch {
	case o.TLS:
		cert, pool := testCert(t)
		e.imap = newIMAPFake(t, !o.NoIdle, cert)
		e.smtp = smtpServer(t, cert, true, false)
		e.deps.TLSConfig = &tls.Config{RootCAs: pool}
	case o.SMTPAuth:
		e.imap = newIMAPFake(t, !o.NoIdle)
		e.smtp = newSMTPCapture(t, "ops-smtp", "smtp-secret")
	default:
		e.imap = newIMAPFake(t, !o.NoIdle)
		e.smtp = newSMTPCapture(t, "", "")
	}
	e.cfg = Config{
		Address: botAddr, TokenKey: tokenKey,
		IMAP: IMAPConfig{Addr: e.imap.Addr, Username: imapUser, Password: imapPass},
		SMTP: SMTPConfig{Addr: e.smtp.Addr},
		// Fast everything: tests wait milliseconds, not minutes.
		IdleRestart: 300 * time.Millisecond, PollInterval: 30 * time.Millisecond,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, SendInterval: time.Millisecond,
		RequireDMARC: o.RequireDMARC, AuthservID: "mx.example.com",
	}
	if o.SMTPAuth || o.TLS {
		e.cfg.SMTP.Username, e.cfg.SMTP.Password = "ops-smtp", "smtp-secret"
	}
	if o.TLS {
		e.cfg.IMAP.TLS, e.cfg.SMTP.StartTLS = true, true
	}
	approvers := o.Approvers
	if approvers == nil {
		approvers = []string{Actor(bob), "console:admin"}
	}
	ho := o.Base
	ho.Approvers = approvers
	if o.Policy != nil {
		ho.Policy = o.Policy
	}
	ho.Platform = func(h *adaptertest.Harness) delivery.Platform {
		e.a = e.newAdapter(h)
		return e.a
	}
	if o.Harness != nil {
		o.Harness(&ho)
	}
	e.h = adaptertest.NewHarness(t, ho)
	if !o.NoRun {
		e.Start(e.a)
	}
	return e
}

func (e *env) newAdapter(h *adaptertest.Harness) *Adapter {
	e.t.Helper()
	d := e.deps
	d.Sink, d.Cards, d.Store = h.Engine, h.Engine, h.Store
	a, err := New(e.cfg, d)
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	return a
}

// Start runs a's IMAP watcher until the returned stop (or the test's end).
func (e *env) Start(a *Adapter) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var stopped atomic.Bool
	stop = func() {
		if stopped.Swap(true) {
			return
		}
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
	}
	e.t.Cleanup(stop)
	return stop
}

// Deliver puts m in the bot's mailbox and returns its Message-ID.
func (e *env) Deliver(m testMail) string {
	e.t.Helper()
	if m.MessageID == "" {
		m.MessageID = fmt.Sprintf("m%d-%d@mail.example.com", e.seq.Add(1), time.Now().UnixNano())
	}
	if m.To == "" {
		m.To = botAddr
	}
	e.imap.Deliver(e.t, m.String())
	return m.MessageID
}

// Request mails a command from alice and returns its Message-ID.
func (e *env) Request(subject string) string {
	return e.Deliver(testMail{From: "Alice <" + alice + ">", Subject: subject, Body: "Thanks!\n-- \nAlice"})
}

// WaitCursor waits until the watcher handed every message up to uid to the
// sink (or skipped it on purpose).
func (e *env) WaitCursor(a *Adapter, uid uint32) {
	e.t.Helper()
	e.h.Eventually(fmt.Sprintf("the cursor to reach UID %d", uid), func() bool { return a.Cursor().LastUID >= uid })
}

// WaitSent waits for the n-th mail and returns it.
func (e *env) WaitSent(n int) sent {
	e.t.Helper()
	e.h.Eventually(fmt.Sprintf("%d mails sent", n), func() bool { return len(e.smtp.Sent()) >= n })
	return e.smtp.Sent()[n-1]
}

// WaitMail waits for a sent mail that matches and returns it.
func (e *env) WaitMail(what string, match func(sent) bool) sent {
	e.t.Helper()
	var found sent
	e.h.Eventually(what, func() bool {
		for _, m := range e.smtp.Sent() {
			if match(m) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// Runs returns every run in the store.
func (e *env) Runs() []*core.Run {
	e.t.Helper()
	runs, _, err := e.h.Store.RunList(context.Background(), core.RunListParams{Limit: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	return runs
}

// OnlyRun waits for the one run of the test.
func (e *env) OnlyRun() *core.Run {
	e.t.Helper()
	e.h.Eventually("a run", func() bool { return len(e.Runs()) > 0 })
	if runs := e.Runs(); len(runs) != 1 {
		e.t.Fatalf("%d runs, want 1", len(runs))
	}
	return e.Runs()[0]
}

// Card waits for the card mails of the only run's pending approval — an
// approver's (returned) and the requester's token-less copy, which is sent
// last — so that counts of later mails see only what came after.
func (e *env) Card() (sent, *approvals.Approval) {
	e.t.Helper()
	ap := e.h.WaitApprovalPending(e.OnlyRun().ID)
	card := e.WaitMail("the card mail", func(m sent) bool { return strings.Contains(m.Header.Get("Reply-To"), "+") })
	e.WaitMail("the requester's copy of the card", func(m sent) bool {
		return m.Subject == card.Subject && !strings.Contains(m.Header.Get("Reply-To"), "+") && !slices.Equal(m.Rcpt, card.Rcpt)
	})
	return card, ap
}

// CardFor waits for the card mail sent to approver addr (each approver
// gets their own, with their own reply token).
func (e *env) CardFor(addr string) sent {
	e.t.Helper()
	return e.WaitMail("the card mail to "+addr, func(m sent) bool {
		return strings.Contains(m.Header.Get("Reply-To"), "+") && slices.Equal(m.Rcpt, []string{addr})
	})
}

// ReplyTo answers mail m from sender with answer, shaped by the testdata
// client file (gmail_reply.eml, …), to the address m asks replies to go to
// unless to is set.
func (e *env) ReplyTo(m sent, file, sender, to, answer string) string {
	e.t.Helper()
	if to == "" {
		to = replyAddress(e.t, m)
	}
	id := fmt.Sprintf("r%d-%d@mail.example.com", e.seq.Add(1), time.Now().UnixNano())
	refs := "<" + strings.Join(append(slices.Clone(m.References), m.MessageID), "> <") + ">"
	e.imap.Deliver(e.t, loadReply(e.t, file, map[string]string{
		"FROM": sender, "TO": to, "SUBJECT": m.Subject, "MESSAGE_ID": id, "IN_REPLY_TO": m.MessageID,
		"REFERENCES": refs, "ANSWER": answer,
	}))
	return id
}

func replyAddress(t *testing.T, m sent) string {
	t.Helper()
	list, err := m.Header.AddressList("Reply-To")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 {
		list, _ = m.Header.AddressList("From")
	}
	return list[0].Address
}

// Audit returns the audit entries of kind.
func (e *env) Audit(kind string) []approvals.AuditEntry {
	e.t.Helper()
	es, err := e.h.Store.AuditList(context.Background(), approvals.AuditListParams{Limit: 500})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []approvals.AuditEntry
	for _, a := range es {
		if string(a.Kind) == kind {
			out = append(out, a)
		}
	}
	return out
}
