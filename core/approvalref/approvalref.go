// Package approvalref packs a decision on an approval — which approval, and
// approve, reject, edit or approve all of its batch — or an answer to an
// agent's question — which run's question, and which choice, a skip or a
// form to open — into a short signed string that a chat button (or a
// prompt's text) can carry and hand back on a click.
//
// Platforms cap what a button may carry (64 bytes on one, 100 characters on
// another) and hand it back verbatim from an untrusted client, so the string
// holds only a compact approval reference and a truncated HMAC-SHA256 tag:
// never state. A click on a payload opsgate did not sign, or signed with a
// key that has since changed (a rotated token), is refused, and the
// approval's state is always read from the store.
//
// The package knows no platform: each adapter chooses a Format (its limit, an
// optional prefix that tells its payloads apart from other apps', the tag
// length) and the secret the key is derived from.
package approvalref

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/opsgate/opsgate/approvals"
)

// Action is what a presser wants done with an approval. It travels as one
// byte, so the payload stays short.
type Action byte

// The actions a card offers.
const (
	Approve Action = 'a'
	Reject  Action = 'r'
	Edit    Action = 'e'
	// ApproveAll approves every pending call of the batch the approval
	// leads (core.ActionApproveAll).
	ApproveAll Action = 'A'
)

// The actions a question offers: their Ref names a run's question (RunID,
// Step) instead of an approval.
const (
	// Answer answers with the question's Choice (for a confirm 0 is yes,
	// 1 is no).
	Answer Action = 'q'
	// Skip skips an optional question.
	Skip Action = 'k'
	// Form opens a form to answer the question in words.
	Form Action = 'f'
)

// Decision returns the action as core.Decision.Action spells it
// (approvals.ActionApprove, …), so adapters hand it to the engine
// unchanged; "" for an unknown byte or a question's action.
func (a Action) Decision() approvals.Action {
	switch a {
	case Approve:
		return approvals.ActionApprove
	case Reject:
		return approvals.ActionReject
	case Edit:
		return approvals.ActionEdit
	case ApproveAll:
		return "approve_all" // core.ActionApproveAll, which this package cannot import
	}
	return ""
}

// String names the action for logs and tests ("approve", …).
func (a Action) String() string {
	if d := a.Decision(); d != "" {
		return string(d)
	}
	switch a {
	case Answer:
		return "answer"
	case Skip:
		return "skip"
	case Form:
		return "form"
	}
	return fmt.Sprintf("Action(%q)", byte(a))
}

// Question reports whether the action answers a question.
func (a Action) Question() bool { return a == Answer || a == Skip || a == Form }

func (a Action) valid() bool { return a.Decision() != "" || a.Question() }

// Ref is what a payload says. Nothing else is trusted from the client.
type Ref struct {
	Action     Action
	ApprovalID string
	// RunID, Step and Choice name a question's answer (Action Answer,
	// Skip or Form): the question of the run's step Step, and the choice
	// (Answer only). ApprovalID is then empty.
	RunID        string
	Step, Choice int
}

// maxNumber bounds a question's step and choice in a payload.
const maxNumber = 9999

// ErrMalformed is a payload that is not in this format at all: another
// app's button, a truncated or re-spelled string.
var ErrMalformed = errors.New("approvalref: malformed payload")

// ErrForged is a payload in this format whose tag does not verify: forged,
// altered (another action or approval), or signed with a key that has since
// changed — a stale button from before a secret rotation.
var ErrForged = errors.New("approvalref: payload failed verification")

// DefaultTagBytes is the tag length when Format.TagBytes is zero: 96 bits
// is far beyond online guessing at any platform's rate limits, and short.
const DefaultTagBytes = 12

// Tag lengths a Format may choose: below 8 bytes a tag becomes guessable,
// and SHA-256 has no more than 32.
const (
	MinTagBytes = 8
	MaxTagBytes = sha256.Size
)

