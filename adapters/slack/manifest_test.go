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
	handlers := testAdapter(t).Routes()
	for _, u := range []string{m.Features.SlashCommands[0].URL, m.Settings.Events.URL, m.Settings.Interactivity.URL} {
		path, ok := strings.CutPrefix(u, "${PUBLIC_URL}")
		if !ok || handlers["POST "+path] == nil {
			t.Errorf("manifest URL %q is not ${PUBLIC_URL} + a served path", u)
		}
	}
	if m.Features.SlashCommands[0].Command != "/ops" {
		t.Errorf("slash command %q", m.Features.SlashCommands[0].Command)
	}
	for _, s := range []string{"app_mentions:read", "chat:write", "commands", "im:history", "channels:history", "files:read"} {
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

// docsManifestCommand is the command docs/slack.md gives for filling in
// the manifest; the test below runs its substitution.
const docsManifestCommand = `PUBLIC_URL=https://ops.example.com envsubst '${PUBLIC_URL}' < deploy/slack/manifest.yaml > /tmp/opsgate-manifest.yaml`

// The setup docs show the exact command that fills in the manifest's URLs
// (opsgate does not), say PUBLIC_URL must equal server.public_url, and the
// command's substitution leaves exactly the three served URLs.
func TestDocsShowManifestSubstitution(t *testing.T) {
	t.Parallel()
	docs, err := os.ReadFile("../../docs/slack.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(docs)
	if !strings.Contains(text, docsManifestCommand) {
		t.Errorf("docs/slack.md lacks the command %q", docsManifestCommand)
	}
	if !strings.Contains(text, "**must be exactly\nthe value of `server.public_url`**") {
		t.Errorf("docs/slack.md does not say PUBLIC_URL must equal server.public_url")
	}
	if strings.Contains(text, "is used for the manifest's URLs") {
		t.Errorf("docs/slack.md still claims server.public_url fills the manifest's URLs")
	}

	raw, err := os.ReadFile("../../deploy/slack/manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// envsubst '${PUBLIC_URL}' replaces only that variable, in both forms.
	filled := os.Expand(string(raw), func(name string) string {
		if name == "PUBLIC_URL" {
			return "https://ops.example.com"
		}
		return "$" + name
	})
	handlers := testAdapter(t).Routes()
	var urls []string
	for _, line := range strings.Split(filled, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		if _, u, ok := strings.Cut(line, "url: "); ok {
			urls = append(urls, u)
			path, ok := strings.CutPrefix(u, "https://ops.example.com/")
			if !ok || handlers["POST /"+path] == nil {
				t.Errorf("filled manifest URL %q is not public_url + a served path", u)
			}
		}
	}
	if len(urls) != 3 {
		t.Errorf("filled manifest has URLs %q, want 3", urls)
	}
}
