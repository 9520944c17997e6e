package telegram

import (
	"context"
	"errors"

	"github.com/opsgate/opsgate/core"
)

var _ core.ReplyEditor = (*Adapter)(nil)

// EditsReplies implements core.ReplyEditor: an agent's streamed text and
// the progress of long work are one message edited in place
// (editMessageText), paced by the chat's bucket like any message (edits
// count against Telegram's per-chat limit), each edit within 4,096
// characters.
func (a *Adapter) EditsReplies() bool { return true }

// editReply replaces a sent reply's text. An edit that changes nothing is
// done already; a message that can no longer be edited (deleted, too old)
// gets the text as a new message instead, so the final text is always
// seen.
func (a *Adapter) editReply(ctx context.Context, k threadKey, ref core.MessageRef, text string) (core.MessageRef, error) {
	chat, msg, err := parseMessageRef(ref.ID)
	if err != nil {
		return core.MessageRef{}, &core.PermanentError{Err: err}
	}
	err = a.api.call(ctx, "editMessageText", map[string]any{
		"chat_id": chat, "message_id": msg, "text": text, "parse_mode": "HTML", "disable_web_page_preview": true,
	}, nil)
	var ae *APIError
	switch {
	case err == nil, errors.As(err, &ae) && ae.notModified():
		return ref, nil
	case errors.As(err, &ae) && ae.editGone():
		a.log.Info("reply no longer editable; sending the text anew", "ref", ref.ID)
		return a.deliver(a.sendMessage(ctx, k, text, nil))
	}
	return a.deliver(core.MessageRef{}, err)
}
