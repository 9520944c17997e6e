package signal

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
)

// threadKey is a conversation: a direct one with a user (number or uuid)
// or a group (base64 id). Signal has no threads; replies go to the same
// conversation.
type threadKey struct {
	Group string
	User  string
}

func (k threadKey) String() string {
	if k.Group != "" {
		return "group:" + k.Group
	}
	return "dm:" + k.User
}

func parseThreadKey(s string) (threadKey, error) {
	kind, v, _ := strings.Cut(s, ":")
	switch {
	case kind == "group" && groupIDRE.MatchString(v):
		return threadKey{Group: v}, nil
	case kind == "dm" && ValidIdentity(v):
		return threadKey{User: v}, nil
	}
	return threadKey{}, fmt.Errorf("signal: thread key %q: want dm:<number or uuid> or group:<group id>", s)
}

// params addresses a send to k.
func (k threadKey) params(account string) map[string]any {
	p := map[string]any{"account": account}
	if k.Group != "" {
		p["groupId"] = k.Group
	} else {
		p["recipient"] = []string{k.User}
	}
	return p
}

// A message is (author, sent timestamp) in Signal; the author of what the
// bot sends is its account, so a MessageRef.ID is "<thread key>@<timestamp>".
func messageRef(k threadKey, ts int64) string { return k.String() + "@" + strconv.FormatInt(ts, 10) }

func parseMessageRef(s string) (threadKey, int64, error) {
	i := strings.LastIndexByte(s, '@')
	if i < 0 {
		return threadKey{}, 0, fmt.Errorf("signal: message ref %q: want <thread>@<timestamp>", s)
	}
	k, err := parseThreadKey(s[:i])
	if err != nil {
		return threadKey{}, 0, err
	}
	ts, err := strconv.ParseInt(s[i+1:], 10, 64)
	if err != nil || ts <= 0 {
		return threadKey{}, 0, fmt.Errorf("signal: message ref %q: bad timestamp", s)
	}
	return k, ts, nil
}

// codeAlphabet spells approval codes without look-alikes (no 0/O, 1/I).
const codeAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

// codeFor is the approval's code of length n: derived from its id, so
// every replica and every re-render of the card agrees without asking.
func codeFor(approvalID string, n int) string {
	sum := sha256.Sum256([]byte("opsgate-signal-code\x00" + approvalID))
	b := make([]byte, n)
	for i := range b {
		b[i] = codeAlphabet[int(sum[i])%len(codeAlphabet)]
	}
	return string(b)
}

// validCode reports whether s has the shape of a code.
func validCode(s string) bool {
	if len(s) < 4 || len(s) > 8 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune(codeAlphabet, r) {
			return false
		}
	}
	return true
}
