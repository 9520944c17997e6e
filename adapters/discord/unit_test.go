package discord

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	discordapi "github.com/bwmarrin/discordgo"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/approvalref"
)

func TestPayloadRoundTripAndForgery(t *testing.T) {
	t.Parallel()
	key := testButtons(t, "token")
	for _, id := range []string{"0196a0b2-7c1e-7d3a-9f00-123456789abc", "ap_1", strings.Repeat("x", 70)} {
		for _, act := range []approvalref.Action{approvalref.Approve, approvalref.Reject, approvalref.Edit} {
			s, err := key.Encode(approvalref.Ref{Action: act, ApprovalID: id})
			if err != nil {
				t.Fatalf("encode %q: %v", id, err)
			}
			if len(s) > MaxCustomID {
				t.Errorf("custom_id %q is %d chars", s, len(s))
			}
			p, err := key.Decode(s)
			if err != nil || p.ApprovalID != id || p.Action != act {
				t.Errorf("round trip %q → %+v, %v", id, p, err)
			}
			if _, err := testButtons(t, "other").Decode(s); !errors.Is(err, approvalref.ErrForged) {
				t.Errorf("other key → %v, want approvalref.ErrForged", err)
			}
			// Swapping the action keeps the tag of the old one: forged.
			swapped := []byte(s)
			i := len(customIDPrefix)
			swapped[i] = byte(map[approvalref.Action]approvalref.Action{approvalref.Approve: approvalref.Reject, approvalref.Reject: approvalref.Edit, approvalref.Edit: approvalref.Approve}[act])
			if _, err := key.Decode(string(swapped)); !errors.Is(err, approvalref.ErrForged) {
				t.Errorf("swapped action → %v, want approvalref.ErrForged", err)
			}
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", 90) + "!", "with space", "a/b"} {
		if _, err := key.Encode(approvalref.Ref{Action: approvalref.Approve, ApprovalID: bad}); err == nil {
			t.Errorf("encode accepted id %q", bad)
		}
	}
}

func TestVerifyWindow(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"type":1}`)
	sign := func(ts string) string { return hex.EncodeToString(ed25519.Sign(priv, append([]byte(ts), body...))) }
	for _, c := range []struct {
		off  time.Duration
		want error
	}{{0, nil}, {-4 * time.Minute, nil}, {4 * time.Minute, nil}, {-6 * time.Minute, ErrStale}, {6 * time.Minute, ErrStale}} {
		ts := strconv.FormatInt(now.Add(c.off).Unix(), 10)
		if err := verify(pub, sign(ts), ts, body, now, 5*time.Minute); !errors.Is(err, c.want) && err != c.want {
			t.Errorf("offset %v → %v, want %v", c.off, err, c.want)
		}
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	if err := verify(pub, sign(ts), ts, append(body, ' '), now, 5*time.Minute); !errors.Is(err, ErrBadSignature) {
		t.Errorf("changed body → %v", err)
	}
}

func TestThreadKeyAndMessageRef(t *testing.T) {
	t.Parallel()
	for _, k := range []threadKey{{"1", "2", "3"}, {dmGuild, "2", "2"}} {
		got, err := parseThreadKey(k.String())
		if err != nil || got != k {
			t.Errorf("round trip %v → %v, %v", k, got, err)
		}
	}
	for _, bad := range []string{"", "1/2", "1/2/3/4", "a/2/3", "1/2/x", "1//3"} {
		if _, err := parseThreadKey(bad); err == nil {
			t.Errorf("parseThreadKey(%q) accepted", bad)
		}
	}
	if c, m, err := parseMessageRef(messageRef("12", "34")); err != nil || c != "12" || m != "34" {
		t.Errorf("message ref round trip: %s %s %v", c, m, err)
	}
}

func bigCard(nArgs, valueLen int) core.Card {
	args := map[string]any{}
	for i := 0; i < nArgs; i++ {
		args[fmt.Sprintf("arg%02d", i)] = strings.Repeat("v", valueLen)
	}
	return core.Card{
		ApprovalID: "0196a0b2-7c1e-7d3a-9f00-123456789abc", Tool: "deploy", Args: core.ArgsFromMap(args),
		Reason: strings.Repeat("because ", 800), Risk: "high_impact", Preview: strings.Repeat("diff ``` line\n", 600),
		Requester: "discord:1", Approvers: []string{"group:sre"}, Quorum: 2, Status: "pending",
		ExpiresAt: time.Unix(1_800_000_000, 0), ConsoleURL: "https://ops.example.test/approvals/x",
	}
}

