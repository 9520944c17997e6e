package authority

import (
	"context"
	"testing"

	"github.com/opsgate/opsgate/core"
)

// TestSignedInActorVouchedGroups: a person signed in at the identity
// provider whose provider group names an approver group stands as that
// group's configured members do — decides its approvals, cancels and
// answers their runs — and reads every run; without the group, or once
// the group is gone from the configuration, they do not; an agent never
// decides whatever it is vouched for.
func TestSignedInActorVouchedGroups(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	ctx := context.Background()
	scopes := core.Scopes{core.ScopeRead, core.ScopeRequest, core.ScopeDecide}
	carolIdP := SignedInActor("console:carol@example.com", scopes, []string{"sre"})
	carolNone := SignedInActor("console:carol@example.com", scopes, nil)
	if !carolIdP.ReadsAll() {
		t.Error("a signed-in person with read does not read every run")
	}
	if _, err := w.a.Approval(ctx, carolIdP, Decide, "a1"); err != nil {
		t.Fatalf("carol (provider group sre) decides: %v", err)
	}
	if _, err := w.a.Run(ctx, carolIdP, Cancel, "r1"); err != nil {
		t.Fatalf("carol (provider group sre) cancels: %v", err)
	}
	if _, err := w.a.Run(ctx, carolIdP, Answer, "r1"); err != nil {
		t.Fatalf("carol (provider group sre) answers: %v", err)
	}
	if _, err := w.a.Approval(ctx, carolNone, Decide, "a1"); code(t, err) != CodeNotApprover {
		t.Fatalf("carol without the group decides: %v", err)
	}
	agent := SignedInActor("agent:x", scopes, []string{"sre"})
	if _, err := w.a.Approval(ctx, agent, Decide, "a1"); code(t, err) != CodeHumanRequired {
		t.Fatalf("a vouched agent decides: %v", err)
	}
	// The approver group is renamed in the configuration: the provider's
	// "sre" names nothing now.
	w.reload(map[string][]string{"bob": {"console:bob"}}, map[string][]string{"oncall": {"person:bob"}})
	if _, err := w.a.Run(ctx, carolIdP, Answer, "r1"); code(t, err) != CodeNotApprover {
		t.Fatalf("carol answers after the group is gone: %v", err)
	}
}
