package discord

import (
	"errors"
	"fmt"
	"strings"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/approvalref"
)

// MaxCustomID is Discord's limit on a component's custom_id, in characters.
const MaxCustomID = 100

// customIDPrefix marks opsgate's payloads among other apps' components.
const customIDPrefix = "og1."

// newButtons returns the codec of button and modal custom_ids. Its key is
// derived from the bot token, so no extra secret must be configured and
// rotating the token invalidates every old button. The 128-bit tag is far
// beyond guessing within Discord's rate limits, and still short.
func newButtons(token string) (*approvalref.Codec, error) {
	return approvalref.New(token, approvalref.Format{Prefix: customIDPrefix, MaxLen: MaxCustomID, TagBytes: 16})
}

// dmGuild stands for "no guild" in a thread key (a direct message).
const dmGuild = "@me"

// threadKey is where a run lives: the guild (or dmGuild), the channel the
// request came from, and the channel messages go to — the thread started
// from the bot's message, or the channel itself where no thread can be
// started (DMs, requests made inside a thread). Every message goes through
// the bot token to Thread, so it keeps working after the interaction token's
// 15 minutes.
type threadKey struct {
	Guild, Channel, Thread string
}

// String packs the key as "<guild>/<channel>/<thread>".
func (k threadKey) String() string { return k.Guild + "/" + k.Channel + "/" + k.Thread }

func (k threadKey) thread() core.Thread { return core.Thread{Channel: ChannelName, Key: k.String()} }

// ErrBadThreadKey is a thread key this adapter did not write.
var ErrBadThreadKey = errors.New("discord: malformed thread key")

// parseThreadKey is the inverse of threadKey.String.
func parseThreadKey(s string) (threadKey, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || (parts[0] != dmGuild && !isSnowflake(parts[0])) || !isSnowflake(parts[1]) || !isSnowflake(parts[2]) {
		return threadKey{}, fmt.Errorf("%w: %q", ErrBadThreadKey, s)
	}
	return threadKey{Guild: parts[0], Channel: parts[1], Thread: parts[2]}, nil
}

// messageRef packs a sent message's channel and id for later edits.
func messageRef(channel, id string) string { return channel + "/" + id }

// parseMessageRef is the inverse of messageRef.
func parseMessageRef(s string) (channel, id string, err error) {
	channel, id, ok := strings.Cut(s, "/")
	if !ok || !isSnowflake(channel) || !isSnowflake(id) {
		return "", "", fmt.Errorf("discord: malformed message reference %q", s)
	}
	return channel, id, nil
}
