package providers_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/agent/providers"
	"github.com/opsgate/opsgate/internal/fakellm"
)

var srv *fakellm.Server

func TestMain(m *testing.M) {
	srv = fakellm.NewServer()
	code := m.Run()
	srv.Close()
	os.Exit(code)
}

func TestNewBuildsEachProviderWithRetries(t *testing.T) {
	t.Parallel()
	for _, p := range []string{agent.ProviderOpenAI, agent.ProviderAnthropic} {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			sc := srv.Script(t)
			base := sc.OpenAIURL()
			if p == agent.ProviderAnthropic {
				base = sc.AnthropicURL()
			}
			var waits []time.Duration
			m, err := providers.New(agent.ModelSpec{Name: "x", Provider: p, BaseURL: base, Model: "m", Timeout: time.Minute},
				agent.RetryPolicy{Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }})
			if err != nil {
				t.Fatal(err)
			}
			sc.Push(fakellm.HTTPError{Status: 500}, fakellm.Say("ok"))
			resp, err := m.Stream(context.Background(), &agent.Request{Messages: []agent.RequestMessage{{Role: agent.RoleUser, Text: "hi"}}}, nil)
			if err != nil || resp.Text != "ok" || len(waits) != 1 || len(sc.Requests()) != 2 {
				t.Fatalf("resp %+v err %v waits %v", resp, err, waits)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	for name, spec := range map[string]agent.ModelSpec{
		"UnknownProvider": {Name: "x", Provider: "gemini", Model: "m"},
		"NoModel":         {Name: "x", Provider: "openai"},
		"BadURL":          {Name: "x", Provider: "anthropic", Model: "m", BaseURL: "llm:8000"},
	} {
		if _, err := providers.New(spec, agent.RetryPolicy{}); err == nil || !strings.Contains(err.Error(), "model x") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}
