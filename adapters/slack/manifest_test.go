package slack

import (
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The shipped manifest points Slack at the paths the adapter serves and
// subscribes to the events it reads.
func TestManifestMatchesHandlers(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../deploy/slack/manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Features struct {
			SlashCommands []struct {
				Command, URL string
			} `yaml:"slash_commands"`
		} `yaml:"features"`
		OAuth struct {
			Scopes struct {
				Bot []string `yaml:"bot"`
			} `yaml:"scopes"`
		} `yaml:"oauth_config"`
		Settings struct {
			Events struct {
				URL       string   `yaml:"request_url"`
				BotEvents []string `yaml:"bot_events"`
			} `yaml:"event_subscriptions"`
			Interactivity struct {
				URL string `yaml:"request_url"`
			} `yaml:"interactivity"`
		} `yaml:"settings"`
	}
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	handlers := testAdapter(t).Handlers()
	for _, u := range []string{m.Features.SlashCommands[0].URL, m.Settings.Events.URL, m.Settings.Interactivity.URL} {
		path, ok := strings.CutPrefix(u, "${PUBLIC_URL}")
		if !ok || handlers["POST "+path] == nil {
			t.Errorf("manifest URL %q is not ${PUBLIC_URL} + a served path", u)
		}
	}
	if m.Features.SlashCommands[0].Command != "/ops" {
		t.Errorf("slash command %q", m.Features.SlashCommands[0].Command)
	}
	for _, s := range []string{"app_mentions:read", "chat:write", "commands", "im:history", "channels:history"} {
		if !slices.Contains(m.OAuth.Scopes.Bot, s) {
			t.Errorf("scope %s missing", s)
		}
	}
	for _, ev := range []string{"app_mention", "message.im", "message.channels"} {
		if !slices.Contains(m.Settings.Events.BotEvents, ev) {
			t.Errorf("event %s missing", ev)
		}
	}
}
