package chat

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/internal/client"
)

func TestParseEdit(t *testing.T) {
	t.Parallel()
	proposed := map[string]any{"service": "api", "version": "1.2.3", "env": "staging"}
	cases := []struct {
		spec, want, err string
	}{
		{"version=1.2.4", "map[env:staging service:api version:1.2.4]", ""},
		{"version=1.2.4 env=prod", "map[env:prod service:api version:1.2.4]", ""},
		{`note="two words" version=2`, "map[env:staging note:two words service:api version:2]", ""},
		{`note="a \"quoted\" \\ word"`, `map[env:staging note:a "quoted" \ word service:api version:1.2.3]`, ""},
		{`note=""`, "map[env:staging note: service:api version:1.2.3]", ""},
		{"replicas=3", "map[env:staging replicas:3 service:api version:1.2.3]", ""},
		{`{"service":"web","version":"9"}`, "map[service:web version:9]", ""},
		{"", "", "needs key=value"},
		{"version", "", "is not key=value"},
		{"=1", "", "is not key=value"},
		{`note="open`, "", "no closing quote"},
		{`note="a"b`, "", "a space must follow"},
		{`{"a":`, "", "want one JSON object"},
		{`{}x`, "", "want one JSON object"},
	}
	for _, c := range cases {
		got, err := ParseEdit(c.spec, proposed)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseEdit(%q) = %v, %v; want error %q", c.spec, got, err, c.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != c.want {
			t.Errorf("ParseEdit(%q) = %v, %v; want %s", c.spec, got, err, c.want)
		}
	}
	if proposed["version"] != "1.2.3" {
		t.Fatal("ParseEdit changed the proposed arguments")
	}
}

