package signal

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/opsgate/opsgate/core"
)

// sigAttachment is a file of a received message, as signal-cli stores it
// (JsonAttachment): the daemon has downloaded it; getAttachment hands it
// over.
type sigAttachment struct {
	ContentType string `json:"contentType"`
	Filename    string `json:"filename,omitempty"`
	ID          string `json:"id"`
	Size        int64  `json:"size,omitempty"`
}

// attachmentIDRE is signal-cli's attachment id: a random name with the
// file's extension.
var attachmentIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9]{1,16})?$`)

// attachmentsOf lists a message's files as attachments. Ref is
// "<thread key>#<attachment id>": getAttachment needs the conversation
// (the sender, or the group) with the id.
func attachmentsOf(k threadKey, d *dataMessage) []core.Attachment {
	var out []core.Attachment
	for _, at := range d.Attachments {
		name := at.Filename
		if name == "" {
			name = at.ID
		}
		mime := at.ContentType
		if mime == "" {
			mime = "application/octet-stream"
		}
		out = append(out, core.NewAttachment(k.String()+"#"+at.ID, name, mime, at.Size))
	}
	return out
}

// parseAttachmentRef reads a Ref written by attachmentsOf.
func parseAttachmentRef(ref string) (threadKey, string, error) {
	i := strings.LastIndexByte(ref, '#')
	if i < 0 || !attachmentIDRE.MatchString(ref[i+1:]) {
		return threadKey{}, "", fmt.Errorf("signal: attachment ref %q: want <thread>#<id>", ref)
	}
	k, err := parseThreadKey(ref[:i])
	if err != nil {
		return threadKey{}, "", err
	}
	return k, ref[i+1:], nil
}

var _ core.AttachmentFetcher = (*Adapter)(nil)

// FetchAttachment implements core.AttachmentFetcher: the size the message
// said (signal-cli downloaded the file when it arrived) is judged first,
// then JSON-RPC getAttachment hands over the content, base64 in the
// answer, of which no more than maxBytes' worth is read.
func (a *Adapter) FetchAttachment(ctx context.Context, at core.Attachment, maxBytes int64) ([]byte, error) {
	k, id, err := parseAttachmentRef(at.Ref)
	if err != nil {
		return nil, err
	}
	size := at.Size
	if size == 0 {
		size = -1
	}
	if err := core.CheckAttachment(at, size, "", maxBytes); err != nil {
		return nil, fmt.Errorf("signal: attachment %s: %w", at.Name, err)
	}
	p := k.params(a.cfg.Account)
	p["id"] = id
	if r, ok := p["recipient"].([]string); ok && len(r) == 1 {
		p["recipient"] = r[0] // getAttachment names the one sender
	}
	// base64 is 4 bytes for every 3, plus the JSON envelope.
	limit := (maxBytes+2)/3*4 + 1024
	var res struct {
		Data string `json:"data"`
	}
	err = a.rpc.callLimit(ctx, "getAttachment", p, &res, limit)
	var re *RPCError
	switch {
	case errors.Is(err, errAnswerTooLarge):
		return nil, fmt.Errorf("signal: attachment %s: %w", at.Name, core.ErrAttachmentTooLarge)
	case errors.As(err, &re) && re.Code == codeUserError:
		return nil, fmt.Errorf("signal: attachment %s: %w: %v", at.Name, core.ErrAttachmentGone, err)
	case err != nil:
		return nil, fmt.Errorf("signal: attachment %s: %w", at.Name, err)
	}
	b, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		return nil, fmt.Errorf("signal: attachment %s: malformed data: %v", at.Name, err)
	}
	if int64(len(b)) > maxBytes {
		return nil, fmt.Errorf("signal: attachment %s: %w", at.Name, core.ErrAttachmentTooLarge)
	}
	return b, nil
}
