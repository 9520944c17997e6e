package discord

import (
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	discordapi "github.com/bwmarrin/discordgo"

	"github.com/opsgate/opsgate/core"
)

// seeds are the replayed payload shapes under testdata/.
func seeds(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata: %v (%d files)", err, len(files))
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

func TestReplayedPayloadsParse(t *testing.T) {
	t.Parallel()
	s := seeds(t)
	want := map[string]discordapi.InteractionType{
		"ping.json": discordapi.InteractionPing, "slash_ops.json": discordapi.InteractionApplicationCommand,
		"button.json": discordapi.InteractionMessageComponent, "modal.json": discordapi.InteractionModalSubmit,
	}
	for name, typ := range want {
		in, err := parseInteraction(s[name])
		if err != nil || in.Type != typ {
			t.Errorf("%s: %v (type %v)", name, err, in)
			continue
		}
		if typ == discordapi.InteractionPing {
			continue
		}
		if in.actor().ID == "" || in.here().Thread == "" {
			t.Errorf("%s: actor %q thread %+v", name, in.actor().ID, in.here())
		}
	}
	a := &Adapter{cfg: Config{Command: "ops"}}
	in, _ := parseInteraction(s["slash_ops.json"])
	if text, ok := a.commandText(in.ApplicationCommandData()); !ok || text != "deploy api 1.2.3" {
		t.Errorf("slash_ops text = %q", text)
	}
	btn, _ := parseInteraction(s["button.json"])
	if k := btn.here(); k.Channel != "400000000000000004" || k.Thread != "900000000000000001" {
		t.Errorf("button in a thread → key %+v, want parent channel and thread", k)
	}
	md, _ := parseInteraction(s["modal.json"])
	if v := modalValues(md.ModalSubmitData()); v[inputReason] != "not during the freeze" {
		t.Errorf("modal values = %v", v)
	}
	var m discordapi.Message
	if err := json.Unmarshal(s["message_create.json"], &m); err != nil {
		t.Fatal(err)
	}
	if text, ok := messageText(&m, "100000000000000001"); !ok || text != "deploy api 1.2.3" {
		t.Errorf("message_create text = %q, %v", text, ok)
	}
}

func FuzzParseInteraction(f *testing.F) {
	for _, b := range seeds(f) {
		f.Add(b)
	}
	f.Add([]byte(`{"id":"1","type":2,"data":null}`))
	f.Add([]byte(`{"id":"1","type":5,"token":"t","channel_id":"2","user":{"id":"3"},"data":{"custom_id":"x","components":[{"type":1,"components":[{"type":4}]}]}}`))
	a := &Adapter{cfg: Config{Command: "ops", Flows: []FlowCommand{{Name: "deploy", Literals: []string{"deploy"}, Options: []FlowOption{{Name: "service"}, {Name: "env", Optional: true}}}}}}
	buttons := testButtons(f, "k")
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := parseInteraction(b)
		if err != nil {
			return
		}
		if in.Type == discordapi.InteractionPing {
			return
		}
		// Whatever parsed must be safe to use everywhere the handlers do.
		_ = in.actor()
		k := in.here()
		if _, err := parseThreadKey(k.String()); err != nil {
			t.Fatalf("parsed interaction gives an unusable thread key %q: %v", k.String(), err)
		}
		switch d := in.Data.(type) {
		case discordapi.ApplicationCommandInteractionData:
			a.commandText(d)
		case discordapi.ModalSubmitInteractionData:
			modalArgs(modalValues(d), core.Card{})
		case discordapi.MessageComponentInteractionData:
			buttons.Decode(d.CustomID)
		}
	})
}

func FuzzParseThreadKey(f *testing.F) {
	f.Add("1/2/3")
	f.Add("@me/2/2")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := parseThreadKey(s)
		if err == nil && k.String() != s {
			t.Fatalf("parseThreadKey(%q) = %+v, which prints %q", s, k, k.String())
		}
		c, m, err := parseMessageRef(s)
		if err == nil && messageRef(c, m) != s {
			t.Fatalf("parseMessageRef(%q) round trip failed", s)
		}
	})
}

func FuzzMessageText(f *testing.F) {
	f.Add("<@100> deploy api 1", "9", true)
	f.Add("deploy <@!100>", "", false)
	f.Fuzz(func(t *testing.T, content, guild string, mention bool) {
		m := &discordapi.Message{ID: "1", ChannelID: "2", GuildID: guild, Content: content, Author: &discordapi.User{ID: "5"}}
		if mention {
			m.Mentions = []*discordapi.User{{ID: "100"}}
		}
		text, ok := messageText(m, "100")
		if ok && (text == "" || mentionRE.MatchString(text) && mentionRE.FindStringSubmatch(text)[1] == "100") {
			t.Fatalf("messageText(%q) = %q still addresses the bot", content, text)
		}
	})
}

func FuzzVerify(f *testing.F) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	f.Add([]byte(`{"type":1}`), "1800000000", "00")
	f.Fuzz(func(t *testing.T, body []byte, ts, sig string) {
		now := time.Unix(1_800_000_000, 0)
		if verify(pub, sig, ts, body, now, 5*time.Minute) == nil {
			// Only a real signature verifies; the fuzzer cannot forge one.
			t.Fatalf("verify accepted a fuzzed signature %q", sig)
		}
		_ = priv
	})
}

func FuzzModalArgs(f *testing.F) {
	f.Add(`{"service":"api","n":1}`, "3", "4")
	f.Fuzz(func(t *testing.T, js, shown, typed string) {
		if args, err := modalArgs(map[string]string{inputJSON: js}, core.Card{}); err == nil && args == nil {
			t.Fatal("nil args without an error")
		}
		c := core.Card{Args: []core.CardArg{{Name: "x", Value: shown}}}
		args, err := modalArgs(map[string]string{inputArg + "x": typed}, c)
		if err == nil {
			if _, err := json.Marshal(args); err != nil {
				t.Fatalf("args %v do not marshal: %v", args, err)
			}
		}
	})
}
