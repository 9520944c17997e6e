package web

import (
	"context"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// TestConsoleListsAgentAPISessions: a turn of an Agent API session (thread
// agent:<session id>, which no chat shows) is listed on the runs page, and
// the channel filter finds every API session's turns.
func TestConsoleListsAgentAPISessions(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{agent: fakellm.Replies(&llm.Response{Text: "Hello from the API."})})
	c := newClient(t, b.url)
	c.signIn(adminToken)
	rc, err := b.eng.StartAgentTurn(context.Background(), engine.AgentTurn{Thread: core.Thread{Channel: core.AgentSessionChannel, Key: "ses-1"},
		Actor: core.Actor{ID: "api:dashboard"}, Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	b.waitRun(t, rc.RunID, core.RunSucceeded)
	for _, path := range []string{"/runs", "/runs?channel=" + core.AgentSessionChannel} {
		page := c.do("GET", path, nil, nil)
		if page.status != 200 || !strings.Contains(page.body, rc.RunID[:8]) || !strings.Contains(page.body, "agent:ses-1") {
			t.Fatalf("%s: %d, no API session turn in\n%s", path, page.status, page.body)
		}
	}
}
