package email

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// Answer is an approver's reply as parsed from the new text of a mail.
type Answer struct {
	// Action is approve, reject, edit or approve all (core.ActionApproveAll).
	Action approvals.Action
	// Reason is reject's feedback.
	Reason string
	// Args are edit's new arguments; they replace the proposed ones as a
	// whole (the README's edit semantics).
	Args map[string]any
}

// ErrUnreadableReply is wrapped by every ParseAnswer error: the reply said
// nothing we can act on. Its message is mailed back with the instructions.
var ErrUnreadableReply = errors.New("unreadable reply")

var (
	approveRE = regexp.MustCompile(`(?i)^approved?[.!]*$`)
	rejectRE  = regexp.MustCompile(`(?i)^reject(ed)?(\s*[:\-–]\s*|\s+|$)(.*)$`)
	editRE    = regexp.MustCompile(`(?i)^edit(ed)?(\s*:\s*|\s+|$)(.*)$`)
	argLineRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_.-]{0,63})\s*[:=]\s*(.*)$`)
)

// maxReplyBytes bounds what ParseAnswer reads; an answer is a word and at
// most a few lines of arguments.
const maxReplyBytes = 64 << 10

// ParseAnswer reads an approval reply whose quoted history is already
// stripped (StripQuotes). The first non-blank line decides: "approve",
// "reject: <reason>" (the reason may also follow on the next lines), or
// "edit" followed — on the same line or the next — by the new arguments as
// one JSON object or as "key: value" lines. Values in key: value lines are
// strings unless they read as JSON objects, arrays, quoted strings, true,
// false or null.
func ParseAnswer(text string) (Answer, error) {
	if len(text) > maxReplyBytes {
		return Answer{}, fmt.Errorf("%w: the reply is longer than %d KiB", ErrUnreadableReply, maxReplyBytes>>10)
	}
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	first := -1
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			first = i
			break
		}
	}
	if first < 0 {
		return Answer{}, fmt.Errorf("%w: the reply is empty", ErrUnreadableReply)
	}
	head := strings.TrimSpace(lines[first])
	rest := strings.TrimSpace(strings.Join(lines[first+1:], "\n"))
	if _, all := core.ParseApproveAll(head); all {
		// The approval the reply answers is the card's: a reference is
		// not needed, and one given is not trusted over the reply's token.
		return Answer{Action: core.ActionApproveAll}, nil
	}
	switch {
	case approveRE.MatchString(head):
		return Answer{Action: approvals.ActionApprove}, nil
	case rejectRE.MatchString(head):
		m := rejectRE.FindStringSubmatch(head)
		reason := strings.TrimSpace(m[3])
		if reason == "" {
			reason = strings.Join(strings.Fields(rest), " ")
		}
		if len(reason) > 2000 {
			reason = reason[:2000]
		}
		return Answer{Action: approvals.ActionReject, Reason: reason}, nil
	case editRE.MatchString(head):
		m := editRE.FindStringSubmatch(head)
		body := strings.TrimSpace(strings.TrimSpace(m[3]) + "\n" + rest)
		args, err := parseArgs(body)
		if err != nil {
			return Answer{}, err
		}
		return Answer{Action: approvals.ActionEdit, Args: args}, nil
	}
	word := head
	if len(word) > 40 {
		word = word[:40] + "…"
	}
	return Answer{}, fmt.Errorf("%w: %q is not approve, reject or edit", ErrUnreadableReply, word)
}

// parseArgs reads edit's arguments: a JSON object, or key: value lines.
func parseArgs(body string) (map[string]any, error) {
	if body == "" {
		return nil, fmt.Errorf("%w: edit needs the new arguments after it (JSON or key: value lines)", ErrUnreadableReply)
	}
	if strings.HasPrefix(body, "{") {
		dec := json.NewDecoder(strings.NewReader(body))
		var args map[string]any
		if err := dec.Decode(&args); err != nil {
			return nil, fmt.Errorf("%w: edit arguments are not a JSON object: %v", ErrUnreadableReply, err)
		}
		if args == nil {
			return nil, fmt.Errorf("%w: edit arguments are null", ErrUnreadableReply)
		}
		// Text after the object counts only if it follows a blank line (a
		// signature); anything else is a typo the approver should see.
		if rest := body[dec.InputOffset():]; strings.TrimSpace(rest) != "" && !blankLineFirst(rest) {
			return nil, fmt.Errorf("%w: text after the JSON object of edit", ErrUnreadableReply)
		}
		return args, nil
	}
	args := map[string]any{}
	// The arguments are the first block of lines; a blank line ends it,
	// so a signature below is not read as arguments.
	for _, l := range strings.Split(body, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			break
		}
		m := argLineRE.FindStringSubmatch(l)
		if m == nil {
			return nil, fmt.Errorf("%w: %q is not a \"key: value\" line", ErrUnreadableReply, clip(l, 60))
		}
		if _, dup := args[m[1]]; dup {
			return nil, fmt.Errorf("%w: argument %q given twice", ErrUnreadableReply, m[1])
		}
		args[m[1]] = argValue(strings.TrimSpace(m[2]))
	}
	return args, nil
}

// argValue keeps a value a string unless it is unmistakably JSON, so that
// "version: 1.2" stays the string "1.2" a schema most likely wants.
func argValue(v string) any {
	switch {
	case v == "true", v == "false", v == "null",
		strings.HasPrefix(v, "{"), strings.HasPrefix(v, "["), strings.HasPrefix(v, `"`):
		var out any
		dec := json.NewDecoder(bytes.NewReader([]byte(v)))
		if dec.Decode(&out) == nil && !dec.More() {
			return out
		}
	}
	return v
}

// blankLineFirst reports whether s reaches a blank line before any other
// text.
func blankLineFirst(s string) bool {
	line, rest, ok := strings.Cut(s, "\n")
	if strings.TrimSpace(line) != "" || !ok {
		return false
	}
	next, _, _ := strings.Cut(rest, "\n")
	return strings.TrimSpace(next) == ""
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
