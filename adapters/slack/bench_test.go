package slack

import (
	"os"
	"strings"
	"testing"
	"time"
)

// BenchmarkRenderCard measures rendering a worst-case card: a huge preview
// and many arguments, trimmed to Block Kit's budget.
func BenchmarkRenderCard(b *testing.B) {
	a, err := New(Config{BotToken: "xoxb-1", SigningSecret: testSecret}, Deps{Sink: nopSink{}, Cards: nopCards{}})
	if err != nil {
		b.Fatal(err)
	}
	c := testCard()
	c.Preview = strings.Repeat("line of dry-run output & <stuff>\n", 2000)
	for b.Loop() {
		a.renderCard(c)
	}
}

// BenchmarkNormalizeEvent measures parsing and normalizing one mention.
func BenchmarkNormalizeEvent(b *testing.B) {
	body, err := os.ReadFile("testdata/event_app_mention.json")
	if err != nil {
		b.Fatal(err)
	}
	ec := eventContext{botUserID: "UBOT", now: time.Now()}
	for b.Loop() {
		env, err := parseEnvelope(body)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok, err := normalizeEvent(env, body, ec); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
