package email

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	gomail "github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/opsgate/opsgate/core"
)

// outMail is one mail to compose: who, threading, and both bodies.
type outMail struct {
	To, Cc     []string
	Subject    string
	MessageID  string // bare
	InReplyTo  string // bare
	References []string
	ReplyTo    string
	Text, HTML string
}

// tlsFor returns the TLS config for a host: a clone of base (or a fresh
// one) with ServerName set, so the certificate is checked against the host
// we meant to reach.
func tlsFor(base *tls.Config) func(host string) *tls.Config {
	return func(host string) *tls.Config {
		c := &tls.Config{MinVersion: tls.VersionTLS12}
		if base != nil {
			c = base.Clone()
		}
		if c.ServerName == "" {
			c.ServerName = host
		}
		return c
	}
}

// compose writes m as multipart/alternative (text, then HTML) with our
// From, threading headers and the loop-prevention headers of RFC 3834.
func (a *Adapter) compose(m outMail) ([]byte, error) {
	var h gomail.Header
	h.SetDate(a.now())
	h.SetAddressList("From", []*gomail.Address{{Name: a.cfg.Name, Address: a.cfg.Address}})
	h.SetAddressList("To", addrs(m.To))
	if len(m.Cc) > 0 {
		h.SetAddressList("Cc", addrs(m.Cc))
	}
	if m.ReplyTo != "" {
		h.SetAddressList("Reply-To", []*gomail.Address{{Name: a.cfg.Name, Address: m.ReplyTo}})
	}
	h.SetSubject(m.Subject)
	h.SetMessageID(m.MessageID)
	if m.InReplyTo != "" {
		h.SetMsgIDList("In-Reply-To", []string{m.InReplyTo})
	}
	if len(m.References) > 0 {
		h.SetMsgIDList("References", m.References)
	}
	// We answer people, and must never start a loop with another robot.
	h.Set("Auto-Submitted", "auto-replied")
	h.Set("X-Auto-Response-Suppress", "All")
	var buf bytes.Buffer
	w, err := gomail.CreateWriter(&buf, h)
	if err != nil {
		return nil, fmt.Errorf("email: compose: %w", err)
	}
	iw, err := w.CreateInline()
	if err != nil {
		return nil, fmt.Errorf("email: compose: %w", err)
	}
	for _, p := range []struct{ typ, body string }{{"text/plain", m.Text}, {"text/html", m.HTML}} {
		var ph gomail.InlineHeader
		ph.SetContentType(p.typ, map[string]string{"charset": "utf-8"})
		ph.Set("Content-Transfer-Encoding", "quoted-printable")
		pw, err := iw.CreatePart(ph)
		if err != nil {
			return nil, fmt.Errorf("email: compose %s: %w", p.typ, err)
		}
		if _, err := io.WriteString(pw, p.body); err != nil {
			return nil, fmt.Errorf("email: compose %s: %w", p.typ, err)
		}
		if err := pw.Close(); err != nil {
			return nil, fmt.Errorf("email: compose %s: %w", p.typ, err)
		}
	}
	if err := iw.Close(); err != nil {
		return nil, fmt.Errorf("email: compose: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("email: compose: %w", err)
	}
	return buf.Bytes(), nil
}

func addrs(list []string) []*gomail.Address {
	out := make([]*gomail.Address, 0, len(list))
	for _, s := range list {
		out = append(out, &gomail.Address{Address: s})
	}
	return out
}

// submit hands one message to the SMTP server: implicit TLS or STARTTLS
// per config (plaintext only to loopback, enforced by Config), SASL PLAIN
// when a username is set. Errors: *core.PermanentError for a 5xx answer,
// *core.RateLimitError for a 4xx the server says is about rate, anything
// else is transient.
func (a *Adapter) submit(ctx context.Context, rcpts []string, msg []byte) error {
	if len(rcpts) == 0 {
		return &core.PermanentError{Err: errors.New("email: no recipients")}
	}
	host, _, _ := net.SplitHostPort(a.cfg.SMTP.Addr)
	conn, err := a.dial(ctx, "tcp", a.cfg.SMTP.Addr)
	if err != nil {
		return fmt.Errorf("email: smtp dial %s: %w", a.cfg.SMTP.Addr, err)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(2 * time.Minute)
	}
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var c *smtp.Client
	switch {
	case a.cfg.SMTP.TLS:
		c = smtp.NewClient(tls.Client(conn, a.tlsCfg(host)))
	case a.cfg.SMTP.StartTLS:
		if c, err = smtp.NewClientStartTLS(conn, a.tlsCfg(host)); err != nil {
			conn.Close()
			return classifySMTP("starttls", err)
		}
	default:
		c = smtp.NewClient(conn)
	}
	defer c.Close()
	if a.cfg.SMTP.Username != "" {
		if err := c.Auth(sasl.NewPlainClient("", a.cfg.SMTP.Username, a.cfg.SMTP.Password)); err != nil {
			return classifySMTP("auth", err)
		}
	}
	if err := c.SendMail(a.cfg.Address, rcpts, bytes.NewReader(msg)); err != nil {
		return classifySMTP("send", err)
	}
	if err := c.Quit(); err != nil {
		a.log.Debug("email: smtp quit", "err", err)
	}
	return nil
}

// classifySMTP maps a server answer onto the pipeline's error kinds.
func classifySMTP(step string, err error) error {
	err = fmt.Errorf("email: smtp %s: %w", step, err)
	var se *smtp.SMTPError
	if !errors.As(err, &se) {
		return err
	}
	switch {
	case se.Code >= 500:
		return &core.PermanentError{Err: err}
	case se.Code == 421 || se.Code == 450 || se.Code == 451 || se.Code == 452:
		if se.EnhancedCode[0] == 4 && se.EnhancedCode[1] == 7 || strings.Contains(strings.ToLower(se.Message), "rate") {
			return &core.RateLimitError{RetryAfter: time.Minute, Scope: "account", Err: err}
		}
	}
	return err
}