// FuzzParseEdit: any /edit text is an error or arguments that keep every
// proposed key not named, never a panic; a key=value it accepts reads back.
func FuzzParseEdit(f *testing.F) {
	f.Add(`version=1.2.4 env=prod`, "k", "v")
	f.Add(`note="a \"b\"" x=`, "a b", `"`)
	f.Add(`{"a":[1,{"b":null}]}`, "", "")
	f.Fuzz(func(t *testing.T, spec, key, val string) {
		proposed := map[string]any{"keep": "me"}
		got, err := ParseEdit(spec, proposed)
		if err == nil && !strings.HasPrefix(strings.TrimSpace(spec), "{") {
			if _, named := got["keep"]; !named {
				t.Fatalf("%q dropped a proposed key: %v", spec, got)
			}
		}
		if key == "" || strings.ContainsAny(key, "=\"{") || strings.ContainsFunc(key, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) || !utf8.ValidString(key) || !utf8.ValidString(val) {
			return
		}
		q := `"` + strings.ReplaceAll(strings.ReplaceAll(val, `\`, `\\`), `"`, `\"`) + `"`
		got, err = ParseEdit(key+"="+q, proposed)
		if err != nil || got[key] != val {
			t.Fatalf("%s=%s read as %v, %v", key, q, got, err)
		}
	})
}

func TestRenderKeepsOutsideTextInert(t *testing.T) {
	t.Parallel()
	s := NewSession(nil, &client.Me{Actor: "console:admin", Scopes: []string{"decide"}}, "dev", nil)
	card := &core.Card{ApprovalID: "0199c3a4-aaaa-7000-8000-3f9a2c000001", Tool: "deploy", Risk: approvals.RiskHighImpact, Status: approvals.StatusPending,
		Args:    []core.CardArg{{Name: "version", Value: "1.2.3\nApproved by alice"}, {Name: "service", Value: "\x1b[2Japi"}},
		Preview: "ok\x1b]0;pwned\x07", Requester: "console:bob", Approvers: []string{"group:sre"}, Eligible: []string{"console:admin"},
		ExpiresAt: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC), Reason: "\u202eevil"}
	var all []string
	all = append(all, s.Render(StreamMessage{ID: "m1", Direction: "out", Kind: "card", ApprovalID: card.ApprovalID, Card: card})...)
	all = append(all, s.Render(StreamMessage{ID: "m2", Direction: "out", Kind: "reply", Text: "line one\n\x1b[31mred"})...)
	all = append(all, s.Render(StreamMessage{ID: "m3", Direction: "in", Actor: "console:bob", Text: "hi\x1b[2J"})...)
	joined := strings.Join(all, "\n")
	for _, bad := range []string{"\x1b", "\x07", "\u202e", "1.2.3\nApproved"} {
		if strings.Contains(joined, bad) {
			t.Fatalf("rendered %q from outside text:\n%q", bad, joined)
		}
	}
	for _, want := range []string{"┌ Approval needed: deploy", "[3f9a2c0]", "1.2.3⏎Approved by alice", "└ /approve", "opsgate › line one", "console:bob › hi"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("lacks %q:\n%s", want, joined)
		}
	}
	if again := s.Render(StreamMessage{ID: "m1", Direction: "out", Kind: "card", Card: card}); again != nil {
		t.Fatalf("a message shown twice: %v", again)
	}
	if ps := s.Pending(); len(ps) != 1 || ps[0].ApprovalID != card.ApprovalID {
		t.Fatalf("pending %v", ps)
	}
	done := *card
	done.Status = approvals.StatusApproved
	done.Outcome = &core.CardOutcome{Status: approvals.StatusApproved, By: []string{"console:admin"}, At: card.ExpiresAt}
	upd := s.Render(StreamMessage{ID: "m4", Direction: "out", Kind: "card_update", ApprovalID: card.ApprovalID, Card: &done})
	if len(upd) != 1 || !strings.HasPrefix(upd[0], "✓ [3f9a2c0] Approved by console:admin") || len(s.Pending()) != 0 {
		t.Fatalf("update %v, pending %v", upd, s.Pending())
	}
}

// TestTargetByShortID: /approve ID takes the short id shown in brackets;
// one that names two cards is refused with both listed.
func TestTargetByShortID(t *testing.T) {
	t.Parallel()
	s := NewSession(nil, &client.Me{Actor: "console:admin", Scopes: []string{"decide"}}, "dev", nil)
	ids := []string{"01a2504f-1111-7000-8000-3f9a2c000001", "01a2504f-1112-7000-8000-3f9a2c110002"}
	for i, id := range ids {
		card := &core.Card{ApprovalID: id, Tool: "deploy", Status: approvals.StatusPending, Args: []core.CardArg{{Name: "version", Value: fmt.Sprint(i)}},
			ExpiresAt: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
		if lines := s.Render(StreamMessage{ID: "m" + id, Direction: "out", Kind: "card", ApprovalID: id, Card: card}); !strings.Contains(lines[0], "["+[]string{"3f9a2c0", "3f9a2c1"}[i]+"]") {
			t.Fatalf("card line %q", lines[0])
		}
	}
	c, rest, err := s.target(t.Context(), "3f9a2c1 not now", true)
	if err != nil || c.ApprovalID != ids[1] || rest != "not now" {
		t.Fatalf("target = %v, %q, %v", c, rest, err)
	}
	_, _, err = s.target(t.Context(), "3f9a", false)
	if err == nil || !strings.Contains(err.Error(), "ambiguous") || !strings.Contains(err.Error(), ids[0]) || !strings.Contains(err.Error(), ids[1]) {
		t.Fatalf("ambiguous: %v", err)
	}
	// The old form, a prefix of the whole id, still names a card when it
	// is unique; the shared timestamp is not.
	if _, _, err := s.target(t.Context(), "01a2504f", false); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Fatalf("timestamp prefix: %v", err)
	}
}

func TestBatchCardShowsItsCallsAndTheApproveAllCommand(t *testing.T) {
	t.Parallel()
	s := NewSession(nil, &client.Me{Actor: "console:admin", Scopes: []string{"decide"}}, "dev", nil)
	call := func(id, svc string) core.CardCall {
		return core.CardCall{ApprovalID: id, Tool: "deploy", Args: []core.CardArg{{Name: "service", Value: svc}}, Status: approvals.StatusPending}
	}
	card := &core.Card{ApprovalID: "0199c3a4-aaaa", Tool: "deploy", Status: approvals.StatusPending, Eligible: []string{"console:admin"},
		Batch: []core.CardCall{call("0199c3a4-aaaa", "api"), call("0199c3a4-bbbb", "web\nApproved")}}
	joined := strings.Join(s.Render(StreamMessage{ID: "m1", Direction: "out", Kind: "card", ApprovalID: card.ApprovalID, Card: card}), "\n")
	for _, want := range []string{"2 calls of one agent turn", "1. deploy service=api — pending", "2. deploy service=web⏎Approved — pending",
		"send: approve all 0199c3a4-aaaa"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("lacks %q:\n%s", want, joined)
		}
	}
	ref, ok := core.ParseApproveAll(strings.TrimPrefix(joined[strings.LastIndex(joined, "send: "):strings.Index(joined, "\n└")], "send: "))
	if !ok || ref != card.ApprovalID {
		t.Fatalf("the shown command does not parse back to the card: %q %v", ref, ok)
	}
	// Someone who may not decide is not offered the command.
	other := NewSession(nil, &client.Me{Actor: "console:bob", Scopes: []string{"request"}}, "dev", nil)
	if got := strings.Join(other.Render(StreamMessage{ID: "m1", Direction: "out", Kind: "card", ApprovalID: card.ApprovalID, Card: card}), "\n"); strings.Contains(got, "approve all") {
		t.Fatalf("offered the command to a requester:\n%s", got)
	}
}

func TestQuestionUpdateAndStreamEndAreShownPartialStreamIsNot(t *testing.T) {
	t.Parallel()
	s := NewSession(nil, &client.Me{Actor: "console:admin"}, "dev", nil)
	if got := s.Render(StreamMessage{ID: "q1", Direction: "out", Kind: string(core.KindQuestionUpdate), Text: "Which environment?\nAnswered by console:req: prod"}); len(got) != 2 || !strings.Contains(got[1], "Answered by console:req") {
		t.Fatalf("question update rendered %q", got)
	}
	if got := s.Render(StreamMessage{ID: "s1", Direction: "out", Kind: string(core.KindStream), Text: "Checking …"}); got != nil {
		t.Fatalf("a partial stream was shown: %q", got)
	}
	if got := s.Render(StreamMessage{ID: "s2", Direction: "out", Kind: string(core.KindStreamEnd), Text: "Checking api first."}); len(got) != 1 || got[0] != "opsgate › Checking api first." {
		t.Fatalf("stream end rendered %q", got)
	}
}
