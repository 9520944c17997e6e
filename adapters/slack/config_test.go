package slack

import (
	"context"
	"errors"
	"testing"

	"github.com/opsgate/opsgate/core"
)

type nopSink struct{}

func (nopSink) HandleEvent(context.Context, core.ChannelEvent) (core.Receipt, error) {
	return core.Receipt{}, nil
}

type nopCards struct{}

func (nopCards) CardByApproval(context.Context, string) (core.Card, error) {
	return core.Card{}, core.ErrNotFound
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	deps := Deps{Sink: nopSink{}, Cards: nopCards{}}
	bad := map[string]Config{
		"NoBotToken":        {SigningSecret: "s"},
		"HTTPWithoutSecret": {BotToken: "xoxb-1"},
		"SocketWithoutApp":  {BotToken: "xoxb-1", Mode: ModeSocket},
		"SocketWithBotTok":  {BotToken: "xoxb-1", Mode: ModeSocket, AppToken: "xoxb-2"},
		"UnknownMode":       {BotToken: "xoxb-1", SigningSecret: "s", Mode: "rtm"},
		"RelativeAPIURL":    {BotToken: "xoxb-1", SigningSecret: "s", APIURL: "/api/"},
	}
	for name, c := range bad {
		if _, err := New(c, deps); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
		// config check calls Validate: it must refuse what New refuses,
		// naming the field.
		var ce *core.ConfigError
		if err := c.Validate(); !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || len(ce.Problems) == 0 || ce.Problems[0].Field == "" {
			t.Errorf("%s: Validate() = %v, want a *core.ConfigError naming the field", name, err)
		}
	}
	if err := (Config{BotToken: "xoxb-1", Mode: ModeSocket, AppToken: "xapp-1"}).Validate(); err != nil {
		t.Errorf("valid socket config: Validate() = %v", err)
	}
	if _, err := New(Config{BotToken: "xoxb-1", SigningSecret: "s"}, Deps{}); !errors.Is(err, ErrConfig) {
		t.Errorf("missing deps: err = %v", err)
	}
	a, err := New(Config{BotToken: "xoxb-1", Mode: ModeSocket, AppToken: "xapp-1", APIURL: "http://127.0.0.1:1/api"}, deps)
	if err != nil {
		t.Fatal(err)
	}
	if a.cfg.APIURL != "http://127.0.0.1:1/api/" {
		t.Errorf("api url %q: the trailing slash slack-go needs was not added", a.cfg.APIURL)
	}
}
