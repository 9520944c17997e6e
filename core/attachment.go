package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// AttachmentKind is what an attachment holds as far as a model is
// concerned: an image (an image part for a model that takes images), audio,
// or any other file (text inline, the rest by reference).
type AttachmentKind string

// The attachment kinds (CONTRACT.md: "image|file|audio").
const (
	AttachmentImage AttachmentKind = "image"
	AttachmentFile  AttachmentKind = "file"
	AttachmentAudio AttachmentKind = "audio"
)

// Valid reports a known kind.
func (k AttachmentKind) Valid() bool {
	return k == AttachmentImage || k == AttachmentFile || k == AttachmentAudio
}

// KindOfMIME is the kind of a MIME type: image/* is an image, audio/* audio,
// anything else (video included) a file.
func KindOfMIME(mimeType string) AttachmentKind {
	mt := BaseMIME(mimeType)
	switch {
	case strings.HasPrefix(mt, "image/"):
		return AttachmentImage
	case strings.HasPrefix(mt, "audio/"):
		return AttachmentAudio
	}
	return AttachmentFile
}

// BaseMIME is a MIME type without parameters, lowercased ("text/plain;
// charset=utf-8" → "text/plain"); "" when it does not parse.
func BaseMIME(mimeType string) string {
	if strings.TrimSpace(mimeType) == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(mimeType)
	if err != nil {
		return ""
	}
	return mt
}

// Attachment is a file that came with an event (CONTRACT.md "Events and
// runs carry attachments"). Ref is the adapter's own reference to fetch it
// again (a Slack file id, a Telegram file_id, a Discord CDN URL, a Matrix
// mxc:// URI, an email's mailbox position and MIME part, a signal-cli
// attachment id): opaque to the core. Name, MimeType and Size are what the
// platform said when the message arrived; a fetch checks them again.
// Name and content are external data, never instructions.
type Attachment struct {
	Kind     AttachmentKind `json:"kind"`
	Ref      string         `json:"ref"`
	MimeType string         `json:"mimeType,omitempty"`
	Name     string         `json:"name,omitempty"`
	Size     int64          `json:"size,omitempty"`
}

// NewAttachment builds an attachment, its kind judged from the MIME type.
func NewAttachment(ref, name, mimeType string, size int64) Attachment {
	return Attachment{Kind: KindOfMIME(mimeType), Ref: ref, MimeType: mimeType, Name: name, Size: size}
}

// Errors of a fetch, matched with errors.Is: the engine tells the model
// which limit held.
var (
	// ErrAttachmentTooLarge: the platform reports (or the download runs
	// to) more bytes than allowed.
	ErrAttachmentTooLarge = errors.New("attachment too large")
	// ErrAttachmentKind: the platform reports a type of another kind than
	// the attachment was recorded with.
	ErrAttachmentKind = errors.New("attachment type changed")
	// ErrAttachmentGone: the platform no longer has the file (deleted,
	// expired).
	ErrAttachmentGone = errors.New("attachment no longer available")
)

// AttachmentFetcher is the optional capability of an adapter whose
// platform keeps the files people send: it downloads one with the bot's
// own credentials (Slack url_private with the bot token, Telegram getFile,
// Discord's CDN, Matrix authenticated media, the mail's MIME part, the
// signal-cli daemon). Before any byte of content is downloaded it checks
// the size and type the platform reports now (CheckAttachment), and while
// downloading it never reads more than maxBytes (ReadAttachment). The
// engine calls it only for kinds an agent takes, on demand.
type AttachmentFetcher interface {
	FetchAttachment(ctx context.Context, a Attachment, maxBytes int64) ([]byte, error)
}

// CheckAttachment judges what the platform reports of a before it is
// downloaded: a size over maxBytes is ErrAttachmentTooLarge, a MIME type
// of another kind than a's is ErrAttachmentKind. size < 0 or mimeType ""
// mean the platform did not say.
func CheckAttachment(a Attachment, size int64, mimeType string, maxBytes int64) error {
	if size > maxBytes {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrAttachmentTooLarge, size, maxBytes)
	}
	if BaseMIME(mimeType) != "" && a.Kind.Valid() && KindOfMIME(mimeType) != a.Kind {
		return fmt.Errorf("%w: recorded as %s, the platform now says %s", ErrAttachmentKind, a.Kind, BaseMIME(mimeType))
	}
	return nil
}

// ReadAttachment reads r to its end, but never more than maxBytes: content
// that runs past the limit (whatever its headers said) is
// ErrAttachmentTooLarge, and nothing more is read.
func ReadAttachment(r io.Reader, maxBytes int64) ([]byte, error) {
	if maxBytes < 0 {
		maxBytes = 0
	}
	b, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read attachment: %w", err)
	}
	if int64(len(b)) > maxBytes {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrAttachmentTooLarge, maxBytes)
	}
	return b, nil
}

// AttachmentFromResponse reads a's content from a platform's download
// response and closes its body. What the headers say is judged before any
// byte of the body is read: 404 and 410 are ErrAttachmentGone, another
// non-2xx status an error; a Content-Length over maxBytes is
// ErrAttachmentTooLarge and a Content-Type of another kind
// ErrAttachmentKind (CheckAttachment; application/octet-stream says
// nothing). The body is then read with ReadAttachment.
func AttachmentFromResponse(resp *http.Response, a Attachment, maxBytes int64) ([]byte, error) {
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return nil, fmt.Errorf("%w: HTTP %d", ErrAttachmentGone, resp.StatusCode)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, fmt.Errorf("download attachment: HTTP %d", resp.StatusCode)
	}
	ct := resp.Header.Get("Content-Type")
	if BaseMIME(ct) == "application/octet-stream" {
		ct = ""
	}
	if err := CheckAttachment(a, resp.ContentLength, ct, maxBytes); err != nil {
		return nil, err
	}
	return ReadAttachment(resp.Body, maxBytes)
}
