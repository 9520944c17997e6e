package telegram

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/approvalref"
)

func TestParseReplayedUpdates(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		key, text string
		ok        bool
	}{
		"group_command_topic.json": {"-1001234567890/5/4217", "deploy api 1.2.3", true},
		"private_text.json":        {"42/0/0", "deploy api 1.2.3", true}, // a private chat is one conversation
		// A reply chain in an ordinary group carries message_thread_id,
		// which must not be sent back: it is not a forum topic.
		"group_reply_thread.json":  {"-4001/0/90", "status api", true},
		"group_mention_topic.json": {"-1001234567890/5/4231", "check api", true},
		// A reply to the bot addresses it without a mention: handleMessage
		// takes it (and the engine continues the bot message's thread).
		"reply_to_bot.json": {"-1001234567890/5/4230", "", false},
	}
	for file, want := range cases {
		raw, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		u, err := parseUpdate(raw)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if got := keyOf(u.Message).String(); got != want.key {
			t.Errorf("%s: key %q, want %q", file, got, want.key)
		}
		text, ok := commandText(u.Message, "opsbot")
		if ok != want.ok || text != want.text {
			t.Errorf("%s: text %q ok %v, want %q %v", file, text, ok, want.text, want.ok)
		}
	}
	raw, _ := os.ReadFile(filepath.Join("testdata", "callback_query.json"))
	u, err := parseUpdate(raw)
	if err != nil || u.CallbackQuery == nil || u.CallbackQuery.Message == nil {
		t.Fatalf("callback: %v %+v", err, u)
	}
	if k := keyOf(u.CallbackQuery.Message); k.Topic != 5 || k.Msg != 4218 {
		t.Errorf("callback key %+v", k)
	}
	raw, _ = os.ReadFile(filepath.Join("testdata", "edited_message.json"))
	if u, err := parseUpdate(raw); err != nil || u.Message != nil || u.CallbackQuery != nil {
		t.Errorf("edited_message should parse to nothing to handle: %v %+v", err, u)
	}
}

