package slack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/approvalref"
)

// Action ids on card buttons and callback ids on modals. The "opsgate:"
// prefix keeps them apart from anything else the app might post.
const (
	actionApprove = "opsgate:approve"
	actionReject  = "opsgate:reject"
	actionEdit    = "opsgate:edit"
	// actionApproveAll approves every pending call of a batch card.
	actionApproveAll = "opsgate:approve_all"
	// actionAnswer answers an agent's question with one of its choices;
	// its value is "<run>|<action>|<choice>" signed like an approval id.
	actionAnswer = "opsgate:answer"
	// skipChoice, in an answer button's value, skips an optional question.
	skipChoice = "skip"

	callbackReject = "opsgate:reject"
	callbackEdit   = "opsgate:edit"
)

// ErrBadReference is a button value or modal metadata that is malformed or
// whose HMAC tag does not verify: forged, altered, or from another install.
var ErrBadReference = errors.New("slack: bad approval reference")

// tagLen is the number of HMAC bytes kept: 96 bits is far beyond guessing
// within a signed request's 5-minute window, and keeps values short.
const tagLen = 12

// signer tags button payloads so a click can only name an approval opsgate
// itself put on a card. The key is derived from the adapter's secret, never
// used directly, the same way as every adapter's button key.
//
// Slack does not use approvalref's codec: its action travels apart from the
// value (the button's action_id, bound into the tag here), a value may hold
// up to 2,000 characters of any approval id, and modal metadata must also
// carry the card's thread. Converting would narrow what Slack accepts.
type signer struct{ key []byte }

func newSigner(secret string) signer {
	return signer{key: approvalref.DeriveKey(secret)}
}

func (s signer) tag(parts ...string) string {
	m := hmac.New(sha256.New, s.key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:tagLen])
}

func (s signer) verify(tag string, parts ...string) bool {
	return hmac.Equal([]byte(tag), []byte(s.tag(parts...)))
}

// buttonValue is what a card button carries: the approval id and a tag
// binding it to the button's action. Nothing else — the approval's state
// is always read from the store.
func (s signer) buttonValue(action, approvalID string) string {
	return approvalID + "." + s.tag(action, approvalID)
}

// parseButtonValue returns the approval id of a button value after checking
// its tag against the action that was clicked.
func (s signer) parseButtonValue(action, value string) (string, error) {
	i := strings.LastIndexByte(value, '.')
	if i <= 0 || i == len(value)-1 || len(value) > 2000 {
		return "", fmt.Errorf("%w: malformed button value", ErrBadReference)
	}
	id, tag := value[:i], value[i+1:]
	if !s.verify(tag, action, id) {
		return "", fmt.Errorf("%w: button tag does not verify", ErrBadReference)
	}
	return id, nil
}

// modalRef is carried in a modal's private_metadata: which approval the
// modal decides, and in which thread the card lives (so the decision event
// names the card's thread).
type modalRef struct {
	Callback   string
	ApprovalID string
	Thread     threadKey
}

func (s signer) encodeModalRef(r modalRef) string {
	k := r.Thread.String()
	return r.ApprovalID + "|" + k + "|" + s.tag(r.Callback, r.ApprovalID, k)
}

func (s signer) parseModalRef(callback, meta string) (modalRef, error) {
	parts := strings.Split(meta, "|")
	if len(parts) != 3 || parts[0] == "" {
		return modalRef{}, fmt.Errorf("%w: malformed modal metadata", ErrBadReference)
	}
	if !s.verify(parts[2], callback, parts[0], parts[1]) {
		return modalRef{}, fmt.Errorf("%w: modal tag does not verify", ErrBadReference)
	}
	tk, err := parseThreadKey(parts[1])
	if err != nil {
		return modalRef{}, fmt.Errorf("%w: %w", ErrBadReference, err)
	}
	return modalRef{Callback: callback, ApprovalID: parts[0], Thread: tk}, nil
}

// threadKey is what a core.Thread's Key packs for Slack: the workspace,
// the conversation and the ts of the thread's root message, written
// "<team>/<channel>/<thread_ts>". Every reply, card and card update of a
// run goes to that thread.
type threadKey struct {
	Team, Channel, TS string
}

func (k threadKey) String() string { return k.Team + "/" + k.Channel + "/" + k.TS }

// thread wraps the key as a core.Thread on this channel.
func (k threadKey) thread() core.Thread { return core.Thread{Channel: channelName, Key: k.String()} }

// parseThreadKey is the inverse of threadKey.String. The team may be empty
// (a payload without one); channel and ts may not — except in a direct
// key (directKey): a user id and no ts.
func parseThreadKey(s string) (threadKey, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || parts[1] == "" || (parts[2] == "" && !(parts[0] == "" && userIDRE.MatchString(parts[1]))) {
		return threadKey{}, fmt.Errorf("slack: thread key %q: want <team>/<channel>/<thread_ts>", s)
	}
	return threadKey{Team: parts[0], Channel: parts[1], TS: parts[2]}, nil
}

// userIDRE is a Slack user id (U…, or W… on Enterprise Grid).
var userIDRE = regexp.MustCompile(`^[UW][A-Z0-9]{2,20}$`)

// directKey is where a direct message to a user goes: the user id as the
// conversation (chat.postMessage opens the app's DM with them) and no
// thread ts, so it starts at the DM's top level.
func directKey(userID string) threadKey { return threadKey{Channel: userID} }

// DirectThread implements core.DirectMessenger: escalation reminds
// approvers in, and hands escalated approvers the card through, a DM from
// the app (docs/escalation.md).
func (a *Adapter) DirectThread(userID string) (core.Thread, bool) {
	if !userIDRE.MatchString(userID) {
		return core.Thread{}, false
	}
	return directKey(userID).thread(), true
}

var _ core.DirectMessenger = (*Adapter)(nil)