func TestCardEmbedWithinDiscordLimits(t *testing.T) {
	t.Parallel()
	for _, c := range []core.Card{bigCard(3, 10), bigCard(40, 900), bigCard(0, 0)} {
		e := cardEmbed(c)
		if n := embedSize(e); n > maxEmbedTotal {
			t.Errorf("embed of %d args totals %d > %d", len(c.Args), n, maxEmbedTotal)
		}
		if len(e.Fields) > maxEmbedFields || utf8.RuneCountInString(e.Description) > maxEmbedDesc || utf8.RuneCountInString(e.Title) > maxEmbedTitle {
			t.Errorf("embed out of limits: %d fields, desc %d, title %d", len(e.Fields), len(e.Description), len(e.Title))
		}
		for _, f := range e.Fields {
			if utf8.RuneCountInString(f.Value) > maxFieldValue || utf8.RuneCountInString(f.Name) > maxFieldName || f.Value == "" {
				t.Errorf("field %q out of limits (%d)", f.Name, len(f.Value))
			}
		}
		if strings.Count(e.Description, "```")%2 != 0 {
			t.Errorf("preview code block unbalanced:\n%s", e.Description)
		}
		comps, err := cardComponents(testButtons(t, "k"), c)
		if err != nil || len(comps) != 1 {
			t.Fatalf("components: %v %v", comps, err)
		}
		if row := comps[0].(discordapi.ActionsRow); len(row.Components) != 4 {
			t.Errorf("buttons = %d, want Approve, Reject, Edit, Console", len(row.Components))
		}
	}
	decided := bigCard(2, 5)
	decided.Status = "rejected"
	decided.Outcome = &core.CardOutcome{Status: "rejected", By: []string{"discord:9"}, At: time.Unix(1_800_000_000, 0), Reason: "@everyone no"}
	comps, _ := cardComponents(testButtons(t, "k"), decided)
	if comps == nil || len(comps) != 0 {
		t.Errorf("decided card components = %#v, want an empty list (removes buttons)", comps)
	}
	e := cardEmbed(decided)
	if e.Color != colorRejected || !strings.Contains(e.Description, "Rejected by discord:9") || strings.Contains(e.Description, "@everyone") {
		t.Errorf("decided embed: color %x, desc %q", e.Color, e.Description)
	}
}

func TestEditModalShapes(t *testing.T) {
	t.Parallel()
	small := editModal("cid", bigCard(5, 10))
	if len(small.Components) != 5 || utf8.RuneCountInString(small.Title) > maxModalTitle {
		t.Errorf("5 args → %d inputs, title %q", len(small.Components), small.Title)
	}
	big := editModal("cid", bigCard(6, 10))
	if len(big.Components) != 1 {
		t.Fatalf("6 args → %d inputs, want one JSON paragraph", len(big.Components))
	}
	in := big.Components[0].(discordapi.ActionsRow).Components[0].(discordapi.TextInput)
	if in.CustomID != inputJSON || !strings.Contains(in.Value, `"arg05"`) {
		t.Errorf("JSON input = %+v", in)
	}
	args, err := modalArgs(map[string]string{inputJSON: `{"n": 3, "s": "x", "l": [1.5]}`}, core.Card{})
	if err != nil || args["n"] != int64(3) || args["s"] != "x" {
		t.Errorf("JSON args = %v, %v", args, err)
	}
	for _, bad := range []string{`[1]`, `{`, `{} {}`, `null`} {
		if _, err := modalArgs(map[string]string{inputJSON: bad}, core.Card{}); !errors.Is(err, ErrBadArgs) {
			t.Errorf("modalArgs(%q) = %v, want ErrBadArgs", bad, err)
		}
	}
	// Per-argument inputs keep strings as strings and JSON as JSON.
	c := core.Card{Args: []core.CardArg{{Name: "replicas", Value: "3"}, {Name: "version", Value: "1.2.3"}, {Name: "tag", Value: "7"}}}
	c.Args[2].Value = "7" // shown as 7 — ambiguous; a string "7" and the number look alike
	args, err = modalArgs(map[string]string{inputArg + "replicas": "4", inputArg + "version": "2.0", inputArg + "tag": ""}, c)
	if err != nil || args["replicas"] != float64(4) || args["version"] != "2.0" {
		t.Errorf("per-arg args = %#v, %v", args, err)
	}
	if _, ok := args["tag"]; ok {
		t.Error("a cleared input was sent instead of left to the schema default")
	}
}

func TestMessageText(t *testing.T) {
	t.Parallel()
	bot := "100"
	msg := func(guild, content string, mentions ...string) *discordapi.Message {
		m := &discordapi.Message{ID: "1", ChannelID: "2", GuildID: guild, Content: content, Author: &discordapi.User{ID: "5"}}
		for _, id := range mentions {
			m.Mentions = append(m.Mentions, &discordapi.User{ID: id})
		}
		return m
	}
	cases := []struct {
		m    *discordapi.Message
		want string
		ok   bool
	}{
		{msg("9", "<@100> deploy api 1"), "deploy api 1", true},
		{msg("9", "deploy <@!100>  api"), "deploy api", true},
		{msg("9", "<@200> deploy", "200"), "", false},
		{msg("9", "deploy api"), "", false},
		{msg("", "deploy api"), "deploy api", true},
		{msg("9", "<@100>"), "", false},
		{msg("9", "<@100> ping <@200>", "100", "200"), "ping <@200>", true},
	}
	for _, c := range cases {
		got, ok := messageText(c.m, bot)
		if got != c.want || ok != c.ok {
			t.Errorf("messageText(%q) = %q, %v; want %q, %v", c.m.Content, got, ok, c.want, c.ok)
		}
	}
	if _, ok := messageText(&discordapi.Message{Content: "<@100> x", Author: &discordapi.User{ID: "5", Bot: true}}, bot); ok {
		t.Error("a bot's message was accepted")
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
