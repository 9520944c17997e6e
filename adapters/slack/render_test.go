package slack

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	slackapi "github.com/slack-go/slack"

	"github.com/opsgate/opsgate/core"
)

func testCard() core.Card {
	return core.Card{
		ApprovalID: "ap-1", RunID: "run-1", Tool: "deploy",
		Args:   []core.CardArg{{Name: "env", Value: "staging"}, {Name: "service", Value: "api"}, {Name: "version", Value: "1.2.3"}},
		Reason: "deploy api 1.2.3", Risk: "high_impact", Preview: "would deploy api 1.2.3 to staging",
		Requester: requester, Approvers: []string{"group:sre"}, Eligible: []string{approver}, Quorum: 1,
		ExpiresAt: time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC), Status: "pending",
		ConsoleURL: "https://ops.example.test/approvals/ap-1",
	}
}

func testAdapter(t *testing.T) *Adapter {
	t.Helper()
	a, err := New(Config{BotToken: "xoxb-1", SigningSecret: testSecret}, Deps{Sink: nopSink{}, Cards: nopCards{}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// checkLimits fails t when blocks break a Block Kit limit opsgate keeps.
func checkLimits(t *testing.T, blocks []slackapi.Block) string {
	t.Helper()
	raw, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) > maxBlocks {
		t.Errorf("%d blocks", len(blocks))
	}
	if len(raw) > blocksBudget {
		t.Errorf("blocks are %d characters, budget %d", len(raw), blocksBudget)
	}
	var generic []map[string]any
	_ = json.Unmarshal(raw, &generic)
	for i, b := range generic {
		if txt, ok := b["text"].(map[string]any); ok && b["type"] == "section" {
			if n := utf8.RuneCountInString(txt["text"].(string)); n > sectionTextMax {
				t.Errorf("block %d: section text %d characters", i, n)
			}
		}
	}
	return strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(raw))
}

func TestRenderCard(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	huge := strings.Repeat("line of dry-run output & <stuff>\n", 2000)
	manyArgs := make([]core.CardArg, 300)
	for i := range manyArgs {
		manyArgs[i] = core.CardArg{Name: fmt.Sprintf("arg%03d", i), Value: strings.Repeat("v", 100)}
	}
	cases := []struct {
		name  string
		edit  func(*core.Card)
		check func(t *testing.T, raw string, blocks []slackapi.Block)
	}{
		{"PendingHasButtonsWithSignedValues", func(*core.Card) {}, func(t *testing.T, raw string, blocks []slackapi.Block) {
			ab, ok := blocks[len(blocks)-2].(*slackapi.ActionBlock)
			if !ok || len(ab.Elements.ElementSet) != 3 {
				t.Fatalf("no Approve/Reject/Edit actions block: %s", raw)
			}
			for _, el := range ab.Elements.ElementSet {
				b := el.(*slackapi.ButtonBlockElement)
				id, err := a.sign.parseButtonValue(b.ActionID, b.Value)
				if err != nil || id != "ap-1" {
					t.Errorf("button %s value %q: %v", b.ActionID, b.Value, err)
				}
				if strings.Contains(b.Value, "deploy") || strings.Contains(b.Value, "api") {
					t.Errorf("button value carries state: %q", b.Value)
				}
			}
			for _, want := range []string{"Approval needed: deploy", "high_impact", "<@UREQ>", "group:sre", "<!date^", "would deploy api", "https://ops.example.test/approvals/ap-1", "`1.2.3`"} {
				if !strings.Contains(raw, want) {
					t.Errorf("card lacks %q", want)
				}
			}
		}},
		{"DecidedHasOutcomeAndNoButtons", func(c *core.Card) {
			c.Status = "approved"
			c.Outcome = &core.CardOutcome{Status: "approved", By: []string{approver}, At: time.Date(2026, 1, 2, 14, 2, 0, 0, time.UTC)}
		}, func(t *testing.T, raw string, _ []slackapi.Block) {
			if strings.Contains(raw, "opsgate:approve") || !strings.Contains(raw, "Approved* by <@UAPP> at <!date^1767362520^") || !strings.Contains(raw, "2026-01-02 14:02 UTC") {
				t.Errorf("decided card: %s", raw)
			}
		}},
		{"ExpiredSaysSo", func(c *core.Card) {
			c.Status = "expired"
			c.Outcome = &core.CardOutcome{Status: "expired", At: time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)}
		}, func(t *testing.T, raw string, _ []slackapi.Block) {
			if strings.Contains(raw, "opsgate:approve") || !strings.Contains(raw, "*Expired* at") {
				t.Errorf("expired card: %s", raw)
			}
		}},
		{"HugePreviewTrimmedWithNoteAndLink", func(c *core.Card) { c.Preview = huge }, func(t *testing.T, raw string, _ []slackapi.Block) {
			if !strings.Contains(raw, "Preview trimmed") || !strings.Contains(raw, "Full preview in the console") {
				t.Errorf("no trim note: %.500s", raw)
			}
			if !strings.Contains(raw, "opsgate:approve") {
				t.Errorf("buttons lost to the preview")
			}
		}},
		{"ManyLongArgsFolded", func(c *core.Card) { c.Args = manyArgs; c.Preview = huge }, func(t *testing.T, raw string, _ []slackapi.Block) {
			if !strings.Contains(raw, "more arguments; see the console") || !strings.Contains(raw, "opsgate:approve") {
				t.Errorf("args not cut with a note, or buttons lost")
			}
		}},
		{"LongValueFolded", func(c *core.Card) { c.Args = []core.CardArg{{Name: "script", Value: strings.Repeat("x", 5000)}} }, func(t *testing.T, raw string, _ []slackapi.Block) {
			if !strings.Contains(raw, "(4700 more characters)") {
				t.Errorf("long value not folded")
			}
		}},
		{"HostileTextInert", func(c *core.Card) {
			c.Reason = "<!channel> <@U999> <https://evil.example|click> ```"
			c.Args = []core.CardArg{{Name: "x", Value: "<!here>"}}
			c.Preview = "```\n<!everyone>\n```"
			c.Tool = "de`ploy"
		}, func(t *testing.T, raw string, _ []slackapi.Block) {
			for _, bad := range []string{"<!channel>", "<!here>", "<!everyone>", "<@U999>", "<https://evil"} {
				if strings.Contains(raw, bad) {
					t.Errorf("live markup %s in %s", bad, raw)
				}
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			card := testCard()
			c.edit(&card)
			blocks, text := a.renderCard(card)
			if text == "" {
				t.Error("no notification text")
			}
			c.check(t, checkLimits(t, blocks), blocks)
		})
	}
}

func TestModals(t *testing.T) {
	t.Parallel()
	card := testCard()
	v, err := buildModal(callbackEdit, card, "meta")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(v)
	for _, want := range []string{`"block_id":"arg:service"`, `"initial_value":"api"`, `"callback_id":"opsgate:edit"`, `"private_metadata":"meta"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("edit modal lacks %s", want)
		}
	}
	if n := utf8.RuneCountInString(v.Title.Text); n > 24 {
		t.Errorf("title %q longer than 24", v.Title.Text)
	}
	card.Args = append(card.Args, core.CardArg{Name: "labels", Value: `{"team":"sre"}`})
	v, _ = buildModal(callbackEdit, card, "meta")
	raw, _ = json.Marshal(v)
	if !strings.Contains(string(raw), `"block_id":"args_json"`) || strings.Contains(string(raw), `"block_id":"arg:`) {
		t.Errorf("structured args should use one JSON field: %s", raw)
	}
	args, _, err := argsFromModal(map[string]string{blockArgsJSON: `{"labels":{"team":"ops"},"service":"api"}`})
	if err != nil || args["labels"].(map[string]any)["team"] != "ops" {
		t.Errorf("json args = %v, %v", args, err)
	}
	if _, block, err := argsFromModal(map[string]string{blockArgsJSON: `[1]`}); err == nil || block != blockArgsJSON {
		t.Errorf("non-object JSON accepted")
	}
	v, _ = buildModal(callbackReject, testCard(), "meta")
	raw, _ = json.Marshal(v)
	if !strings.Contains(string(raw), `"block_id":"reason"`) || v.Title.Text != "Reject" {
		t.Errorf("reject modal: %s", raw)
	}
}

func TestCleanText(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"<@UBOT> deploy api 1.2.3":                                        "deploy api 1.2.3",
		"<@UBOT>   deploy <http://api.example.com|api.example.com> 1.2.3": "deploy api.example.com 1.2.3",
		"deploy a &lt;b&gt; &amp; c":                                      "deploy a <b> & c",
		"ask <@U123> in <#C9|ops> <!here>":                                "ask @U123 in #ops @here",
		"<@UBOT> line one\n  line two":                                    "line one\nline two",
	}
	for in, want := range cases {
		if got := cleanText(in, "UBOT"); got != want {
			t.Errorf("cleanText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestButtonAndModalRefs(t *testing.T) {
	t.Parallel()
	s := newSigner("secret")
	v := s.buttonValue(actionApprove, "ap.with.dots")
	if id, err := s.parseButtonValue(actionApprove, v); err != nil || id != "ap.with.dots" {
		t.Fatalf("round trip: %q %v", id, err)
	}
	for _, bad := range []string{"", ".", "ap-1.", v + "x", strings.Replace(v, "ap", "aq", 1)} {
		if _, err := s.parseButtonValue(actionApprove, bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if _, err := newSigner("other").parseButtonValue(actionApprove, v); err == nil {
		t.Error("accepted a value signed with another secret")
	}
	ref := modalRef{Callback: callbackEdit, ApprovalID: "ap-1", Thread: threadKey{"T1", "C1", "1.2"}}
	m := s.encodeModalRef(ref)
	if got, err := s.parseModalRef(callbackEdit, m); err != nil || got != ref {
		t.Fatalf("modal ref: %+v %v", got, err)
	}
	if _, err := s.parseModalRef(callbackReject, m); err == nil {
		t.Error("edit metadata accepted for the reject modal")
	}
	if _, err := s.parseModalRef(callbackEdit, strings.Replace(m, "C1", "C2", 1)); err == nil {
		t.Error("altered thread accepted")
	}
}
