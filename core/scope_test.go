package core

import "testing"

// TestTokenScopesNeverDecideForMachines: a token acting as an agent or a
// schedule never holds decide, even when its configuration lists it; a
// person's token keeps what it is given.
func TestTokenScopesNeverDecideForMachines(t *testing.T) {
	t.Parallel()
	all := []Scope{ScopeRead, ScopeRequest, ScopeDecide, ScopeAdmin}
	for _, actor := range []string{"agent:claude", "schedule:nightly"} {
		if TokenScopes(actor, all).Has(ScopeDecide) || TokenScopes(actor, nil).Has(ScopeDecide) {
			t.Errorf("%s holds decide", actor)
		}
		if !TokenScopes(actor, all).Has(ScopeAdmin) {
			t.Errorf("%s lost a configured scope other than decide", actor)
		}
	}
	if !TokenScopes("console:alice", all).Has(ScopeDecide) || !TokenScopes("console:alice", nil).Has(ScopeDecide) {
		t.Error("a person's token lost decide")
	}
}
