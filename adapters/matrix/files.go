package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/opsgate/opsgate/core"
)

// fileTypes are the msgtypes that carry a file.
var fileTypes = map[string]bool{"m.file": true, "m.image": true, "m.audio": true, "m.video": true}

// fileInfo is a file event's info: what the sender's client said of it.
type fileInfo struct {
	MimeType string `json:"mimetype,omitempty"`
	Size     int64  `json:"size,omitempty"`
}

// fileAttachment is a file event's attachment: Ref is its mxc:// URI.
// ok is false for an event without a usable one (an encrypted file, whose
// key opsgate does not hold, or a malformed URI).
func fileAttachment(m *messageContent) (core.Attachment, bool) {
	uri, err := id.ParseContentURI(m.URL)
	if err != nil || uri.IsEmpty() {
		return core.Attachment{}, false
	}
	name := m.FileName
	if name == "" {
		name = m.Body
	}
	var mime string
	var size int64
	if m.Info != nil {
		mime, size = m.Info.MimeType, max(m.Info.Size, 0)
	}
	if mime == "" {
		switch m.MsgType {
		case "m.image":
			mime = "image/jpeg"
		case "m.audio":
			mime = "audio/ogg"
		case "m.video":
			mime = "video/mp4"
		default:
			mime = "application/octet-stream"
		}
	}
	a := core.NewAttachment(uri.String(), name, mime, size)
	if m.MsgType == "m.image" && a.Kind != core.AttachmentImage {
		a.Kind = core.AttachmentFile // the type it names wins over the msgtype
	}
	return a, true
}

// caption is the text that came with a file: since Matrix 1.10 the body
// is a caption when a filename is given and differs from it.
func (m *messageContent) caption() string {
	if m.FileName != "" && m.Body != m.FileName {
		return m.Body
	}
	return ""
}

// handleFile turns a file event into a request: its caption is the text
// (addressed to the bot as any message: !ops, a mention, a direct room); a
// file without a caption is a request in a direct room, or where it
// mentions the bot (m.mentions).
func (a *Adapter) handleFile(ctx context.Context, room id.RoomID, ev *mxEvent, raw json.RawMessage, m *messageContent, direct bool) error {
	att, ok := fileAttachment(m)
	if !ok {
		return nil
	}
	root := m.threadRoot()
	if root == "" {
		root = ev.EventID
	}
	k := threadKey{Room: room, Root: id.EventID(root)}
	caption := m.caption()
	if len(caption) > maxRequestBytes {
		a.notice(ctx, k, ev.EventID, fmt.Sprintf("⚠️ That caption is too long for opsgate (%d bytes; at most %d). Nothing was started.", len(caption), maxRequestBytes))
		return nil
	}
	var text string
	if caption != "" {
		if text, ok = a.requestText(caption, m, direct); !ok {
			return nil
		}
	} else if !direct && !a.mentioned(m) {
		return nil
	}
	e := a.event(room, ev, raw, k)
	e.Text, e.Attachments = text, []core.Attachment{att}
	if _, err := a.sink.HandleEvent(ctx, e); err != nil {
		return fmt.Errorf("matrix: record file message %s: %w", ev.EventID, err)
	}
	return nil
}

// mentioned reports an intentional mention of the bot (m.mentions).
func (a *Adapter) mentioned(m *messageContent) bool {
	if m.Mentions == nil {
		return false
	}
	for _, u := range m.Mentions.UserIDs {
		if id.UserID(u) == a.self {
			return true
		}
	}
	return false
}

var _ core.AttachmentFetcher = (*Adapter)(nil)

// FetchAttachment implements core.AttachmentFetcher: the size and type
// recorded from the event are judged first, then the file is downloaded
// from the authenticated media endpoint (/_matrix/client/v1/media/download)
// with the bot's access token; the response's Content-Length and
// Content-Type are judged before its body is read, and never more than
// maxBytes is read.
func (a *Adapter) FetchAttachment(ctx context.Context, at core.Attachment, maxBytes int64) ([]byte, error) {
	uri, err := id.ParseContentURI(at.Ref)
	if err != nil {
		return nil, fmt.Errorf("matrix: attachment %s: %w", at.Name, err)
	}
	size := at.Size
	if size == 0 {
		size = -1
	}
	if err := core.CheckAttachment(at, size, "", maxBytes); err != nil {
		return nil, fmt.Errorf("matrix: attachment %s: %w", at.Name, err)
	}
	resp, err := a.cli.Download(ctx, uri)
	if err != nil {
		var he mautrix.HTTPError
		if errors.As(err, &he) && he.Response != nil && (he.Response.StatusCode == http.StatusNotFound ||
			he.RespError != nil && strings.EqualFold(he.RespError.ErrCode, "M_NOT_FOUND")) {
			return nil, fmt.Errorf("matrix: attachment %s: %w", at.Name, core.ErrAttachmentGone)
		}
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return nil, apiError("download media", err)
	}
	b, err := core.AttachmentFromResponse(resp, at, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("matrix: attachment %s: %w", at.Name, err)
	}
	return b, nil
}

var _ core.ReplyEditor = (*Adapter)(nil)

// editFallback bounds the plain fallback body of an edit.
const editFallback = 2000

// EditsReplies implements core.ReplyEditor: streamed text and progress are
// one notice replaced in place (m.replace, as a card update is), paced by
// the room's bucket, each edit within the event size limit.
func (a *Adapter) EditsReplies() bool { return true }

// editReply replaces a sent reply's content with c (m.new_content); the
// reference stays the original's, so every later edit names it too.
func (a *Adapter) editReply(ctx context.Context, m core.Outbound, c map[string]any) (core.MessageRef, error) {
	room, orig, err := parseMessageRef(m.Edit.ID)
	if err != nil {
		return core.MessageRef{}, &core.PermanentError{Err: err}
	}
	// The outer body is the fallback for clients without edits: plain and
	// short, so the event (the new content is there in full, plain and
	// formatted) stays well within 64 KiB.
	edit := map[string]any{
		"msgtype": "m.notice", "body": "* " + cutBytes(c["body"].(string), editFallback),
		"m.mentions": map[string]any{}, "m.new_content": c,
		"m.relates_to": map[string]any{"rel_type": "m.replace", "event_id": orig},
	}
	if _, err := a.sendEvent(ctx, room, "m.room.message", edit, txnID(m.Key, "edit")); err != nil {
		return core.MessageRef{}, err
	}
	return *m.Edit, nil
}
