package email

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
)

// testCert is a self-signed certificate for 127.0.0.1 and the pool that
// trusts it.
func testCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// smtpServer starts a capture server with TLS options: starttls offers
// STARTTLS, implicit serves TLS from the first byte.
func smtpServer(t *testing.T, cert tls.Certificate, starttls, implicit bool) *smtpCapture {
	t.Helper()
	c := &smtpCapture{user: "ops-smtp", pass: "smtp-secret", threads: map[string]core.Thread{}}
	s := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &smtpSession{c: c}, nil }))
	s.Domain, s.ErrorLog = "capture.test", log.New(io.Discard, "", 0)
	if starttls {
		s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if implicit {
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}})
	}
	c.Addr = ln.Addr().String()
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return c
}

func sendAdapter(t *testing.T, smtpCfg SMTPConfig, pool *x509.CertPool) *Adapter {
	t.Helper()
	a, err := New(Config{
		Address: botAddr, TokenKey: tokenKey,
		IMAP: IMAPConfig{Addr: "127.0.0.1:1", Username: "u"}, SMTP: smtpCfg,
	}, Deps{Sink: nopSink{}, Cards: nopCards{}, Store: newMemState(), TLSConfig: &tls.Config{RootCAs: pool}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

type nopSink struct{}

func (nopSink) HandleEvent(context.Context, core.ChannelEvent) (core.Receipt, error) {
	return core.Receipt{}, nil
}

type nopCards struct{}

func (nopCards) CardByApproval(context.Context, string) (core.Card, error) {
	return core.Card{}, core.ErrNotFound
}

var replyThread = threadKey{Addr: alice, Root: "req@example.com", Subject: "deploy api 1"}.thread()

func TestSMTPTransports(t *testing.T) {
	t.Parallel()
	cert, pool := testCert(t)
	for _, c := range []struct {
		name               string
		starttls, implicit bool
	}{{"STARTTLS", true, false}, {"ImplicitTLS", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := smtpServer(t, cert, c.starttls, c.implicit)
			a := sendAdapter(t, SMTPConfig{Addr: srv.Addr, TLS: c.implicit, StartTLS: c.starttls,
				Username: "ops-smtp", Password: "smtp-secret"}, pool)
			ref, err := a.Send(context.Background(), core.Outbound{Thread: replyThread, Kind: core.KindReply, Text: "<p>hi <strong>there</strong></p>", Part: 1, Parts: 1})
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			got := srv.Sent()
			if len(got) != 1 || got[0].MessageID != ref.ID || got[0].From != botAddr || got[0].Rcpt[0] != alice {
				t.Fatalf("sent %+v, ref %+v", got, ref)
			}
			if got[0].Text != "hi there" || !strings.Contains(got[0].HTML, "<strong>there</strong>") {
				t.Errorf("parts: text %q html %q", got[0].Text, got[0].HTML)
			}
			// An untrusted certificate is refused, not sent to.
			b := sendAdapter(t, SMTPConfig{Addr: srv.Addr, TLS: c.implicit, StartTLS: c.starttls}, x509.NewCertPool())
			if _, err := b.Send(context.Background(), core.Outbound{Thread: replyThread, Kind: core.KindReply, Text: "x"}); err == nil {
				t.Error("sent over TLS to an untrusted certificate")
			}
		})
	}
}

func TestSMTPErrors(t *testing.T) {
	t.Parallel()
	srv := newSMTPCapture(t, "ops-smtp", "smtp-secret")
	out := core.Outbound{Thread: replyThread, Kind: core.KindReply, Text: "x"}
	var perm *core.PermanentError
	if _, err := sendAdapter(t, SMTPConfig{Addr: srv.Addr}, nil).Send(context.Background(), out); !errors.As(err, &perm) {
		t.Errorf("unauthenticated send: %v, want a permanent 5xx", err)
	}
	if _, err := sendAdapter(t, SMTPConfig{Addr: srv.Addr, Username: "ops-smtp", Password: "wrong"}, nil).Send(context.Background(), out); !errors.As(err, &perm) {
		t.Errorf("bad password: %v, want permanent", err)
	}
	a := sendAdapter(t, SMTPConfig{Addr: srv.Addr, Username: "ops-smtp", Password: "smtp-secret"}, nil)
	srv.mu.Lock()
	srv.fail = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 28}, Message: "unusual rate of mail"}
	srv.mu.Unlock()
	var rl *core.RateLimitError
	if _, err := a.Send(context.Background(), out); !errors.As(err, &rl) || rl.RetryAfter <= 0 || rl.Scope != "account" {
		t.Errorf("421 4.7.28: %v, want a rate limit on the account", err)
	}
	srv.mu.Lock()
	srv.fail = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"}
	srv.mu.Unlock()
	if _, err := a.Send(context.Background(), out); err == nil || errors.As(err, &perm) || errors.As(err, &rl) {
		t.Errorf("451: %v, want a transient error", err)
	}
	if _, err := a.Send(context.Background(), core.Outbound{Thread: core.Thread{Channel: "email", Key: "garbage"}, Kind: core.KindReply}); !errors.As(err, &perm) {
		t.Errorf("bad thread key: %v, want permanent", err)
	}
	if _, err := a.Send(context.Background(), core.Outbound{Thread: replyThread, Kind: core.KindCard}); !errors.As(err, &perm) {
		t.Errorf("card without card: %v, want permanent", err)
	}
}

