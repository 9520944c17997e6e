package email

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"github.com/opsgate/opsgate/core"
)

// Two independent secrets protect an approval by reply: the reply token in
// the plus-addressed Reply-To, and the tag in our Message-ID that a reply
// echoes in In-Reply-To. Both are HMACs under keys derived from
// Config.TokenKey, with different labels, so a leaked Message-ID (quoted in
// a forward, a References header, a log) does not reveal the reply token.
//
// The reply token is bound to the approval AND to the one approver it was
// mailed to: each eligible approver gets their own card mail with their own
// token, and a reply counts only from the address its token was issued to.
// The requester never gets one. (Tokens of the first version were bound to
// the approval alone and shared by everyone the card reached; they no
// longer verify.)
const (
	labelKey   = "opsgate-email-v1"
	labelReply = "reply2\x00"
	labelMsgID = "msgid\x00"
	// tokenLen is 26 base32 characters: 130 bits, lowercase so that a
	// server folding the local part's case keeps it valid.
	tokenLen = 26
)

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// tokens derives and checks the per-approval secrets.
type tokens struct{ key []byte }

func newTokens(secret string) tokens {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(labelKey))
	return tokens{key: m.Sum(nil)}
}

func (t tokens) mac(label, data string) string {
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte(label + data))
	return strings.ToLower(b32.EncodeToString(m.Sum(nil)))[:tokenLen]
}

// replyToken is the plus-address tag of the Reply-To of the card mailed to
// recipient about an approval.
func (t tokens) replyToken(approvalID, recipient string) string {
	return t.mac(labelReply, approvalID+"\x00"+strings.ToLower(strings.TrimSpace(recipient)))
}

// msgTag is the tag inside the Message-IDs of mail about an approval.
func (t tokens) msgTag(approvalID string) string { return t.mac(labelMsgID, approvalID) }

// validReply reports in constant time whether tok is the reply token
// issued to recipient for approvalID.
func (t tokens) validReply(approvalID, recipient, tok string) bool {
	return hmac.Equal([]byte(t.replyToken(approvalID, recipient)), []byte(strings.ToLower(tok)))
}

// validTag reports in constant time whether tag is approvalID's Message-ID
// tag.
func (t tokens) validTag(approvalID, tag string) bool {
	return hmac.Equal([]byte(t.msgTag(approvalID)), []byte(strings.ToLower(tag)))
}

// randomPart is the unique part of a Message-ID.
func randomPart() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("email: crypto/rand: %v", err)) // never fails on supported platforms
	}
	return strings.ToLower(b32.EncodeToString(b[:]))
}

var safeID = regexp.MustCompile(`^[A-Za-z0-9-]{1,100}$`)

// encodeApprovalID makes an approval id safe inside a Message-ID's dot-atom:
// "i<id>" when it is already made of letters, digits and '-', else
// "x<hex>".
func encodeApprovalID(id string) string {
	if safeID.MatchString(id) {
		return "i" + id
	}
	return "x" + hex.EncodeToString([]byte(id))
}

func decodeApprovalID(s string) (string, bool) {
	switch {
	case strings.HasPrefix(s, "i") && safeID.MatchString(s[1:]):
		return s[1:], true
	case strings.HasPrefix(s, "x"):
		b, err := hex.DecodeString(s[1:])
		return string(b), err == nil && len(b) > 0
	}
	return "", false
}

// newMessageID returns a bare Message-ID (no angle brackets) for mail from
// domain; with an approval id it carries the approval's tag, so a reply's
// In-Reply-To names the approval and proves it saw our mail.
func (t tokens) newMessageID(domain, approvalID string) string {
	if approvalID == "" {
		return "og." + randomPart() + "@" + domain
	}
	return fmt.Sprintf("og.a.%s.%s.%s@%s", encodeApprovalID(approvalID), t.msgTag(approvalID), randomPart(), domain)
}

// approvalOfMessageID returns the approval a Message-ID of ours names, if
// it is ours (our domain) and its tag verifies. ok is false for anything
// else, including a tag that does not match: such an id was not written by
// us.
func (t tokens) approvalOfMessageID(id, domain string) (approvalID string, ok bool) {
	left, right, found := strings.Cut(strings.Trim(id, "<> \t"), "@")
	if !found || !strings.EqualFold(right, domain) {
		return "", false
	}
	parts := strings.Split(left, ".")
	if len(parts) != 5 || parts[0] != "og" || parts[1] != "a" {
		return "", false
	}
	apID, ok := decodeApprovalID(parts[2])
	if !ok || !t.validTag(apID, parts[3]) {
		return "", false
	}
	return apID, true
}

// isOurMessageID reports whether id was minted by this adapter's domain
// and format (tag unchecked).
func isOurMessageID(id, domain string) bool {
	left, right, found := strings.Cut(strings.Trim(id, "<> \t"), "@")
	return found && strings.EqualFold(right, domain) && strings.HasPrefix(left, "og.")
}

// plusAddress is the Reply-To of mail about an approval sent to recipient.
func (t tokens) plusAddress(bot, approvalID, recipient string) string {
	return localPart(bot) + "+" + t.replyToken(approvalID, recipient) + "@" + domainPart(bot)
}

// plusTag returns the tag of addr when it is bot plus-addressed
// ("ops+tag@example.com" for bot "ops@example.com").
func plusTag(addr, bot string) (string, bool) {
	addr = strings.ToLower(strings.TrimSpace(addr))
	if domainPart(addr) != domainPart(bot) {
		return "", false
	}
	local, tag, ok := strings.Cut(localPart(addr), "+")
	if !ok || local != localPart(bot) || tag == "" {
		return "", false
	}
	return tag, true
}

// threadKey packs what answering in place needs: the correspondent's
// address, the Message-ID of the thread's first mail (for In-Reply-To and
// References) and the subject without reply prefixes (Gmail threads by
// subject too): "alice@example.com <id@host> deploy api 1.2.3".
type threadKey struct {
	Addr    string
	Root    string // bare Message-ID
	Subject string
}

func (k threadKey) String() string {
	s := k.Addr + " <" + k.Root + ">"
	if k.Subject != "" {
		s += " " + k.Subject
	}
	return s
}

func (k threadKey) thread() core.Thread { return core.Thread{Channel: ChannelName, Key: k.String()} }

// parseThreadKey is the inverse of threadKey.String.
func parseThreadKey(s string) (threadKey, error) {
	addr, rest, ok := strings.Cut(s, " <")
	if !ok || addr == "" || !strings.Contains(addr, "@") {
		return threadKey{}, fmt.Errorf("email: thread key %q: want \"<address> <message-id> [subject]\"", s)
	}
	root, subj, ok := strings.Cut(rest, ">")
	if !ok || root == "" {
		return threadKey{}, fmt.Errorf("email: thread key %q: no message id", s)
	}
	return threadKey{Addr: addr, Root: root, Subject: strings.TrimPrefix(subj, " ")}, nil
}

var replyPrefix = regexp.MustCompile(`(?i)^\s*((re|fwd?|aw|wg|sv|vs|antw|tr|r|rif|ref)\s*(\[\d+\])?\s*:\s*)+`)

// baseSubject strips reply and forward prefixes and folds whitespace, so a
// thread's subject is the same in the request and every answer to it.
func baseSubject(s string) string {
	s = replyPrefix.ReplaceAllString(s, "")
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200])
	}
	return s
}
