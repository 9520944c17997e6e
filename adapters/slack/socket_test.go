package slack

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
)

// acked reports whether the fake got an ack for envelope id, and its
// payload.
func ackOf(e *env, id string) (json.RawMessage, bool) {
	for _, raw := range e.fake.Acks() {
		var a struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(raw, &a) == nil && a.EnvelopeID == id {
			return a.Payload, true
		}
	}
	return nil, false
}

// Over Socket Mode, an events_api envelope is processed once and acked;
// Slack's redelivery (retry_attempt 1, a new envelope) is acked and starts
// nothing new. A slash command envelope posts the root and is acked.
func TestSocketModeEventProcessedOnceAndAcked(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config, _ *adaptertest.HarnessOptions) {
		c.Mode, c.AppToken, c.SigningSecret = ModeSocket, "xapp-1-test", ""
	})
	ctx, cancel := context.WithCancel(t.Context())
	runDone := make(chan error, 1)
	go func() { runDone <- e.a.Run(ctx) }()
	if !e.fake.WaitConnected(adaptertest.WaitTimeout) {
		t.Fatal("socket mode client never connected")
	}
	opens := e.fake.Calls("apps.connections.open")
	if len(opens) == 0 || opens[0].Token != "xapp-1-test" {
		t.Fatalf("apps.connections.open calls = %+v, want the app token", opens)
	}

	raw, err := os.ReadFile("testdata/socket_events_api.json")
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		EnvelopeID string          `json:"envelope_id"`
		Type       string          `json:"type"`
		Payload    json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	e.fake.SendEnvelope(env.EnvelopeID, env.Type, env.Payload, 0)
	e.h.Eventually("envelope acked", func() bool { _, ok := ackOf(e, env.EnvelopeID); return ok })
	e.fake.SendEnvelope("redelivery-1", env.Type, env.Payload, 1)
	e.h.Eventually("redelivery acked", func() bool { _, ok := ackOf(e, "redelivery-1"); return ok })
	if n := e.h.Counts().Runs; n != 1 {
		t.Fatalf("runs = %d, want 1", n)
	}
	run := e.runOf("1700000900.000100")
	if run.Args["version"] != "3.0.0" || run.Requester != requester {
		t.Fatalf("run = %+v", run)
	}

	slash, _ := json.Marshal(map[string]string{
		"command": "/ops", "text": "deploy web 4.0.0", "user_id": "UREQ", "channel_id": "C1", "team_id": "T1",
		"trigger_id": "sock.trig.1",
	})
	e.fake.SendEnvelope("slash-1", "slash_commands", slash, 0)
	e.h.Eventually("slash envelope acked", func() bool { _, ok := ackOf(e, "slash-1"); return ok })
	if roots := e.roots(); len(roots) != 1 || !strings.Contains(roots[0].Text, "deploy web 4.0.0") {
		t.Fatalf("roots = %+v", roots)
	}
	if n := e.h.Counts().Runs; n != 2 {
		t.Fatalf("runs = %d, want 2", n)
	}

	// A card button arrives as an interactive envelope: decided, acked.
	root := e.roots()[0]
	card := e.waitCard(root.TS)
	click := fill(t, "block_actions.json", map[string]string{
		"CARD_TS": card.TS, "ROOT_TS": root.TS, "TRIGGER": "sock.click.1", "ACTION": actionApprove,
		"VALUE": buttonValueOf(t, card, actionApprove),
	})
	e.fake.SendEnvelope("click-1", "interactive", click, 0)
	e.h.Eventually("click envelope acked", func() bool { _, ok := ackOf(e, "click-1"); return ok })
	e.h.WaitRun(e.runOf(root.TS).ID, "succeeded")

	cancel()
	select {
	case err := <-runDone:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(adaptertest.WaitTimeout):
		t.Fatal("Run did not return after cancel")
	}
}

// In HTTP mode Run has nothing to do and returns at once.
func TestRunInHTTPModeReturns(t *testing.T) {
	t.Parallel()
	if err := testAdapter(t).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
}
