package telegram

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// MaxCallbackData is Telegram's limit on an inline button's callback_data,
// in bytes.
const MaxCallbackData = 64

// Button actions as they travel in callback_data: one byte each.
const (
	actApprove = 'a'
	actReject  = 'r'
	actEdit    = 'e'
)

// tagBytes is how much of the HMAC-SHA256 a payload carries: 96 bits is far
// beyond guessing within Telegram's rate limits and keeps the payload short.
const tagBytes = 12

// ErrMalformedPayload is a callback_data or prompt reference that is not in
// opsgate's format at all (another bot's button, a truncated string).
var ErrMalformedPayload = errors.New("telegram: malformed button payload")

// ErrForgedPayload is a payload in opsgate's format whose tag does not
// verify: forged, or signed with a key that has since changed (a stale
// button from before a token rotation).
var ErrForgedPayload = errors.New("telegram: button payload failed verification")

// buttonKey derives the key that signs button payloads from the bot token,
// so no extra secret must be configured and rotating the token invalidates
// every old button.
func buttonKey(token string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("opsgate-buttons-v1"))
	return m.Sum(nil)
}

// payload is what a button or a prompt reference says: which approval, and
// what the presser wants to do with it.
type payload struct {
	Action     byte
	ApprovalID string
}

var b64 = base64.RawURLEncoding

// encodePayload packs (action, approval id) into at most MaxCallbackData
// bytes: the action byte, the approval reference (a UUID as 16 raw bytes in
// base64url behind "u", any other id verbatim behind "s"), a dot and the tag.
func encodePayload(key []byte, p payload) (string, error) {
	switch p.Action {
	case actApprove, actReject, actEdit:
	default:
		return "", fmt.Errorf("telegram: encode payload: unknown action %q", p.Action)
	}
	var ref string
	if u, err := uuid.Parse(p.ApprovalID); err == nil && u.String() == p.ApprovalID {
		ref = "u" + b64.EncodeToString(u[:])
	} else {
		if p.ApprovalID == "" || !safeID(p.ApprovalID) {
			return "", fmt.Errorf("telegram: encode payload: approval id %q cannot travel in callback_data", p.ApprovalID)
		}
		ref = "s" + p.ApprovalID
	}
	body := string(p.Action) + ref
	out := body + "." + b64.EncodeToString(tag(key, body))
	if len(out) > MaxCallbackData {
		return "", fmt.Errorf("telegram: encode payload: approval id %q too long for callback_data (%d > %d bytes)", p.ApprovalID, len(out), MaxCallbackData)
	}
	return out, nil
}

// decodePayload verifies and unpacks what encodePayload made.
// ErrMalformedPayload if it is not ours, ErrForgedPayload if the tag fails.
func decodePayload(key []byte, s string) (payload, error) {
	if len(s) == 0 || len(s) > MaxCallbackData {
		return payload{}, ErrMalformedPayload
	}
	body, t, ok := strings.Cut(s, ".")
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
	m.Write([]byte("cb1|"))
	m.Write([]byte(body))
	return m.Sum(nil)[:tagBytes]
}

// safeID accepts ids made of characters that survive callback_data and a
// message text unchanged: letters, digits, '-' and '_'.
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
