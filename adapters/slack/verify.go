package slack

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// signatureWindow is how far a request's timestamp may be from now: Slack's
// documented 5 minutes, either side (clock skew).
const signatureWindow = 5 * time.Minute

// Errors of request verification; each is answered 401 (or 400 for a body
// that cannot be read) and nothing is recorded.
var (
	ErrBadSignature = errors.New("slack: bad request signature")
	ErrStale        = errors.New("slack: request timestamp outside the 5-minute window")
	ErrReplay       = errors.New("slack: replayed request")
	ErrBodyTooLarge = errors.New("slack: request body too large")
)

// verifier checks X-Slack-Signature (v0 HMAC-SHA256 of "v0:ts:body") and
// the timestamp window, and refuses a signature it has already accepted
// within the window: Slack signs every delivery (retries included) afresh,
// so an identical signature is a replay.
type verifier struct {
	secret []byte
	now    func() time.Time
	seen   *replayRing
}

func newVerifier(secret string, now func() time.Time) *verifier {
	return &verifier{secret: []byte(secret), now: now, seen: newReplayRing(replayCapacity)}
}

// readVerified reads the whole body (capped at limit), verifies it and puts
// it back on r.Body for any parser that reads the request again. The
// returned release function forgets the signature again: call it when the
// request could not be processed, so Slack's retry of the very same
// delivery is not refused as a replay.
func (v *verifier) readVerified(r *http.Request, limit int64) (body []byte, release func(), err error) {
	rd := http.MaxBytesReader(nil, r.Body, limit)
	body, err = io.ReadAll(rd)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, nil, ErrBodyTooLarge
		}
		return nil, nil, fmt.Errorf("slack: read body: %w", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sig := r.Header.Get("X-Slack-Signature")
	at, err := v.check(r.Header.Get("X-Slack-Request-Timestamp"), sig, body)
	if err != nil {
		return nil, nil, err
	}
	key := sigKeyOf(sig)
	if err := v.seen.claim(key, v.now(), at.Add(signatureWindow)); err != nil {
		return nil, nil, err
	}
	return body, func() { v.seen.forget(key) }, nil
}

// check verifies one signature over body at timestamp ts and returns the
// timestamp.
func (v *verifier) check(ts, sig string, body []byte) (time.Time, error) {
	if len(v.secret) == 0 {
		// No signing secret (Socket Mode): nothing sent over HTTP can be
		// trusted, and an empty HMAC key would be forgeable by anyone.
		return time.Time{}, fmt.Errorf("%w: no signing secret configured", ErrBadSignature)
	}
	if ts == "" || sig == "" {
		return time.Time{}, fmt.Errorf("%w: missing X-Slack-Signature or X-Slack-Request-Timestamp", ErrBadSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: malformed timestamp", ErrBadSignature)
	}
	at := time.Unix(sec, 0)
	if d := v.now().Sub(at); d > signatureWindow || d < -signatureWindow {
		return time.Time{}, ErrStale
	}
	m := hmac.New(sha256.New, v.secret)
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	want := "v0=" + hex.EncodeToString(m.Sum(nil))
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return time.Time{}, ErrBadSignature
	}
	return at, nil
}