// Format is an adapter's choice of payload shape.
type Format struct {
	// Prefix starts every payload, so the adapter can tell its own from
	// other apps' on the same platform; empty for none (where every byte
	// counts). Printable ASCII without spaces.
	Prefix string
	// MaxLen is the platform's limit on a payload. Payloads are ASCII, so
	// bytes and characters are the same count. It must hold at least a
	// UUID reference.
	MaxLen int
	// TagBytes is how much of the HMAC-SHA256 a payload keeps; 0 means
	// DefaultTagBytes.
	TagBytes int
}

// keyLabel separates the button key from any other use of the secret.
const keyLabel = "opsgate-buttons-v1"

// tagDomain starts every tagged message, so a payload tag can never be
// mistaken for another tag made with the same key.
const tagDomain = "opsgate-ref-v1|"

// DeriveKey derives the key that signs payloads from an adapter's secret
// (a signing secret or bot token): no extra secret must be configured, the
// secret itself never signs anything, and rotating it invalidates every old
// button.
func DeriveKey(secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(keyLabel))
	return m.Sum(nil)
}

// Codec encodes and verifies payloads of one Format under one key. It is
// safe for concurrent use.
type Codec struct {
	key    []byte
	prefix string
	max    int
	tag    int
}

// b64 is strict and unpadded, so every payload has exactly one spelling
// (Decode also refuses the CR/LF that base64 would otherwise skip).
var b64 = base64.RawURLEncoding.Strict()

// uuidRef is the length of a UUID reference: "u" and 16 bytes in base64.
var uuidRef = 1 + b64.EncodedLen(16)

// New returns the Codec for f, keyed by DeriveKey(secret). It fails on an
// empty secret or a Format that cannot hold a UUID reference.
func New(secret string, f Format) (*Codec, error) {
	if secret == "" {
		return nil, errors.New("approvalref: new codec: empty secret")
	}
	if f.TagBytes == 0 {
		f.TagBytes = DefaultTagBytes
	}
	if f.TagBytes < MinTagBytes || f.TagBytes > MaxTagBytes {
		return nil, fmt.Errorf("approvalref: new codec: tag of %d bytes (want %d..%d)", f.TagBytes, MinTagBytes, MaxTagBytes)
	}
	for i := 0; i < len(f.Prefix); i++ {
		if c := f.Prefix[i]; c <= ' ' || c > '~' {
			return nil, fmt.Errorf("approvalref: new codec: prefix %q is not printable ASCII", f.Prefix)
		}
	}
	c := &Codec{key: DeriveKey(secret), prefix: f.Prefix, max: f.MaxLen, tag: f.TagBytes}
	if need := c.overhead() + uuidRef; f.MaxLen < need {
		return nil, fmt.Errorf("approvalref: new codec: max length %d cannot hold a UUID reference (%d)", f.MaxLen, need)
	}
	return c, nil
}

// overhead is every byte of a payload but the approval reference: prefix,
// action, dot and tag.
func (c *Codec) overhead() int { return len(c.prefix) + 1 + 1 + b64.EncodedLen(c.tag) }

// MaxLen is the Format's limit, which no payload exceeds.
func (c *Codec) MaxLen() int { return c.max }

