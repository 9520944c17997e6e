package agent

import (
	"fmt"
	"strings"
)

// File is a file that came with a user message, as the history keeps it:
// the channel's reference and what the platform said of it (the fields of
// core.Attachment, which this package does not import).
type File struct {
	Kind     string `json:"kind"`
	Ref      string `json:"ref"`
	MimeType string `json:"mimeType,omitempty"`
	Name     string `json:"name,omitempty"`
	Size     int64  `json:"size,omitempty"`
}

// FilePart is a part holding a file that came from source (the channel,
// "slack.attachment") sent by actor.
func FilePart(source, actor string, f File) Part {
	return Part{Source: source, Actor: actor, File: &f}
}

// FileContent is what a caller fetched of a File for one request. Exactly
// one of Text and Image is set when the content is shown; Problem, in
// opsgate's own words, says why it is not.
type FileContent struct {
	// Text is a text file's content, shown inline inside the file's
	// external_content block.
	Text string
	// Image is an image's bytes, sent as an image part (a model that takes
	// images only; see ImageInput) of type MimeType.
	Image    []byte
	MimeType string
	// Problem says why the content is not shown ("over this agent's
	// limit of 5 MiB"); never outside text.
	Problem string
}

// Image is one image part of a request message.
type Image struct {
	// MimeType is one of ImageTypes.
	MimeType string
	Data     []byte
}

// ImageInput is the optional capability of a Model that takes image parts
// in user messages (both providers' APIs do; a model that does not is
// given images by reference).
type ImageInput interface {
	TakesImages() bool
}

// TakesImages reports whether m takes image parts.
func TakesImages(m Model) bool {
	ii, ok := m.(ImageInput)
	return ok && ii.TakesImages()
}

// ImageTypes are the image formats both providers accept as image parts;
// other images (SVG, BMP, HEIC) go by reference.
var ImageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// imageCost is what one image counts toward Window.MaxBytes: providers
// price an image by its pixels, not its bytes, so a fixed share keeps the
// trimming of older messages predictable.
const imageCost = 4 << 10

// fileText renders a file part's framed block: what the platform said of
// the file and, when fetched, its text.
func fileText(p Part) string {
	f := p.File
	var b strings.Builder
	kind := f.Kind
	if kind == "" {
		kind = "file"
	}
	fmt.Fprintf(&b, "%s attached: %s", kind, nameOr(f.Name))
	var facts []string
	if f.MimeType != "" {
		facts = append(facts, f.MimeType)
	}
	if f.Size > 0 {
		facts = append(facts, size(int(f.Size)))
	}
	if len(facts) > 0 {
		b.WriteString(" (" + strings.Join(facts, ", ") + ")")
	}
	switch c := p.Content; {
	case c == nil:
	case c.Text != "":
		b.WriteString("\n\n")
		b.WriteString(c.Text)
	case len(c.Image) > 0:
		b.WriteString("\n(the image follows this message)")
	}
	return b.String()
}

func nameOr(n string) string {
	if strings.TrimSpace(n) == "" {
		return "(no name)"
	}
	return n
}

// fileNote is opsgate's note under a file it does not show.
func fileNote(p Part) string {
	switch c := p.Content; {
	case c == nil:
		return "(opsgate: this attachment is listed by reference only; its content was not read.)"
	case c.Problem != "":
		return "(opsgate: this attachment's content was not read: " + c.Problem + ".)"
	}
	return ""
}
