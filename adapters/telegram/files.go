package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/opsgate/opsgate/core"
)

// tgFile is a Document, Audio, Voice or Video of the Bot API: what a
// person sent, fetched later with getFile.
type tgFile struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileName     string `json:"file_name,omitempty"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// tgPhotoSize is one size of a photo; Telegram sends several, smallest
// first, each a JPEG.
type tgPhotoSize struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// attachmentsOf lists the files of m as attachments (Ref is the file_id):
// a document, the largest size of a photo, audio, a voice note, a video.
func attachmentsOf(m *tgMessage) []core.Attachment {
	var out []core.Attachment
	add := func(f *tgFile, name, mime string) {
		if f == nil || f.FileID == "" {
			return
		}
		if f.FileName != "" {
			name = f.FileName
		}
		if f.MimeType != "" {
			mime = f.MimeType
		}
		out = append(out, core.NewAttachment(f.FileID, name, mime, f.FileSize))
	}
	add(m.Document, "document", "application/octet-stream")
	if n := len(m.Photo); n > 0 {
		p := m.Photo[n-1] // the largest
		add(&tgFile{FileID: p.FileID, FileSize: p.FileSize}, "photo.jpg", "image/jpeg")
	}
	add(m.Audio, "audio", "audio/mpeg")
	add(m.Voice, "voice.ogg", "audio/ogg")
	add(m.Video, "video.mp4", "video/mp4")
	return out
}

// requestOf is what a message asks and brings: the command text (a
// caption counts as the text of a file) and its files. A file without a
// caption is a request in a private chat; in a group, as any message, it
// must address the bot (a command or a mention in the caption).
func (a *Adapter) requestOf(m *tgMessage, botUsername string) (string, []core.Attachment, bool) {
	files := attachmentsOf(m)
	cm := *m
	if cm.Text == "" {
		cm.Text = cm.Caption
	}
	text, ok := commandText(&cm, botUsername)
	if !ok && len(files) > 0 && m.Chat.Type == "private" && strings.TrimSpace(cm.Text) == "" {
		return "", files, true
	}
	return text, files, ok
}

var _ core.AttachmentFetcher = (*Adapter)(nil)

// tgFileInfo is getFile's result.
type tgFileInfo struct {
	FileID   string `json:"file_id"`
	FileSize int64  `json:"file_size,omitempty"`
	FilePath string `json:"file_path,omitempty"`
}

// FetchAttachment implements core.AttachmentFetcher: getFile says the
// file's size now (judged before anything is downloaded; the Bot API hands
// out files up to 20 MB), then <api_url>/file/bot<token>/<file_path> is
// read, never more than maxBytes.
func (a *Adapter) FetchAttachment(ctx context.Context, at core.Attachment, maxBytes int64) ([]byte, error) {
	var fi tgFileInfo
	if err := a.api.call(ctx, "getFile", map[string]any{"file_id": at.Ref}, &fi); err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.Code == http.StatusBadRequest {
			d := strings.ToLower(ae.Description)
			switch {
			case strings.Contains(d, "file is too big"):
				return nil, fmt.Errorf("%w: %w", core.ErrAttachmentTooLarge, err)
			case strings.Contains(d, "file_id") || strings.Contains(d, "file not found"):
				return nil, fmt.Errorf("%w: %w", core.ErrAttachmentGone, err)
			}
		}
		return nil, err
	}
	size := fi.FileSize
	if size == 0 {
		size = -1 // not said
	}
	if err := core.CheckAttachment(at, size, "", maxBytes); err != nil {
		return nil, fmt.Errorf("telegram: file %s: %w", at.Name, err)
	}
	link, err := a.fileURL(fi.FilePath)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return nil, fmt.Errorf("telegram: download file: %w", a.api.scrub.Err(err))
	}
	resp, err := a.api.client.Do(req)
	if err != nil {
		// The URL holds the token: say what failed, never where.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("telegram: download file: %w", a.api.scrub.Err(err))
	}
	b, err := core.AttachmentFromResponse(resp, at, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("telegram: download file %s: %w", at.Name, err)
	}
	return b, nil
}

// fileURL is where a getFile path is downloaded: api_url/file/bot<token>/
// with each segment of the path escaped (a path from the API is still
// outside input: no "..", no query).
func (a *Adapter) fileURL(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("telegram: getFile: no file_path (the file cannot be downloaded)")
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if s == "" || s == "." || s == ".." {
			return "", fmt.Errorf("telegram: getFile: unusable file_path")
		}
		segs[i] = url.PathEscape(s)
	}
	return a.cfg.APIURL + "/file/bot" + a.cfg.BotToken + "/" + strings.Join(segs, "/"), nil
}
