package email

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"mime/quotedprintable"
	"strconv"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-message"

	"github.com/opsgate/opsgate/core"
)

// mailPos is where a mail sits in the watched mailbox: an attachment is
// fetched again from there, by its part's section number.
type mailPos struct {
	UIDValidity uint32
	UID         uint32
}

// mailFile is one attached file of a mail.
type mailFile struct {
	// Section is the part's IMAP section number ("2", "1.3").
	Section  string
	Name     string
	MimeType string
	// Size is the decoded content's length.
	Size int64
}

// maxFilesPerMail bounds the attachments one mail brings.
const maxFilesPerMail = 20

// mailFiles lists the attachments of a raw mail: parts with Content-
// Disposition attachment, and inline parts with a file name that are not
// text (an inline image). Parts of a forwarded message (message/rfc822)
// are not looked into: the forwarded mail is one attachment.
func mailFiles(raw []byte) []mailFile {
	e, err := message.Read(bytes.NewReader(raw))
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return nil
	}
	var out []mailFile
	_ = e.Walk(func(path []int, part *message.Entity, err error) error {
		if err != nil || part == nil || part.MultipartReader() != nil || len(out) >= maxFilesPerMail {
			return nil
		}
		disp, dp, _ := part.Header.ContentDisposition()
		mt, tp, _ := part.Header.ContentType()
		name := dp["filename"]
		if name == "" {
			name = tp["name"]
		}
		switch {
		case disp == "attachment":
		case name != "" && !strings.HasPrefix(mt, "text/") && len(path) > 0:
		default:
			return nil
		}
		n, _ := io.Copy(io.Discard, io.LimitReader(part.Body, maxPartBytes*64))
		if mt == "" {
			mt = "application/octet-stream"
		}
		if name == "" {
			name = "attachment"
		}
		out = append(out, mailFile{Section: sectionOf(path), Name: name, MimeType: mt, Size: n})
		return nil
	})
	return out
}

// sectionOf maps go-message's part path (children counted from 0, the
// root path empty) to IMAP's section number (from 1; a mail of one part
// is section 1).
func sectionOf(path []int) string {
	if len(path) == 0 {
		return "1"
	}
	parts := make([]string, len(path))
	for i, p := range path {
		parts[i] = strconv.Itoa(p + 1)
	}
	return strings.Join(parts, ".")
}

// attachmentsOf lists a mail's files as attachments; Ref is
// "<uidvalidity>/<uid>/<section>" in the watched mailbox.
func (a *Adapter) attachmentsOf(in *inbound, pos mailPos) []core.Attachment {
	if pos.UID == 0 {
		return nil
	}
	var out []core.Attachment
	for _, f := range in.Files {
		ref := fmt.Sprintf("%d/%d/%s", pos.UIDValidity, pos.UID, f.Section)
		out = append(out, core.NewAttachment(ref, f.Name, f.MimeType, f.Size))
	}
	return out
}

// parseFileRef reads a Ref written by attachmentsOf.
func parseFileRef(ref string) (mailPos, []int, error) {
	parts := strings.SplitN(ref, "/", 3)
	if len(parts) != 3 {
		return mailPos{}, nil, fmt.Errorf("email: attachment ref %q: want <uidvalidity>/<uid>/<section>", ref)
	}
	v, err1 := strconv.ParseUint(parts[0], 10, 32)
	u, err2 := strconv.ParseUint(parts[1], 10, 32)
	if err1 != nil || err2 != nil || u == 0 {
		return mailPos{}, nil, fmt.Errorf("email: attachment ref %q: bad mailbox position", ref)
	}
	var section []int
	for _, s := range strings.Split(parts[2], ".") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || len(section) > 16 {
			return mailPos{}, nil, fmt.Errorf("email: attachment ref %q: bad section", ref)
		}
		section = append(section, n)
	}
	return mailPos{UIDValidity: uint32(v), UID: uint32(u)}, section, nil
}

var _ core.AttachmentFetcher = (*Adapter)(nil)

