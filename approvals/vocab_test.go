package approvals

import "testing"

// TestVocabularyValid: each typed vocabulary accepts exactly its constants,
// so surfaces check input with Valid instead of copying the lists.
func TestVocabularyValid(t *testing.T) {
	t.Parallel()
	// Statuses is the list surfaces build filters and schemas from: the
	// wire values (docs/architecture.md), in order, each Valid.
	wantStatuses := []Status{"pending", "approved", "rejected", "edited", "expired"}
	if len(Statuses) != len(wantStatuses) {
		t.Fatalf("Statuses = %v, want %v", Statuses, wantStatuses)
	}
	for i, s := range wantStatuses {
		if Statuses[i] != s || !s.Valid() {
			t.Errorf("Statuses[%d] = %q (Valid %v), want valid %q", i, Statuses[i], Statuses[i].Valid(), s)
		}
	}
	for _, a := range []Action{ActionApprove, ActionReject, ActionEdit} {
		if !a.Valid() {
			t.Errorf("Action %q not Valid", a)
		}
	}
	for _, s := range []Scope{ScopeCall, ScopeSession, ScopeForever} {
		if !s.Valid() {
			t.Errorf("Scope %q not Valid", s)
		}
	}
	for _, r := range []Risk{RiskRead, RiskReversible, RiskExternal, RiskHighImpact} {
		if !r.Valid() {
			t.Errorf("Risk %q not Valid", r)
		}
	}
	for _, k := range []AuditKind{AuditApprovalRequested, AuditApprovalDecided, AuditApprovalRefused, AuditApprovalExpired,
		AuditRunCancelled, AuditRunRedispatched, AuditRunInterrupted, AuditGrantApplied, AuditGrantCreated, AuditGrantRevoked,
		AuditPolicyDenied, AuditDispatchRefused, AuditRequestRefused, AuditConfigReloaded, AuditConfigRefused, AuditKeyed,
		AuditAgentCallRequested, AuditAgentCallClaimed, AuditAgentCallCompleted, AuditAgentCallFailed,
		AuditSchedulePaused, AuditScheduleResumed, AuditScheduleRun} {
		if !k.Valid() {
			t.Errorf("AuditKind %q not Valid", k)
		}
	}
	// The system's expire is recorded but never accepted from a person;
	// the empty scope means call but is not itself a scope.
	if ActionExpire.Valid() || Action("").Valid() || Action("Approve").Valid() {
		t.Error("Action.Valid accepts a value no person may send")
	}
	if Scope("").Valid() || Scope("forever!").Valid() || Status("cancelled").Valid() || Risk("scary").Valid() || AuditKind("x").Valid() {
		t.Error("Valid accepts an unknown value")
	}
}
