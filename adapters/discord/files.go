package discord

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	discordapi "github.com/bwmarrin/discordgo"

	"github.com/opsgate/opsgate/core"
)

// attachmentsOf lists a message's files as attachments: Ref is the
// attachment's CDN URL (signed by Discord, valid about a day), with the
// name, type and size Discord reported.
func attachmentsOf(m *discordapi.Message) []core.Attachment {
	var out []core.Attachment
	for _, at := range m.Attachments {
		if at == nil || !cdnURL(at.URL) {
			continue
		}
		out = append(out, core.NewAttachment(at.URL, at.Filename, at.ContentType, int64(at.Size)))
	}
	return out
}

// threadName names the thread a message starts: its text, else its first
// file's name.
func threadName(text string, files []core.Attachment) string {
	if text != "" || len(files) == 0 {
		return text
	}
	return files[0].Name
}

// cdnURL reports an https URL on Discord's CDN: the only place attachment
// content is fetched from.
func cdnURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" {
		return false
	}
	h := strings.ToLower(u.Hostname())
	return h == "cdn.discordapp.com" || h == "media.discordapp.net"
}

var _ core.AttachmentFetcher = (*Adapter)(nil)

// FetchAttachment implements core.AttachmentFetcher: a HEAD on the
// attachment's CDN URL says its size and type now (judged before the
// download), then a GET reads it, never more than maxBytes. The URL is
// signed; no bot token is sent. An expired link is ErrAttachmentGone.
func (a *Adapter) FetchAttachment(ctx context.Context, at core.Attachment, maxBytes int64) ([]byte, error) {
	if !cdnURL(at.Ref) {
		return nil, fmt.Errorf("discord: attachment %s: not a Discord CDN URL", at.Name)
	}
	head, err := a.cdnDo(ctx, http.MethodHead, at.Ref)
	if err != nil {
		return nil, err
	}
	head.Body.Close()
	switch {
	case head.StatusCode == http.StatusNotFound || head.StatusCode == http.StatusForbidden || head.StatusCode == http.StatusGone:
		return nil, fmt.Errorf("discord: attachment %s: HTTP %d: %w", at.Name, head.StatusCode, core.ErrAttachmentGone)
	case head.StatusCode >= 200 && head.StatusCode <= 299:
		ct := head.Header.Get("Content-Type")
		if core.BaseMIME(ct) == "application/octet-stream" {
			ct = ""
		}
		if err := core.CheckAttachment(at, head.ContentLength, ct, maxBytes); err != nil {
			return nil, fmt.Errorf("discord: attachment %s: %w", at.Name, err)
		}
	}
	resp, err := a.cdnDo(ctx, http.MethodGet, at.Ref)
	if err != nil {
		return nil, err
	}
	b, err := core.AttachmentFromResponse(resp, at, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("discord: attachment %s: %w", at.Name, err)
	}
	return b, nil
}

func (a *Adapter) cdnDo(ctx context.Context, method, link string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, link, nil)
	if err != nil {
		return nil, fmt.Errorf("discord: attachment: %w", err)
	}
	resp, err := a.cdn.Do(req)
	if err != nil {
		// The signed URL stays out of errors and logs.
		if ue, ok := err.(*url.Error); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("discord: attachment %s: %w", method, err)
	}
	return resp, nil
}

var _ core.ReplyEditor = (*Adapter)(nil)

// EditsReplies implements core.ReplyEditor: streamed text and progress are
// one message edited in place (PATCH /channels/{id}/messages/{id}), paced
// by the channel's bucket, each edit within 2,000 characters.
func (a *Adapter) EditsReplies() bool { return true }

// editReply replaces a sent reply's content; a message that is gone gets
// the text as a new message, so the final text is always seen.
func (a *Adapter) editReply(ctx context.Context, k threadKey, ref core.MessageRef, text string) (core.MessageRef, error) {
	ch, id, err := parseMessageRef(ref.ID)
	if err != nil {
		return core.MessageRef{}, &core.PermanentError{Err: err}
	}
	ctx, ci := withCallInfo(ctx)
	_, err = a.api.ChannelMessageEditComplex(&discordapi.MessageEdit{
		ID: id, Channel: ch, Content: &text, AllowedMentions: noMentions,
	}, discordapi.WithContext(ctx))
	switch {
	case err == nil:
		return ref, nil
	case isUnknownMessage(err):
		a.log.Info("reply no longer editable; sending the text anew", "ref", ref.ID)
		return a.post(ctx, k.Thread, &discordapi.MessageSend{Content: text, AllowedMentions: noMentions})
	}
	return core.MessageRef{}, deliveryError("edit reply", err, ci)
}
