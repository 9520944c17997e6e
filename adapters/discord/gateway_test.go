package discord

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	discordapi "github.com/bwmarrin/discordgo"

	"github.com/opsgate/opsgate/adapters/discord/internal/fakediscord"
	"github.com/opsgate/opsgate/core"
)

func TestGatewayMentionStartsRunInThread(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{gateway: true})
	e.run()
	e.h.Eventually("the Gateway identify", e.fake.Ready)
	e.h.Eventually("READY handled", func() bool { return e.ad.getBotID() == fakediscord.BotID })

	ids := e.fake.Identifies()
	var ident struct {
		Token   string `json:"token"`
		Intents int    `json:"intents"`
	}
	if err := json.Unmarshal(ids[0], &ident); err != nil {
		t.Fatal(err)
	}
	if ident.Intents&(1<<15) != 0 {
		t.Errorf("identify intents %b ask for MESSAGE_CONTENT without configuration", ident.Intents)
	}
	if ident.Intents&(1<<9) == 0 || ident.Intents&(1<<12) == 0 {
		t.Errorf("identify intents %b lack guild or DM messages", ident.Intents)
	}

	msgID := e.id()
	mention := map[string]any{
		"id": msgID, "channel_id": channelID, "guild_id": guildID, "type": 0,
		"content":  "<@" + fakediscord.BotID + "> deploy api 1.2.3",
		"author":   map[string]any{"id": requester, "username": "req"},
		"mentions": []map[string]any{{"id": fakediscord.BotID, "username": "opsgate", "bot": true}},
	}
	if err := e.fake.Dispatch("MESSAGE_CREATE", mention); err != nil {
		t.Fatal(err)
	}
	// The thread is started from the person's message: its id.
	card := e.waitCard(msgID)
	if !strings.Contains(visible(card), "discord:"+requester) {
		t.Errorf("card does not name the requester:\n%s", visible(card))
	}
	// The same message again (a resumed session replaying it) starts nothing new.
	if err := e.fake.Dispatch("MESSAGE_CREATE", mention); err != nil {
		t.Fatal(err)
	}
	// A message not addressed to the bot, and one by a bot, are ignored.
	e.fake.Dispatch("MESSAGE_CREATE", map[string]any{
		"id": e.id(), "channel_id": channelID, "guild_id": guildID, "content": "deploy api 9",
		"author": map[string]any{"id": requester},
	})
	e.fake.Dispatch("MESSAGE_CREATE", map[string]any{
		"id": e.id(), "channel_id": channelID, "guild_id": guildID, "content": "<@" + fakediscord.BotID + "> deploy api 9",
		"author": map[string]any{"id": "42", "bot": true}, "mentions": []map[string]any{{"id": fakediscord.BotID}},
	})
	// A DM is addressed to the bot without a mention.
	dm := e.id()
	e.fake.Dispatch("MESSAGE_CREATE", map[string]any{
		"id": e.id(), "channel_id": dm, "content": "deploy web 2", "author": map[string]any{"id": requester},
	})
	e.waitCard(dm)
	// A mention inside an existing thread runs in that thread, without
	// trying (and failing) to start a thread in a thread.
	thread := e.id()
	e.fake.AddChannel(fakediscord.Channel{ID: thread, Type: 11, ParentID: channelID, GuildID: guildID})
	inThread := e.id()
	e.fake.Dispatch("MESSAGE_CREATE", map[string]any{
		"id": inThread, "channel_id": thread, "guild_id": guildID, "content": "<@" + fakediscord.BotID + "> deploy db 3",
		"author": map[string]any{"id": requester}, "mentions": []map[string]any{{"id": fakediscord.BotID}},
	})
	e.waitCard(thread)
	e.h.WaitIdle()
	if c := e.h.Counts(); c.Runs != 3 {
		t.Errorf("runs = %d, want 3 (the mention once, the DM, the thread)", c.Runs)
	}
	for _, r := range e.fake.Requests() {
		if r.Status >= 400 {
			t.Errorf("the adapter made a failing request: %+v", r)
		}
	}
}

func TestGatewayMessageContentOnlyWhenConfigured(t *testing.T) {
	t.Parallel()
	if intents(Config{})&(1<<15) != 0 {
		t.Error("MESSAGE_CONTENT requested by default")
	}
	if intents(Config{MessageContent: true})&(1<<15) == 0 {
		t.Error("MESSAGE_CONTENT not requested when configured")
	}
}

