package discord

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"strconv"
	"time"
)

// Signature headers of an interaction request.
const (
	headerSignature = "X-Signature-Ed25519"
	headerTimestamp = "X-Signature-Timestamp"
)

// Reasons a request fails verification (all answered 401).
var (
	ErrBadSignature = errors.New("discord: interaction signature does not verify")
	ErrStale        = errors.New("discord: interaction timestamp outside the allowed window")
)

// verify checks Discord's Ed25519 signature over timestamp+body and that
// the timestamp lies within skew of now. discordgo.VerifyInteraction checks
// only the signature; without the window a captured request could be
// replayed forever.
func verify(pub ed25519.PublicKey, sigHex, ts string, body []byte, now time.Time, skew time.Duration) error {
	sig, err := hex.DecodeString(sigHex)
	if err != nil || len(sig) != ed25519.SignatureSize || ts == "" || len(ts) > 20 {
		return ErrBadSignature
	}
	msg := make([]byte, 0, len(ts)+len(body))
	msg = append(msg, ts...)
	msg = append(msg, body...)
	if !ed25519.Verify(pub, msg, sig) {
		return ErrBadSignature
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrStale
	}
	d := now.Sub(time.Unix(secs, 0))
	if d > skew || d < -skew {
		return ErrStale
	}
	return nil
}
