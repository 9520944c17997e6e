package email

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
	gomail "github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
)

// imapFake is a real IMAP server (go-imap's imapserver over the in-memory
// backend) on 127.0.0.1, with a user "bot" whose INBOX the adapter
// watches. Tests deliver mail with Deliver and can cut every connection
// (a network failure) with Drop.
type imapFake struct {
	Addr string
	user *imapmemserver.User
	srv  *imapserver.Server

	mu    sync.Mutex
	conns []net.Conn
	// idles counts IDLE commands the server received.
	idles atomic.Int64
	// noIdle hides IDLE from the capabilities: imapserver always
	// advertises it for IMAP4rev1, so the fake strips it from the wire.
	noIdle bool
}

// noIdleConn removes IDLE from CAPABILITY lines the server writes.
type noIdleConn struct{ net.Conn }

func (c noIdleConn) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("CAPABILITY")) {
		q := bytes.ReplaceAll(p, []byte(" IDLE"), nil)
		if _, err := c.Conn.Write(q); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// idleCounter counts IDLE commands in the server's debug stream.
type idleCounter struct{ f *imapFake }

func (w idleCounter) Write(p []byte) (int, error) {
	w.f.idles.Add(int64(bytes.Count(bytes.ToUpper(p), []byte(" IDLE\r\n"))))
	return len(p), nil
}

const imapUser, imapPass = "bot", "imap-secret"

func newIMAPFake(t *testing.T, idle bool, cert ...tls.Certificate) *imapFake {
	t.Helper()
	mem := imapmemserver.New()
	user := imapmemserver.NewUser(imapUser, imapPass)
	if err := user.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	mem.AddUser(user)
	caps := imap.CapSet{imap.CapIMAP4rev1: {}}
	f := &imapFake{user: user, noIdle: !idle}
	f.srv = imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		Caps: caps, InsecureAuth: true, Logger: log.New(io.Discard, "", 0), DebugWriter: idleCounter{f},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.Addr = ln.Addr().String()
	if len(cert) > 0 {
		ln = tls.NewListener(ln, &tls.Config{Certificates: cert})
	}
	go f.srv.Serve(trackListener{Listener: ln, f: f})
	t.Cleanup(func() { f.srv.Close() })
	return f
}

type trackListener struct {
	net.Listener
	f *imapFake
}

func (l trackListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.f.mu.Lock()
		l.f.conns = append(l.f.conns, c)
		l.f.mu.Unlock()
		if l.f.noIdle {
			c = noIdleConn{c}
		}
	}
	return c, err
}

// Deliver appends a raw message to INBOX, as the MTA would.
func (f *imapFake) Deliver(t *testing.T, raw string) {
	t.Helper()
	raw = strings.ReplaceAll(strings.ReplaceAll(raw, "\r\n", "\n"), "\n", "\r\n")
	if _, err := f.user.Append("INBOX", bytes.NewReader([]byte(raw)), &imap.AppendOptions{Time: time.Now()}); err != nil {
		t.Fatalf("deliver: %v", err)
	}
}

// Drop closes every connection the server accepted so far.
func (f *imapFake) Drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

// Recreate deletes and re-creates INBOX: the server gives it a new
// UIDVALIDITY and renumbers from 1.
func (f *imapFake) Recreate(t *testing.T) {
	t.Helper()
	if err := f.user.Delete("INBOX"); err != nil {
		t.Fatal(err)
	}
	if err := f.user.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
}

// sent is one mail the SMTP capture server accepted, parsed.
type sent struct {
	From       string
	Rcpt       []string
	Raw        string
	Header     gomail.Header
	MessageID  string
	InReplyTo  []string
	References []string
	Subject    string
	Text, HTML string
}

// smtpCapture is a local go-smtp server that keeps every mail; with a
// password set it requires AUTH PLAIN.
type smtpCapture struct {
	Addr    string
	user    string
	pass    string
	threads map[string]core.Thread // root Message-ID → thread, for Received

	mu   sync.Mutex
	got  []sent
	fail error // returned by Data while set
}