func TestRegisterCommandsOnlyWhenDifferent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	wrote, err := e.ad.RegisterCommands(ctx)
	if err != nil || !wrote {
		t.Fatalf("first registration wrote=%v err=%v, want a write", wrote, err)
	}
	cmds := e.fake.Commands("")
	names := map[string]map[string]any{}
	for _, c := range cmds {
		names[c["name"].(string)] = c
	}
	if names["ops"] == nil || names["deploy"] == nil {
		t.Fatalf("registered %v, want ops and deploy", cmds)
	}
	opts := names["deploy"]["options"].([]any)
	if len(opts) != 3 || opts[0].(map[string]any)["required"] != true || opts[2].(map[string]any)["required"] != false {
		t.Errorf("deploy options = %v, want service, version required and env optional", opts)
	}
	// A restart with the same config: one GET, no write.
	for i := 0; i < 3; i++ {
		if wrote, err := e.ad.RegisterCommands(ctx); err != nil || wrote {
			t.Fatalf("re-registration %d wrote=%v err=%v, want no write", i, wrote, err)
		}
	}
	if n := e.fake.CommandPuts(); n != 1 {
		t.Errorf("bulk overwrites = %d, want 1", n)
	}
	// A changed flow is written again.
	e.ad.cfg.Flows[0].Description = "Deploy something else"
	if wrote, err := e.ad.RegisterCommands(ctx); err != nil || !wrote {
		t.Errorf("changed flow wrote=%v err=%v, want a write", wrote, err)
	}
}

func TestRunRegistersCommandsInGuild(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{cfg: func(c *Config) { c.GuildID = guildID }})
	e.run()
	e.h.Eventually("guild commands registered", func() bool { return len(e.fake.Commands(guildID)) == 2 })
	if len(e.fake.Commands("")) != 0 {
		t.Error("guild-scoped config registered global commands")
	}
}

func TestCommandText(t *testing.T) {
	t.Parallel()
	a := &Adapter{cfg: Config{Command: "ops", Flows: []FlowCommand{{
		Name: "deploy", Literals: []string{"deploy"},
		Options: []FlowOption{{Name: "service"}, {Name: "version"}, {Name: "env", Default: "staging", Optional: true}, {Name: "note", Optional: true}},
	}}}}
	opt := func(kv ...string) []*optionT {
		var out []*optionT
		for i := 0; i < len(kv); i += 2 {
			out = append(out, &optionT{Name: kv[i], Type: 3, Value: kv[i+1]})
		}
		return out
	}
	cases := []struct {
		name string
		opts []*optionT
		want string
		ok   bool
	}{
		{"ops", opt("command", "  deploy api 1.2.3 "), "deploy api 1.2.3", true},
		{"deploy", opt("version", "1.2.3", "service", "api"), "deploy api 1.2.3", true},
		{"deploy", opt("service", "api", "version", "1.2.3", "note", `say "hi"`), `deploy api 1.2.3 staging "say \"hi\""`, true},
		{"deploy", opt("service", "my api", "version", `a\b`), `deploy "my api" "a\\b"`, true},
		{"other", nil, "", false},
	}
	for _, c := range cases {
		got, ok := a.commandText(cmdData(c.name, c.opts))
		if got != c.want || ok != c.ok {
			t.Errorf("commandText(/%s %v) = %q, %v; want %q, %v", c.name, c.opts, got, ok, c.want, c.ok)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	good := Config{BotToken: "t", ApplicationID: "1", PublicKey: strings.Repeat("ab", 32)}
	if _, err := New(good, Deps{Sink: nopSink{}, Cards: nopSink{}}); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for name, mut := range map[string]func(*Config){
		"no token":    func(c *Config) { c.BotToken = "" },
		"bad app id":  func(c *Config) { c.ApplicationID = "app" },
		"short key":   func(c *Config) { c.PublicKey = "abcd" },
		"bad api url": func(c *Config) { c.APIURL = "discord.com" },
		"bad command": func(c *Config) { c.Command = "Ops Command" },
	} {
		c := good
		mut(&c)
		if _, err := New(c, Deps{Sink: nopSink{}, Cards: nopSink{}}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Flows Discord cannot take are left out, not fatal.
	c := good
	c.Flows = []FlowCommand{{Name: "Deploy!"}, {Name: "ops"}, {Name: "ok", Options: []FlowOption{{Name: "Bad Name"}}}, {Name: "deploy"}, {Name: "deploy"}}
	a, err := New(c, Deps{Sink: nopSink{}, Cards: nopSink{}})
	if err != nil {
		t.Fatalf("config with unusable flows: %v", err)
	}
	if len(a.cfg.Flows) != 1 || a.cfg.Flows[0].Name != "deploy" || len(a.cfg.skipped) != 4 {
		t.Errorf("flows kept %v, skipped %v; want only deploy kept", a.cfg.Flows, a.cfg.skipped)
	}
	if _, err := New(good, Deps{}); err == nil {
		t.Error("missing deps accepted")
	}
}

type nopSink struct{}

func (nopSink) HandleEvent(context.Context, core.ChannelEvent) (core.Receipt, error) {
	return core.Receipt{}, nil
}

func (nopSink) CardByApproval(context.Context, string) (core.Card, error) {
	return core.Card{}, core.ErrNotFound
}

type optionT = discordapi.ApplicationCommandInteractionDataOption

func cmdData(name string, opts []*optionT) discordapi.ApplicationCommandInteractionData {
	return discordapi.ApplicationCommandInteractionData{Name: name, Options: opts}
}