// FetchAttachment implements core.AttachmentFetcher: on a connection of
// its own it selects the watched mailbox (a new UIDVALIDITY means the mail
// is gone), reads the mail's BODYSTRUCTURE — the part's type and encoded
// size, judged before anything is downloaded — then streams that part's
// content (BODY.PEEK[section]), decoding its transfer encoding, never
// reading more than maxBytes of it.
func (a *Adapter) FetchAttachment(ctx context.Context, at core.Attachment, maxBytes int64) ([]byte, error) {
	pos, section, err := parseFileRef(at.Ref)
	if err != nil {
		return nil, err
	}
	c, err := a.connect(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	sel, err := c.Select(a.cfg.IMAP.Mailbox, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		return nil, fmt.Errorf("email: select %s: %w", a.cfg.IMAP.Mailbox, err)
	}
	if sel.UIDValidity != pos.UIDValidity {
		return nil, fmt.Errorf("email: attachment %s: the mailbox was renumbered: %w", at.Name, core.ErrAttachmentGone)
	}
	uids := imap.UIDSetNum(imap.UID(pos.UID))
	meta, err := c.Fetch(uids, &imap.FetchOptions{UID: true, BodyStructure: &imap.FetchItemBodyStructure{Extended: true}}).Collect()
	if err != nil {
		return nil, fmt.Errorf("email: fetch structure of %d: %w", pos.UID, err)
	}
	if len(meta) == 0 || meta[0].BodyStructure == nil {
		return nil, fmt.Errorf("email: attachment %s: %w", at.Name, core.ErrAttachmentGone)
	}
	part := partAt(meta[0].BodyStructure, section)
	if part == nil {
		return nil, fmt.Errorf("email: attachment %s: no part %v: %w", at.Name, section, core.ErrAttachmentGone)
	}
	enc := strings.ToLower(part.Encoding)
	decoded := int64(part.Size)
	if enc == "base64" {
		decoded = int64(part.Size) / 4 * 3 // line breaks make it a little less
	}
	if err := core.CheckAttachment(at, decoded, part.MediaType(), maxBytes); err != nil {
		return nil, fmt.Errorf("email: attachment %s: %w", at.Name, err)
	}
	item := &imap.FetchItemBodySection{Part: section, Peek: true}
	cmd := c.Fetch(uids, &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{item}})
	defer cmd.Close()
	msg := cmd.Next()
	if msg == nil {
		return nil, fmt.Errorf("email: attachment %s: %w", at.Name, core.ErrAttachmentGone)
	}
	for {
		it := msg.Next()
		if it == nil {
			return nil, fmt.Errorf("email: attachment %s: the server sent no content", at.Name)
		}
		body, ok := it.(imapclient.FetchItemDataBodySection)
		if !ok || body.Literal == nil {
			continue
		}
		b, err := core.ReadAttachment(decode(body.Literal, enc), maxBytes)
		if err != nil {
			return nil, fmt.Errorf("email: attachment %s: %w", at.Name, err)
		}
		return b, nil
	}
}

// partAt is the single part at an IMAP section number of bs, or nil.
func partAt(bs imap.BodyStructure, section []int) *imap.BodyStructureSinglePart {
	var found *imap.BodyStructureSinglePart
	bs.Walk(func(path []int, p imap.BodyStructure) bool {
		if sp, ok := p.(*imap.BodyStructureSinglePart); ok && equalPath(path, section) {
			found = sp
		}
		return found == nil
	})
	return found
}

func equalPath(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// decode undoes a part's Content-Transfer-Encoding.
func decode(r io.Reader, enc string) io.Reader {
	switch enc {
	case "base64":
		return base64.NewDecoder(base64.StdEncoding, stripBreaks{r})
	case "quoted-printable":
		return quotedprintable.NewReader(r)
	}
	return r
}

// stripBreaks drops CR, LF and spaces, which base64 bodies are wrapped
// with and the decoder refuses.
type stripBreaks struct{ r io.Reader }

func (s stripBreaks) Read(p []byte) (int, error) {
	for {
		n, err := s.r.Read(p)
		j := 0
		for _, c := range p[:n] {
			if c != '\r' && c != '\n' && c != ' ' && c != '\t' {
				p[j] = c
				j++
			}
		}
		if j > 0 || err != nil {
			return j, err
		}
	}
}
