package email

import (
	"regexp"
	"strings"
)

// Quoted history and signatures are cut before a mail is read, because
// mail clients append the whole thread below a reply: the card we sent
// (with the word "approve" in its instructions) must never be read back as
// the approver's answer. Every rule cuts from the first line it matches to
// the end, except '>' lines, which are dropped wherever they are.
var (
	// "On Mon, 28 Nov 2026 at 10:00, Ops <ops@example.com> wrote:" (Gmail,
	// Apple Mail, Thunderbird) and its translations; Gmail wraps long
	// attributions, so the marker may end up to two lines later.
	attribStart = regexp.MustCompile(`(?i)^\s*(on|am|le|el|il|op|em|den|på)\s.+`)
	attribEnd   = regexp.MustCompile(`(?i)\b(wrote|schrieb|a écrit|escribió|ha scritto|schreef|escreveu|skrev)\b.*:\s*$`)
	digit       = regexp.MustCompile(`[0-9]`)
	// Outlook: "-----Original Message-----", a line of underscores, or a
	// "From:" header block followed by Sent:/Date:/To:/Subject: lines.
	originalMessage = regexp.MustCompile(`(?i)^\s*-{2,}\s*(original message|ursprüngliche nachricht|message d'origine|mensaje original|forwarded message)\s*-{2,}\s*$`)
	underscores     = regexp.MustCompile(`^\s*_{20,}\s*$`)
	headerFrom      = regexp.MustCompile(`(?i)^\s*\*?(from|von|de|da)\s*:\*?\s+\S`)
	headerNext      = regexp.MustCompile(`(?i)^\s*\*?(sent|date|to|subject|cc|gesendet|an|betreff|envoyé|à|objet|enviado|para|asunto)\s*:\*?`)
	// Mobile footers that are not part of anyone's answer.
	mobileFooter = regexp.MustCompile(`(?i)^\s*(sent from my |get outlook for |sent from outlook for )`)
)

// StripQuotes returns the new text of a reply: quoted lines ('>'), quoted
// history (attribution lines, Outlook's original-message and header
// blocks) and the signature (after "-- ") removed, trailing blank lines
// trimmed. Line endings are normalized to "\n".
func StripQuotes(body string) string {
	lines := strings.Split(strings.ReplaceAll(strings.ReplaceAll(body, "\r\n", "\n"), "\r", "\n"), "\n")
	cut := len(lines)
	for i := 0; i < cut; i++ {
		l := lines[i]
		switch {
		case l == "-- " || l == "--" || originalMessage.MatchString(l) || underscores.MatchString(l) || mobileFooter.MatchString(l):
			cut = i
		case attribStart.MatchString(l) && attribution(lines[i:min(i+3, cut)]):
			cut = i
		case headerFrom.MatchString(l) && headerBlock(lines[i+1:min(i+5, cut)]):
			cut = i
		}
	}
	out := make([]string, 0, cut)
	for _, l := range lines[:cut] {
		if strings.HasPrefix(strings.TrimLeft(l, " \t"), ">") {
			continue
		}
		out = append(out, strings.TrimRight(l, " \t"))
	}
	for len(out) > 0 && strings.TrimSpace(out[len(out)-1]) == "" {
		out = out[:len(out)-1]
	}
	for len(out) > 0 && strings.TrimSpace(out[0]) == "" {
		out = out[1:]
	}
	return strings.Join(out, "\n")
}

// attribution reports whether the first line, joined with up to two more,
// ends like "… wrote:".
func attribution(ls []string) bool {
	joined := ""
	for _, l := range ls {
		if joined != "" && strings.TrimSpace(l) == "" {
			return false
		}
		joined += " " + strings.TrimSpace(l)
		// A real attribution carries a date or time; "On Monday I wrote
		// the plan:" does not.
		if attribEnd.MatchString(joined) && digit.MatchString(joined) {
			return true
		}
	}
	return false
}

// headerBlock reports whether the lines after a "From:" line look like the
// rest of a quoted header block (at least one of Sent/Date/To/Subject).
func headerBlock(ls []string) bool {
	for _, l := range ls {
		if headerNext.MatchString(l) {
			return true
		}
	}
	return false
}
