package providers_test

import (
	"context"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/agent/anthropic"
	"github.com/opsgate/opsgate/core/agent/openai"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// Run: go test -run '^$' -bench . -benchmem ./core/agent/providers/

// BenchmarkProviderTurn is one streamed turn with one tool call over local
// HTTP against the fake server: the SDK, SSE decoding and assembly, the
// cost a provider adds to every model call on top of the model itself.
func BenchmarkProviderTurn(b *testing.B) {
	tb, _ := agent.NewToolbox([]agent.Tool{{Name: "deploy"}})
	req, _ := agent.BuildRequest(agent.SystemPrompt(""), []agent.Message{agent.UserMessage(now, agent.External("slack", "slack:U1", "deploy api"))}, tb, agent.Window{})
	turn := fakellm.Turn{Text: []string{"Deploying ", "api."}, Calls: []fakellm.Call{{Name: "deploy", Args: `{"service":"api","version":"1.2.3","reason":"asked"}`}}}
	for _, p := range []string{"openai", "anthropic"} {
		b.Run(p, func(b *testing.B) {
			sc := srv.Script(b).DiscardRequests()
			var m agent.Model
			if p == "openai" {
				m, _ = openai.New(agent.ModelSpec{BaseURL: sc.OpenAIURL(), Model: "m", Timeout: time.Minute})
			} else {
				m, _ = anthropic.New(agent.ModelSpec{BaseURL: sc.AnthropicURL(), Model: "m"})
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				sc.Push(turn)
				if _, err := m.Stream(ctx, req, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
