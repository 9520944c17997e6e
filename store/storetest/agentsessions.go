package storetest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/opsgate/opsgate/core"
)

// agentSessions is the store's Agent API session side; every backend must
// have it.
func agentSessions(t *testing.T, s core.Store) core.AgentSessionStore {
	t.Helper()
	as, ok := s.(core.AgentSessionStore)
	if !ok {
		t.Fatalf("%T does not implement core.AgentSessionStore", s)
	}
	return as
}

func testAgentSessionRoundTrip(t *testing.T, s core.Store) {
	as := agentSessions(t, s)
	id := newID("ses")
	in := &core.AgentSession{ID: id, Token: "app", Actor: "api:app", Agent: "ops",
		Settings: json.RawMessage(`{"model":"default","max_steps":20}`),
		Thread:   core.Thread{Channel: core.AgentSessionChannel, Key: id}, CreatedAt: t0}
	if err := as.AgentSessionCreate(ctx(t), in); err != nil {
		t.Fatalf("AgentSessionCreate: %v", err)
	}
	got, err := as.AgentSessionGet(ctx(t), id)
	if err != nil {
		t.Fatalf("AgentSessionGet: %v", err)
	}
	var settings map[string]any
	if err := json.Unmarshal(got.Settings, &settings); err != nil || settings["model"] != "default" {
		t.Errorf("settings = %s (%v)", got.Settings, err)
	}
	if got.Token != "app" || got.Actor != "api:app" || got.Agent != "ops" || got.Thread != in.Thread || !got.CreatedAt.Equal(t0) {
		t.Errorf("got %+v, want %+v", got, in)
	}
	if err := as.AgentSessionCreate(ctx(t), in); !errors.Is(err, core.ErrConflict) {
		t.Errorf("second create with the same id: %v, want ErrConflict", err)
	}
	if _, err := as.AgentSessionGet(ctx(t), "nope"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("unknown session: %v, want ErrNotFound", err)
	}
}

func testAgentSessionListByTokenNewestFirst(t *testing.T, s core.Store) {
	as := agentSessions(t, s)
	var mine []string
	for i := range 5 {
		tok := "app"
		if i%2 == 1 {
			tok = "other"
		}
		id := newID("ses")
		if err := as.AgentSessionCreate(ctx(t), &core.AgentSession{ID: id, Token: tok, Actor: "api:" + tok, Agent: "ops",
			Thread: core.Thread{Channel: core.AgentSessionChannel, Key: id}, CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if tok == "app" {
			mine = append([]string{id}, mine...)
		}
	}
	var got []string
	cursor := ""
	for range 10 {
		items, next, err := as.AgentSessionList(ctx(t), core.AgentSessionListParams{Token: "app", Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			got = append(got, it.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	sameIDs(t, "sessions of token app", got, mine...)
	all, _, err := as.AgentSessionList(ctx(t), core.AgentSessionListParams{Limit: 50})
	if err != nil || len(all) != 5 {
		t.Errorf("every token's sessions: %d, %v", len(all), err)
	}
}