func TestReplyChunksNumbered(t *testing.T) {
	t.Parallel()
	srv := newSMTPCapture(t, "", "")
	a := sendAdapter(t, SMTPConfig{Addr: srv.Addr}, nil)
	for i := 1; i <= 2; i++ {
		if _, err := a.Send(context.Background(), core.Outbound{Thread: replyThread, Kind: core.KindReply, Text: "part", Part: i, Parts: 2}); err != nil {
			t.Fatal(err)
		}
	}
	got := srv.Sent()
	if got[0].Subject != "Re: deploy api 1 (1/2)" || got[1].Subject != "Re: deploy api 1 (2/2)" {
		t.Errorf("subjects %q, %q", got[0].Subject, got[1].Subject)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	ok := Config{Address: "Ops@Example.com", TokenKey: tokenKey,
		IMAP: IMAPConfig{Addr: "imap.example.com:993", TLS: true, Username: "u"},
		SMTP: SMTPConfig{Addr: "smtp.example.com:587", StartTLS: true}}
	c, err := ok.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Address != "ops@example.com" || c.IMAP.Mailbox != "INBOX" ||
		c.IdleRestart != 25*time.Minute || c.SendInterval != time.Second || c.Backfill != 24*time.Hour {
		t.Errorf("defaults: %+v", c)
	}
	for name, mod := range map[string]func(*Config){
		"address":       func(c *Config) { c.Address = "not an address" },
		"plus address":  func(c *Config) { c.Address = "ops+x@example.com" },
		"token_key":     func(c *Config) { c.TokenKey = "short" },
		"authserv_id":   func(c *Config) { c.RequireDMARC = true },
		"imap plain":    func(c *Config) { c.IMAP.TLS = false },
		"smtp both":     func(c *Config) { c.SMTP.TLS = true },
		"smtp.addr":     func(c *Config) { c.SMTP.Addr = "smtp.example.com" },
		"imap.username": func(c *Config) { c.IMAP.Username = "" },
		"idle_restart":  func(c *Config) { c.IdleRestart = 30 * time.Minute },
	} {
		bad := ok
		mod(&bad)
		if _, err := bad.withDefaults(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	loop := ok
	loop.IMAP = IMAPConfig{Addr: "127.0.0.1:143", Username: "u"}
	if _, err := loop.withDefaults(); err != nil {
		t.Errorf("plaintext to loopback refused: %v", err)
	}
	if _, err := New(ok, Deps{}); !errors.Is(err, ErrConfig) {
		t.Errorf("New without Sink: %v", err)
	}
	if _, err := New(ok, Deps{Sink: nopSink{}, Cards: nopCards{}}); !errors.Is(err, ErrConfig) {
		t.Errorf("New without Store (where the cursor lives): %v", err)
	}
}

var _ adaptertest.Fake = (*smtpCapture)(nil)
