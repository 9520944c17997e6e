package agentrun

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
)

// Files that come with messages (issue 27): an adapter records each as a
// core.Attachment — a reference — on the event and the run; an agent's run
// fetches the content on demand, through the channel's
// core.AttachmentFetcher, within its agent's FileLimits. Text files go to
// the model inline, images as image parts for a model that takes them,
// everything else by reference; all of it inside the file's
// <external_content> block. Only the current run's files are fetched: a
// session's earlier files are listed by reference.

// FileLimits say which attachments an agent reads and how large
// (agents[].attachments: {max_bytes, kinds}).
type FileLimits struct {
	// MaxBytes bounds one file; larger ones are listed by reference and
	// never downloaded.
	MaxBytes int64
	// Kinds are the kinds whose content the agent gets; others are listed
	// by reference.
	Kinds []core.AttachmentKind
}

// Defaults of FileLimits (README: agents[].attachments).
const (
	DefaultFileMaxBytes = 5 << 20
	// maxInlineText bounds a text file shown inline: the model's context
	// is not a place for megabytes of log.
	maxInlineText = 64 << 10
	// fetchTimeout bounds one file's fetch.
	fetchTimeout = 30 * time.Second
)

// DefaultFileKinds are read when an agent names none.
var DefaultFileKinds = []core.AttachmentKind{core.AttachmentImage, core.AttachmentFile}

func (l FileLimits) orDefault() FileLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultFileMaxBytes
	}
	if l.Kinds == nil {
		l.Kinds = DefaultFileKinds
	}
	return l
}

// fileParts are the parts of a message's attachments, each labelled
// "<channel>.attachment" and sent by actor.
func fileParts(channel, actor string, as []core.Attachment) []llm.Part {
	out := make([]llm.Part, 0, len(as))
	for _, a := range as {
		out = append(out, llm.FilePart(channel+".attachment", actor, llm.File{
			Kind: string(a.Kind), Ref: a.Ref, MimeType: a.MimeType, Name: a.Name, Size: a.Size}))
	}
	return out
}

// RequestParts are the parts of a person's message: its text (left out
// when the message is only files) and its files — what the engine stores
// as the turn's first message.
func RequestParts(channel, actor, text string, as []core.Attachment) []llm.Part {
	var parts []llm.Part
	if strings.TrimSpace(text) != "" || len(as) == 0 {
		parts = append(parts, llm.External(channel, actor, text))
	}
	return append(parts, fileParts(channel, actor, as)...)
}

// resolveFiles fetches the content of this run's files for the next
// request, once per execution (ax.files caches by reference), and sets it
// on the in-memory history; earlier runs' files stay references.
func (ax *exec) resolveFiles(ctx context.Context) {
	for i := ax.mine; i < len(ax.hist); i++ {
		m := &ax.hist[i]
		if m.Role != llm.RoleUser {
			continue
		}
		for j := range m.Parts {
			p := &m.Parts[j]
			if p.File == nil || p.Content != nil {
				continue
			}
			if ax.files == nil {
				ax.files = map[string]*llm.FileContent{}
			}
			key := p.Source + "\x00" + p.File.Ref
			c, ok := ax.files[key]
			if !ok {
				channel, _, _ := strings.Cut(p.Source, ".")
				c = ax.fetchFile(ctx, channel, *p.File)
				ax.files[key] = c
			}
			p.Content = c
		}
	}
}

// fetchFile fetches f from channel within the agent's limits and returns
// what the model gets: text, an image, or why neither.
func (ax *exec) fetchFile(ctx context.Context, channel string, f llm.File) *llm.FileContent {
	lim := ax.ag.Files.orDefault()
	kind := core.AttachmentKind(f.Kind)
	no := func(format string, args ...any) *llm.FileContent {
		return &llm.FileContent{Problem: fmt.Sprintf(format, args...)}
	}
	switch {
	case !slices.Contains(lim.Kinds, kind):
		return no("this agent does not read %s attachments (agents[].attachments.kinds)", kind)
	case kind == core.AttachmentAudio:
		return no("the models here take no audio")
	case kind == core.AttachmentImage && !llm.TakesImages(ax.ag.Model):
		return no("the model takes no images")
	case kind == core.AttachmentImage && f.MimeType != "" && !llm.ImageTypes[core.BaseMIME(f.MimeType)]:
		return no("models take PNG, JPEG, GIF and WebP images only")
	case f.Size > lim.MaxBytes:
		return no("it is %s, over this agent's limit of %s", byteSize(f.Size), byteSize(lim.MaxBytes))
	}
	fe := ax.host.Fetcher(channel)
	if fe == nil {
		return no("files of the %s channel cannot be fetched", channel)
	}
	fctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	data, err := fe.FetchAttachment(fctx, core.Attachment{Kind: kind, Ref: f.Ref, MimeType: f.MimeType, Name: f.Name, Size: f.Size}, lim.MaxBytes)
	switch {
	case errors.Is(err, core.ErrAttachmentTooLarge):
		return no("it is over this agent's limit of %s", byteSize(lim.MaxBytes))
	case errors.Is(err, core.ErrAttachmentKind):
		return no("the platform now reports a different type for it")
	case errors.Is(err, core.ErrAttachmentGone):
		return no("the platform no longer has it")
	case err != nil:
		// The error may name the platform's URLs: logged, not shown.
		ax.log.Warn("attachment fetch failed", "channel", channel, "kind", kind, "err", err)
		return no("the platform did not hand it over")
	}
	sniffed := core.BaseMIME(http.DetectContentType(data))
	if kind == core.AttachmentImage {
		if !llm.ImageTypes[sniffed] {
			return no("its content is not a PNG, JPEG, GIF or WebP image")
		}
		return &llm.FileContent{Image: data, MimeType: sniffed}
	}
	if !looksLikeText(data, sniffed) {
		return no("it is not a text file (%s); only text files are shown inline", orUnknown(core.BaseMIME(f.MimeType), sniffed))
	}
	text := string(data)
	if len(text) > maxInlineText {
		cut := maxInlineText
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + fmt.Sprintf("\n[… opsgate showed the first %s of %s]", byteSize(int64(cut)), byteSize(int64(len(data))))
	}
	return &llm.FileContent{Text: text}
}

// looksLikeText reports content a model can read as text: valid UTF-8
// without NUL bytes, which the content sniffer does not call binary.
func looksLikeText(b []byte, sniffed string) bool {
	if !utf8.Valid(b) || slices.Contains(b, 0) {
		return false
	}
	return strings.HasPrefix(sniffed, "text/")
}

func orUnknown(a, b string) string {
	if a != "" {
		return a
	}
	if b != "" {
		return b
	}
	return "unknown type"
}

// byteSize renders n for people: "5 MiB", "812 KiB", "93 bytes".
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
