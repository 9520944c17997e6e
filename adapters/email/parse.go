package email

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // decode the charsets real mail uses
	gomail "github.com/emersion/go-message/mail"
)

// inbound is one received mail, reduced to what the adapter reads.
type inbound struct {
	// MessageID is bare (no angle brackets); when the mail has none it is
	// "sha256:<hex>" of the raw message, stable across re-reads.
	MessageID  string
	From       string // lowercased address
	Subject    string
	InReplyTo  []string
	References []string
	// Recipients are To, Cc, Delivered-To and X-Original-To addresses,
	// lowercased: where a plus-addressed reply token can be.
	Recipients []string
	// Text is the body as plain text (text/plain preferred, else the HTML
	// part converted), before quote stripping.
	Text string
	// AutoReason is non-empty when the mail must never be answered
	// (RFC 3834): an auto-reply, a bounce, list or bulk mail.
	AutoReason string
	// AuthResults are the Authentication-Results values, topmost first.
	AuthResults []string
	// Files are the attached files (files.go), each with its MIME part's
	// IMAP section number.
	Files []mailFile
}

// ErrMalformed marks a mail that cannot be read at all.
var ErrMalformed = errors.New("malformed mail")

// maxPartBytes caps how much of one body part is read.
const maxPartBytes = 1 << 20

// parseMail reads a raw RFC 5322 message. Undecodable charsets and parts
// are tolerated (the rest is still read); a missing From or unparsable
// header is ErrMalformed.
func parseMail(raw []byte) (*inbound, error) {
	mr, err := gomail.CreateReader(bytes.NewReader(raw))
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if mr == nil {
		return nil, fmt.Errorf("%w: no header", ErrMalformed)
	}
	defer mr.Close()
	h := mr.Header
	in := &inbound{}
	if id, err := h.MessageID(); err == nil && id != "" {
		in.MessageID = id
	} else {
		sum := sha256.Sum256(raw)
		in.MessageID = "sha256:" + hex.EncodeToString(sum[:])
	}
	from, err := h.AddressList("From")
	if err != nil || len(from) == 0 {
		return nil, fmt.Errorf("%w: no readable From", ErrMalformed)
	}
	in.From = strings.ToLower(from[0].Address)
	in.Subject, _ = h.Subject()
	in.InReplyTo, _ = h.MsgIDList("In-Reply-To")
	in.References, _ = h.MsgIDList("References")
	for _, k := range []string{"To", "Cc", "Delivered-To", "X-Original-To"} {
		list, _ := h.AddressList(k)
		for _, a := range list {
			in.Recipients = append(in.Recipients, strings.ToLower(a.Address))
		}
	}
	in.AuthResults = h.Values("Authentication-Results")
	in.AutoReason = autoReason(h, in.From)
	in.Text = bodyText(mr)
	in.Files = mailFiles(raw)
	return in, nil
}

// autoReason says why a mail must not be answered, or "".
func autoReason(h gomail.Header, from string) string {
	if v := strings.ToLower(strings.TrimSpace(h.Get("Auto-Submitted"))); v != "" && v != "no" {
		return "Auto-Submitted: " + v
	}
	if p := strings.ToLower(strings.TrimSpace(h.Get("Precedence"))); p == "bulk" || p == "list" || p == "junk" || p == "auto_reply" {
		return "Precedence: " + p
	}
	if h.Has("List-Id") {
		return "List-Id"
	}
	if h.Has("X-Autoreply") || h.Has("X-Autorespond") {
		return "auto-responder header"
	}
	if h.Has("Return-Path") {
		rp := strings.ToLower(strings.TrimSpace(h.Get("Return-Path")))
		rp = strings.Trim(rp, "<> ")
		if rp == "" {
			return "empty Return-Path"
		}
		if l := localPart(rp); l == "mailer-daemon" || l == "postmaster" {
			return "Return-Path " + rp
		}
	}
	if l := localPart(from); l == "mailer-daemon" || l == "postmaster" {
		return "From " + from
	}
	if mt, _, _ := mime.ParseMediaType(h.Get("Content-Type")); mt == "multipart/report" {
		return "delivery report"
	}
	return ""
}

// bodyText returns the first text/plain part, or the first text/html part
// converted to text.
func bodyText(mr *gomail.Reader) string {
	var htmlBody string
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			if message.IsUnknownCharset(err) || message.IsUnknownEncoding(err) {
				continue
			}
			break
		}
		ih, ok := p.Header.(*gomail.InlineHeader)
		if !ok {
			continue
		}
		if disp, _, _ := ih.ContentDisposition(); disp == "attachment" {
			continue
		}
		mt, _, _ := ih.ContentType()
		b, _ := io.ReadAll(io.LimitReader(p.Body, maxPartBytes))
		switch mt {
		case "text/plain", "":
			return string(b)
		case "text/html":
			if htmlBody == "" {
				htmlBody = string(b)
			}
		}
	}
	if htmlBody != "" {
		return htmlToText(htmlBody)
	}
	return ""
}