func TestCommandText(t *testing.T) {
	t.Parallel()
	priv := tgChat{ID: 7, Type: "private"}
	grp := tgChat{ID: -5, Type: "supergroup"}
	for _, c := range []struct {
		chat tgChat
		in   string
		want string
		ok   bool
	}{
		{priv, "/ops deploy api 1.2.3", "deploy api 1.2.3", true},
		{grp, "/ops@OpsBot deploy api 1.2.3", "deploy api 1.2.3", true},
		{grp, "/deploy@opsbot api 1.2.3", "deploy api 1.2.3", true},
		{grp, "/deploy api 1.2.3", "deploy api 1.2.3", true},
		{grp, "/deploy@otherbot api 1.2.3", "", false},
		{grp, "/ops", "help", true},
		{grp, "/ops\ndeploy api 1", "deploy api 1", true},
		{grp, "deploy api 1.2.3", "", false},
		{grp, "@opsbot deploy api", "deploy api", true},
		{grp, "@opsbot, deploy api", "deploy api", true},
		{grp, "@opsbotter deploy api", "", false},
		{priv, "deploy api 1.2.3", "deploy api 1.2.3", true},
		{priv, "   ", "", false},
		{priv, "/", "", false},
		{priv, "/@opsbot", "", false},
	} {
		got, ok := commandText(&tgMessage{Chat: c.chat, Text: c.in}, "opsbot")
		if got != c.want || ok != c.ok {
			t.Errorf("%s %q → %q %v, want %q %v", c.chat.Type, c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestPayloadRoundTripAndForgery(t *testing.T) {
	t.Parallel()
	key := testButtons(t, testToken)
	for _, id := range []string{"0b9a4a52-9b8e-4f7e-9d0c-3c1f5f7e2a11", "ap-1", strings.Repeat("x", 40)} {
		for _, act := range []approvalref.Action{approvalref.Approve, approvalref.Reject, approvalref.Edit} {
			s, err := key.Encode(approvalref.Ref{Action: act, ApprovalID: id})
			if err != nil {
				t.Fatalf("%s %c: %v", id, act, err)
			}
			if len(s) > MaxCallbackData {
				t.Errorf("%d bytes", len(s))
			}
			p, err := key.Decode(s)
			if err != nil || p.ApprovalID != id || p.Action != act {
				t.Errorf("round trip %s %c → %+v %v", id, act, p, err)
			}
			if _, err := testButtons(t, testToken+"x").Decode(s); err != approvalref.ErrForged {
				t.Errorf("another key: %v, want forged", err)
			}
		}
	}
	if _, err := key.Encode(approvalref.Ref{Action: approvalref.Approve, ApprovalID: strings.Repeat("x", 60)}); err == nil {
		t.Error("an id too long for 64 bytes was encoded")
	}
	if _, err := key.Encode(approvalref.Ref{Action: approvalref.Approve, ApprovalID: "has space"}); err == nil {
		t.Error("an unsafe id was encoded")
	}
	s, _ := key.Encode(approvalref.Ref{Action: approvalref.Approve, ApprovalID: "ap-1"})
	if _, err := key.Decode("r" + s[1:]); err != approvalref.ErrForged {
		t.Errorf("changed action: %v", err)
	}
	if _, err := key.Decode("hello"); err != approvalref.ErrMalformed {
		t.Errorf("foreign data: %v", err)
	}
}

func TestCardHTMLFitsAndIsComplete(t *testing.T) {
	t.Parallel()
	c := pendingCard()
	c.Preview = strings.Repeat("line of dry-run output with <tags> & 漢字 🚀\n", 400)
	c.Args = append(c.Args, core.CardArg{Name: "notes", Value: strings.Repeat("n", 5000)})
	h := cardHTML(c)
	if n := visibleLen(h); n > MaxText {
		t.Fatalf("card is %d units", n)
	}
	if !utf8.ValidString(h) {
		t.Fatal("card is not valid UTF-8")
	}
	for _, want := range []string{"deploy", "service", "high_impact", "telegram:7", "group:sre", "2030-01-02 03:04 UTC", "<pre>", "&lt;tags&gt;", "truncated", "https://ops.example.test/approvals/x", c.ApprovalID} {
		if !strings.Contains(h, want) {
			t.Errorf("card lacks %q", want)
		}
	}
	if strings.Contains(h, "<tags>") {
		t.Error("preview markup not escaped")
	}
}

func TestParseArgs(t *testing.T) {
	t.Parallel()
	m, err := parseArgs("service = web\nversion=2.0.0\n\nenv=prod=eu")
	if err != nil || m["service"] != "web" || m["version"] != "2.0.0" || m["env"] != "prod=eu" {
		t.Errorf("key=value: %v %v", m, err)
	}
	m, err = parseArgs(`{"service":"web","replicas":3}`)
	if err != nil || m["service"] != "web" || m["replicas"] == nil {
		t.Errorf("json: %v %v", m, err)
	}
	for _, bad := range []string{"", "just words", "=x", `{"a":1} trailing`, `{"a":`, "a=1\na=2"} {
		if _, err := parseArgs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestThreadKeysAndBuckets(t *testing.T) {
	t.Parallel()
	ad, _, _ := newSender(t)
	b := ad.Buckets(core.Thread{Channel: ChannelName, Key: "-100200/5/77"})
	if b.Conversation != "-100200" || b.Group != "-100200" {
		t.Errorf("group buckets %+v", b)
	}
	b = ad.Buckets(core.Thread{Channel: ChannelName, Key: "42/0/9"})
	if b.Conversation != "42" || b.Group != "" {
		t.Errorf("private buckets %+v", b)
	}
	for _, bad := range []string{"", "a/b/c", "0/0/0", "1/2", "1/-2/3"} {
		if _, err := parseThreadKey(bad); err == nil {
			t.Errorf("thread key %q accepted", bad)
		}
	}
	if k, err := parseThreadKey("-5"); err != nil || k.Chat != -5 {
		t.Errorf("bare chat: %+v %v", k, err)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	deps := Deps{Sink: nopSink{}, Cards: nopCards{}}
	for name, c := range map[string]Config{
		"NoToken":       {Mode: ModePolling},
		"BadToken":      {BotToken: "nope", Mode: ModePolling},
		"WebhookSecret": {BotToken: testToken, PublicURL: "https://x.example"},
		"PublicURL":     {BotToken: testToken, WebhookSecret: testSecret},
		"Mode":          {BotToken: testToken, Mode: "push"},
		"APIURL":        {BotToken: testToken, Mode: ModePolling, APIURL: "::"},
	} {
		if _, err := New(c, deps); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(Config{BotToken: testToken, Mode: ModePolling}, Deps{}); err == nil {
		t.Error("missing deps accepted")
	}
	if _, err := New(Config{BotToken: testToken, WebhookSecret: testSecret, PublicURL: "https://x.example"}, deps); err != nil {
		t.Errorf("valid webhook config: %v", err)
	}
}

// testButtons is the adapter's button codec under token.
func testButtons(t testing.TB, token string) *approvalref.Codec {
	t.Helper()
	c, err := newButtons(token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
