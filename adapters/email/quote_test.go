package email

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// loadReply reads a client-shaped reply from testdata and fills its
// placeholders ({{FROM}}, {{TO}}, {{SUBJECT}}, {{ANSWER}}, …).
func loadReply(t testing.TB, name string, vars map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for k, v := range vars {
		s = strings.ReplaceAll(s, "{{"+k+"}}", v)
	}
	return s
}

var replyVars = map[string]string{
	"FROM": "bob@example.com", "TO": "ops+tok@example.com", "SUBJECT": "Approval needed: deploy env=staging",
	"MESSAGE_ID": "reply-1@mail.example.com", "IN_REPLY_TO": "og.a.x.y.z@example.com",
	"REFERENCES": "<req-1@example.com> <og.a.x.y.z@example.com>",
}

func TestStripQuotesClientShapes(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"gmail_reply.eml", "outlook_reply.eml", "outlook_original_message.eml", "apple_mail_reply.eml"} {
		for _, answer := range []string{"approve", "reject: not during the freeze", "edit\nservice: api\nversion: 1.2.4"} {
			t.Run(name+"/"+strings.Fields(answer)[0], func(t *testing.T) {
				vars := map[string]string{"ANSWER": answer}
				for k, v := range replyVars {
					vars[k] = v
				}
				in, err := parseMail([]byte(loadReply(t, name, vars)))
				if err != nil {
					t.Fatal(err)
				}
				got := StripQuotes(in.Text)
				want := answer
				if name == "outlook_reply.eml" {
					// Outlook has no signature delimiter: the signature stays,
					// and only the first line decides.
					want += "\n\nBob Builder\nSite Reliability | Example Corp"
				}
				if got != want {
					t.Errorf("StripQuotes = %q, want %q", got, want)
				}
				ans, err := ParseAnswer(got)
				if err != nil {
					t.Fatalf("ParseAnswer: %v", err)
				}
				if string(ans.Action) != strings.TrimSuffix(strings.Fields(answer)[0], ":") {
					t.Errorf("action %q for %q", ans.Action, answer)
				}
				if in.From != "bob@example.com" || in.MessageID != "reply-1@mail.example.com" ||
					len(in.InReplyTo) != 1 || in.InReplyTo[0] != "og.a.x.y.z@example.com" {
					t.Errorf("headers: from %q id %q in-reply-to %v", in.From, in.MessageID, in.InReplyTo)
				}
			})
		}
	}
}

func TestStripQuotes(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, in, want string }{
		{"Plain", "approve", "approve"},
		{"QuotedLinesDropped", "approve\n> reject: no\n>> edit\nthanks", "approve\nthanks"},
		{"Signature", "reject: no\n-- \nBob\napprove", "reject: no"},
		{"GmailWrappedAttribution", "approve\n\nOn Sun, Nov 29, 2026 at 1:00 PM opsgate <ops@example.com>\nwrote:\n\napprove", "approve"},
		{"GermanAttribution", "approve\n\nAm 29.11.2026 um 13:00 schrieb opsgate <ops@example.com>:\nreject", "approve"},
		{"OriginalMessage", "approve\n-----Original Message-----\nFrom: x\nreject", "approve"},
		{"OutlookHeaderBlock", "approve\n\nFrom: opsgate <ops@example.com>\nSent: Sunday\nTo: bob\nreject", "approve"},
		{"FromLineWithoutHeaderBlockKept", "edit\nfrom: staging\nversion: 2", "edit\nfrom: staging\nversion: 2"},
		{"OnLineWithoutWroteKept", "On second thought\nreject: too risky", "On second thought\nreject: too risky"},
		{"MobileFooter", "approve\n\nSent from my iPhone\n\n> On … wrote:", "approve"},
		{"CRLF", "approve\r\n\r\n> quoted\r\n", "approve"},
		{"LeadingBlankLines", "\n\n  \napprove", "approve"},
		{"OnlyQuote", "> approve", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := StripQuotes(c.in); got != c.want {
				t.Errorf("StripQuotes(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

// FuzzStripQuotes: whatever arrives, the result never holds a quoted line,
// never grows, stays valid UTF-8 when the input was, and is a fixed point.
func FuzzStripQuotes(f *testing.F) {
	for _, name := range []string{"gmail_reply.eml", "outlook_reply.eml", "outlook_original_message.eml", "apple_mail_reply.eml"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("approve\n> x\n-- \nsig")
	f.Add("On a\nb\nwrote:\nc")
	f.Fuzz(func(t *testing.T, s string) {
		out := StripQuotes(s)
		if len(out) > len(s) {
			t.Fatalf("output longer than input: %q → %q", s, out)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimLeft(l, " \t"), ">") {
				t.Fatalf("quoted line survived: %q in %q", l, out)
			}
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out of valid input")
		}
		if again := StripQuotes(out); again != out {
			t.Fatalf("not a fixed point: %q → %q → %q", s, out, again)
		}
	})
}