func newSMTPCapture(t *testing.T, user, pass string) *smtpCapture {
	t.Helper()
	c := &smtpCapture{user: user, pass: pass, threads: map[string]core.Thread{}}
	s := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &smtpSession{c: c}, nil }))
	s.Domain, s.AllowInsecureAuth = "capture.test", true
	s.ErrorLog = log.New(io.Discard, "", 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.Addr = ln.Addr().String()
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return c
}

type smtpSession struct {
	c      *smtpCapture
	authed bool
	from   string
	rcpt   []string
}

var errAuthRequired = &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "auth required"}

func (s *smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *smtpSession) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.c.user || pass != s.c.pass {
			// What Gmail, Microsoft 365 and Postfix answer.
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "bad credentials"}
		}
		s.authed = true
		return nil
	}), nil
}
func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if s.c.pass != "" && !s.authed {
		return errAuthRequired
	}
	s.from = from
	return nil
}
func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.rcpt = append(s.rcpt, to)
	return nil
}
func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if s.c.fail != nil {
		return s.c.fail
	}
	m, err := parseSent(b)
	if err != nil {
		return err
	}
	m.From, m.Rcpt = s.from, s.rcpt
	s.c.got = append(s.c.got, m)
	return nil
}
func (s *smtpSession) Reset()        { s.from, s.rcpt = "", nil }
func (s *smtpSession) Logout() error { return nil }

func parseSent(b []byte) (sent, error) {
	mr, err := gomail.CreateReader(bytes.NewReader(b))
	if err != nil {
		return sent{}, err
	}
	m := sent{Raw: string(b), Header: mr.Header}
	m.MessageID, _ = mr.Header.MessageID()
	m.InReplyTo, _ = mr.Header.MsgIDList("In-Reply-To")
	m.References, _ = mr.Header.MsgIDList("References")
	m.Subject, _ = mr.Header.Subject()
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return sent{}, err
		}
		body, _ := io.ReadAll(p.Body)
		if ih, ok := p.Header.(*gomail.InlineHeader); ok {
			switch mt, _, _ := ih.ContentType(); mt {
			case "text/plain":
				m.Text = string(body)
			case "text/html":
				m.HTML = string(body)
			}
		}
	}
	return m, nil
}

// Sent returns the mails accepted so far.
func (c *smtpCapture) Sent() []sent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sent(nil), c.got...)
}

// Received implements adaptertest.Fake: each mail as the thread it
// belongs to (by its first References entry) and its text part.
func (c *smtpCapture) Received() []adaptertest.Message {
	var out []adaptertest.Message
	for _, m := range c.Sent() {
		var th core.Thread
		if len(m.References) > 0 {
			th = c.threads[m.References[0]]
		}
		out = append(out, adaptertest.Message{Thread: th, ID: m.MessageID, Text: m.Text})
	}
	return out
}

// testMail builds an inbound message the way a mail client would.
type testMail struct {
	From, To, Subject, MessageID string
	InReplyTo, References        string
	Headers                      []string // "Name: value"
	Body                         string
	// Files are attached (multipart/mixed) when set (media_test.go).
	Files []adaptertest.File
}

func (m testMail) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\nTo: %s\nSubject: %s\nDate: %s\nMessage-ID: <%s>\n", m.From, m.To, m.Subject,
		time.Now().Format(time.RFC1123Z), m.MessageID)
	if m.InReplyTo != "" {
		fmt.Fprintf(&b, "In-Reply-To: <%s>\n", m.InReplyTo)
	}
	if m.References != "" {
		fmt.Fprintf(&b, "References: %s\n", m.References)
	}
	for _, h := range m.Headers {
		b.WriteString(h + "\n")
	}
	if len(m.Files) > 0 {
		return m.multipart(b.String())
	}
	b.WriteString("MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n" + m.Body + "\n")
	return b.String()
}