// Encode packs r into at most MaxLen bytes: the prefix, the action byte,
// the approval reference (a canonical UUID as 16 raw bytes in base64url
// behind "u", any other id of letters, digits, '-' and '_' verbatim behind
// "s"), a dot and the tag. It fails on an unknown action, an id that cannot
// travel, or one too long for the limit.
func (c *Codec) Encode(r Ref) (string, error) {
	if !r.Action.valid() {
		return "", fmt.Errorf("approvalref: encode: unknown action %q", byte(r.Action))
	}
	id, nums := r.ApprovalID, ""
	if r.Action.Question() {
		if r.Step < 0 || r.Step > maxNumber || r.Choice < 0 || r.Choice > maxNumber {
			return "", fmt.Errorf("approvalref: encode: step %d or choice %d out of range", r.Step, r.Choice)
		}
		id, nums = r.RunID, strconv.Itoa(r.Step)+"-"+strconv.Itoa(r.Choice)
	}
	var ref string
	if u, err := uuid.Parse(id); err == nil && u.String() == id {
		ref = "u" + b64.EncodeToString(u[:])
	} else {
		if !safeID(id) {
			return "", fmt.Errorf("approvalref: encode: id %q cannot travel in a payload", id)
		}
		ref = "s" + id
	}
	body := string(r.Action) + nums + ref
	out := c.prefix + body + "." + b64.EncodeToString(c.sign(body))
	if len(out) > c.max {
		return "", fmt.Errorf("approvalref: encode: approval id %q too long (%d > %d bytes)", r.ApprovalID, len(out), c.max)
	}
	return out, nil
}

// Decode verifies and unpacks what Encode made: ErrMalformed if s is not in
// the format, ErrForged if its tag does not verify. The tag is compared in
// constant time.
func (c *Codec) Decode(s string) (Ref, error) {
	if len(s) > c.max || !strings.HasPrefix(s, c.prefix) {
		return Ref{}, ErrMalformed
	}
	rest := s[len(c.prefix):]
	if !payloadChars(rest) {
		return Ref{}, ErrMalformed
	}
	body, t, ok := strings.Cut(rest, ".")
	if !ok || len(body) < 3 {
		return Ref{}, ErrMalformed
	}
	got, err := b64.DecodeString(t)
	if err != nil || len(got) != c.tag {
		return Ref{}, ErrMalformed
	}
	r := Ref{Action: Action(body[0])}
	if !r.Action.valid() {
		return Ref{}, ErrMalformed
	}
	ref := body[1:]
	if r.Action.Question() {
		var ok bool
		if r.Step, r.Choice, ref, ok = numbers(ref); !ok {
			return Ref{}, ErrMalformed
		}
	}
	var id string
	switch ref[0] {
	case 'u':
		raw, err := b64.DecodeString(ref[1:])
		if err != nil || len(raw) != 16 {
			return Ref{}, ErrMalformed
		}
		id = uuid.UUID(raw).String()
	case 's':
		if !safeID(ref[1:]) {
			return Ref{}, ErrMalformed
		}
		id = ref[1:]
	default:
		return Ref{}, ErrMalformed
	}
	if r.Action.Question() {
		r.RunID = id
	} else {
		r.ApprovalID = id
	}
	if !hmac.Equal(got, c.sign(body)) {
		return Ref{}, ErrForged
	}
	return r, nil
}

// numbers reads a question's "<step>-<choice>" before its id reference
// (which starts with a letter), in the one spelling Encode writes.
func numbers(s string) (step, choice int, rest string, ok bool) {
	read := func(s string) (int, string, bool) {
		i := 0
		for i < len(s) && i < 5 && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 || (i > 1 && s[0] == '0') {
			return 0, s, false
		}
		n, err := strconv.Atoi(s[:i])
		return n, s[i:], err == nil && n <= maxNumber
	}
	step, s, ok = read(s)
	if !ok || len(s) < 2 || s[0] != '-' {
		return 0, 0, "", false
	}
	choice, s, ok = read(s[1:])
	if !ok || len(s) < 2 {
		return 0, 0, "", false
	}
	return step, choice, s, true
}

// sign tags body under the codec's key, bound to its prefix so a payload
// of one Format never verifies under another.
func (c *Codec) sign(body string) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(tagDomain))
	m.Write([]byte(c.prefix))
	m.Write([]byte{0})
	m.Write([]byte(body))
	return m.Sum(nil)[:c.tag]
}

// safeID accepts ids made of characters that survive any payload and a
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

// payloadChars accepts what may follow the prefix: safe id characters and
// the dot. Checking first keeps base64's ignored CR/LF out.
func payloadChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
