package discord

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/opsgate/opsgate/core"
)

// MaxCustomID is Discord's limit on a component's custom_id, in characters.
const MaxCustomID = 100

// Button actions as they travel in custom_id: one byte each.
const (
	actApprove = 'a'
	actReject  = 'r'
	actEdit    = 'e'
)

// customIDPrefix marks opsgate's payloads among other apps' components.
const customIDPrefix = "og1."

// tagBytes is how much of the HMAC-SHA256 a payload carries: 128 bits, far
// beyond guessing within Discord's rate limits, and still short.
const tagBytes = 16

// ErrMalformedPayload is a custom_id that is not in opsgate's format at all.
var ErrMalformedPayload = errors.New("discord: malformed component payload")

// ErrForgedPayload is a custom_id in opsgate's format whose tag does not
// verify: forged, or signed with a key that has since changed.
var ErrForgedPayload = errors.New("discord: component payload failed verification")

// buttonKey derives the key that signs custom_ids from the bot token, so no
// extra secret must be configured and rotating the token invalidates every
// old button.
func buttonKey(token string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("opsgate-buttons-v1"))
	return m.Sum(nil)
}

// payload is what a button or modal says: which approval, which action.
// Nothing else is trusted from the client.
type payload struct {
	Action     byte
	ApprovalID string
}

// b64 is strict, so every payload has exactly one spelling.
var b64 = base64.RawURLEncoding.Strict()

// encodePayload packs (action, approval id) into a custom_id of at most
// MaxCustomID characters: prefix, action byte, the approval reference (a
// UUID as 16 raw bytes in base64url behind "u", another id verbatim behind
// "s"), a dot and the tag.
func encodePayload(key []byte, p payload) (string, error) {
	switch p.Action {
	case actApprove, actReject, actEdit:
	default:
		return "", fmt.Errorf("discord: encode payload: unknown action %q", p.Action)
	}
	var ref string
	if u, err := uuid.Parse(p.ApprovalID); err == nil && u.String() == p.ApprovalID {
		ref = "u" + b64.EncodeToString(u[:])
	} else {
		if !safeID(p.ApprovalID) {
			return "", fmt.Errorf("discord: encode payload: approval id %q cannot travel in custom_id", p.ApprovalID)
		}
		ref = "s" + p.ApprovalID
	}
	body := string(p.Action) + ref
	out := customIDPrefix + body + "." + b64.EncodeToString(tag(key, body))
	if len(out) > MaxCustomID {
		return "", fmt.Errorf("discord: encode payload: approval id %q too long for custom_id (%d > %d)", p.ApprovalID, len(out), MaxCustomID)
	}
	return out, nil
}

// decodePayload verifies and unpacks what encodePayload made.
func decodePayload(key []byte, s string) (payload, error) {
	if len(s) > MaxCustomID || !strings.HasPrefix(s, customIDPrefix) {
		return payload{}, ErrMalformedPayload
	}
	body, t, ok := strings.Cut(s[len(customIDPrefix):], ".")
	if !ok || len(body) < 3 {
		return payload{}, ErrMalformedPayload
	}
	got, err := b64.DecodeString(t)
	if err != nil || len(got) != tagBytes {
		return payload{}, ErrMalformedPayload
	}
	p := payload{Action: body[0]}
	switch p.Action {
	case actApprove, actReject, actEdit:
	default:
		return payload{}, ErrMalformedPayload
	}
	ref := body[1:]
	switch ref[0] {
	case 'u':
		raw, err := b64.DecodeString(ref[1:])
		if err != nil || len(raw) != 16 {
			return payload{}, ErrMalformedPayload
		}
		p.ApprovalID = uuid.UUID(raw).String()
	case 's':
		if !safeID(ref[1:]) {
			return payload{}, ErrMalformedPayload
		}
		p.ApprovalID = ref[1:]
	default:
		return payload{}, ErrMalformedPayload
	}
	if !hmac.Equal(got, tag(key, body)) {
		return payload{}, ErrForgedPayload
	}
	return p, nil
}

func tag(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("cid1|"))
	m.Write([]byte(body))
	return m.Sum(nil)[:tagBytes]
}

// safeID accepts ids made of letters, digits, '-' and '_'.
func safeID(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
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
