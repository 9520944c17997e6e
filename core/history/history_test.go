package history

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

var t0 = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

func entry(kind approvals.AuditKind, actor, tool string, d map[string]any) approvals.AuditEntry {
	b, _ := json.Marshal(d)
	return approvals.AuditEntry{Kind: kind, Actor: actor, RunID: "run-1", ApprovalID: "ap-1", Tool: tool, Detail: b, At: t0}
}

var deployCall = Calls{"ap-1": {Tool: "deploy", Args: map[string]any{"service": "api", "version": "1.2.3", "env": "prod"}}}

func TestSentences(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		e     approvals.AuditEntry
		calls Calls
		want  string
	}{
		{"Rejected", entry(approvals.AuditApprovalDecided, "slack:UALICE", "deploy", map[string]any{"action": "reject", "channel": "slack",
			"person": "alice", "status": "rejected", "reason": "not during the freeze"}), deployCall,
			"alice (slack) rejected deploy env=prod service=api version=1.2.3: not during the freeze"},
		{"ApprovedFromTheTUI", entry(approvals.AuditApprovalDecided, "console:admin", "deploy", map[string]any{"action": "approve", "channel": "tui",
			"status": "approved"}), deployCall, "console:admin (tui) approved deploy env=prod service=api version=1.2.3"},
		{"OneOfTwo", entry(approvals.AuditApprovalDecided, "slack:U1", "deploy", map[string]any{"action": "approve", "channel": "slack",
			"status": "pending", "approvals": 1, "quorum": 2}), deployCall, "slack:U1 approved deploy env=prod service=api version=1.2.3 (1 of 2 approvals)"},
		{"EditedForTheSession", entry(approvals.AuditApprovalDecided, "console:bob", "deploy", map[string]any{"action": "edit", "channel": "console",
			"person": "bob", "status": "edited", "scope": "session", "args": map[string]any{"version": "1.2.4"}}), deployCall,
			"bob (console) approved deploy env=prod service=api version=1.2.3 with changes (version=1.2.4) for the session"},
		{"PersonIsTheIdentity", entry(approvals.AuditApprovalDecided, "slack:U1", "deploy", map[string]any{"action": "approve", "channel": "slack",
			"person": "slack:U1"}), nil, "slack:U1 approved deploy"},
		{"WithoutTheCall", entry(approvals.AuditApprovalDecided, "slack:U1", "deploy", map[string]any{"action": "approve", "channel": "slack"}), nil,
			"slack:U1 approved deploy"},
		{"Requested", entry(approvals.AuditApprovalRequested, "console:alice", "deploy", map[string]any{"args": map[string]any{"service": "api"},
			"approvers": []string{"group:sre"}, "quorum": 2}), nil, "console:alice asked to run deploy service=api; group:sre to decide (2 approvals needed)"},
		{"Refused", entry(approvals.AuditApprovalRefused, "slack:UBOB", "deploy", map[string]any{"action": "approve", "channel": "slack",
			"reason": "slack:UBOB is not an approver"}), deployCall,
			"slack:UBOB was refused: approve deploy env=prod service=api version=1.2.3: slack:UBOB is not an approver"},
		{"Expired", entry(approvals.AuditApprovalExpired, "system", "deploy", map[string]any{"expires_at": t0}), deployCall,
			"deploy env=prod service=api version=1.2.3 expired with no decision"},
		{"Cancelled", entry(approvals.AuditRunCancelled, "console:alice", "", map[string]any{"previous_status": "waiting_approval"}), nil,
			"console:alice cancelled the run (it was waiting approval)"},
		{"Interrupted", entry(approvals.AuditRunInterrupted, "system", "deploy", map[string]any{"step": 0, "attempts": 1}), deployCall,
			"deploy env=prod service=api version=1.2.3 was interrupted (step 1, attempt 1): the process stopped while it ran, so its outcome is unknown"},
		{"GrantApplied", entry(approvals.AuditGrantApplied, "console:bob", "deploy", map[string]any{"args": map[string]any{"service": "web"},
			"scope": "forever", "requester": "api:ci", "grant": "g-1"}), nil, "deploy service=web ran without asking for api:ci, under the forever grant console:bob gave"},
		{"PolicyDenied", entry(approvals.AuditPolicyDenied, "system", "delete_db", map[string]any{"why": "rule 4: delete_*", "args": map[string]any{}}), nil,
			"policy denied delete_db: rule 4: delete_*"},
		{"ConfigReloaded", entry(approvals.AuditConfigReloaded, "system", "", map[string]any{"file": "/etc/opsgate.yaml", "rules": 5, "people": 2,
			"groups": 1, "needs_restart": []string{"channels.slack"}}), nil,
			"the configuration was reloaded from /etc/opsgate.yaml: 5 rules, 2 people, 1 groups; a restart is needed for channels.slack"},
		{"Keyed", entry(approvals.AuditKeyed, "system", "", map[string]any{"legacy_until": 41}), nil,
			"the audit chain was keyed; entries 1 to 41 were sealed before it had a key"},
		{"UnknownKindFallsBack", entry("quota.exceeded", "system", "deploy", map[string]any{"limit": 5, "used": 6}), nil,
			"system quota.exceeded deploy: limit=5 used=6"},
		{"NoDetail", approvals.AuditEntry{Kind: "mystery", Actor: "x:y"}, nil, "x:y mystery"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Sentence(tc.e, tc.calls); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestEveryKindReadsAsWords: no known kind falls back to the generic form.
func TestEveryKindReadsAsWords(t *testing.T) {
	t.Parallel()
	for _, k := range []approvals.AuditKind{approvals.AuditApprovalRequested, approvals.AuditApprovalDecided, approvals.AuditApprovalRefused,
		approvals.AuditApprovalExpired, approvals.AuditRunCancelled, approvals.AuditRunRedispatched, approvals.AuditRunInterrupted,
		approvals.AuditGrantApplied, approvals.AuditGrantCreated, approvals.AuditGrantRevoked, approvals.AuditPolicyDenied,
		approvals.AuditRequestRefused, approvals.AuditConfigReloaded, approvals.AuditConfigRefused, approvals.AuditKeyed,
		approvals.AuditAgentCallRequested, approvals.AuditAgentCallClaimed, approvals.AuditAgentCallCompleted, approvals.AuditAgentCallFailed} {
		if !k.Valid() {
			t.Fatalf("%s is not a valid kind", k)
		}
		s := Sentence(entry(k, "console:alice", "deploy", map[string]any{}), deployCall)
		if strings.Contains(s, string(k)) {
			t.Errorf("%s reads as the generic fallback: %q", k, s)
		}
	}
}

func TestOutsideTextStaysOneLine(t *testing.T) {
	t.Parallel()
	e := entry(approvals.AuditApprovalDecided, "slack:U1\nApproved", "deploy", map[string]any{"action": "reject", "channel": "slack",
		"reason": "no\n\x1b[2Jreally " + strings.Repeat("x", 500)})
	s := Sentence(e, Calls{"ap-1": {Tool: "deploy", Args: map[string]any{"v": "1.2.3\nApproved by alice"}}})
	if strings.ContainsAny(s, "\n\x1b\t") {
		t.Fatalf("sentence carries control characters: %q", s)
	}
	if !strings.Contains(s, "1.2.3⏎Approved") || !strings.HasSuffix(s, "…") || len([]rune(s)) > 400 {
		t.Fatalf("sentence %q", s)
	}
}

func ev(seq int64, at time.Duration, typ string, d map[string]any) core.RunEvent {
	b, _ := json.Marshal(d)
	return core.RunEvent{Seq: seq, RunID: "run-1", Type: typ, Data: b, At: t0.Add(at)}
}

// aDeploy is a deploy that waited two minutes for an approval.
var aDeploy = []core.RunEvent{
	ev(1, 0, core.EventRunQueued, map[string]any{"flow": "deploy", "args": map[string]any{"service": "api", "version": "1.2.3"}}),
	ev(2, 100*time.Millisecond, core.EventTurnStarted, map[string]any{"step_index": 0}),
	ev(3, 300*time.Millisecond, core.EventPermissionRequested, map[string]any{"tool": "deploy", "args": map[string]any{"service": "api"},
		"risk": "high_impact", "approvers": []string{"group:sre"}}),
	ev(4, 2*time.Minute+300*time.Millisecond, core.EventPermissionDecided, map[string]any{"status": "approved", "by": []string{"console:admin"}}),
	ev(5, 2*time.Minute+500*time.Millisecond, core.EventTurnStarted, map[string]any{"step_index": 0}),
	ev(6, 2*time.Minute+600*time.Millisecond, core.EventToolStarted, map[string]any{"tool": "deploy", "args": map[string]any{"service": "api"}, "attempt": 1}),
	ev(7, 2*time.Minute+12*time.Second+600*time.Millisecond, core.EventToolFinished, map[string]any{"tool": "deploy", "duration_ms": 12000, "ok": true}),
	ev(8, 2*time.Minute+12*time.Second+700*time.Millisecond, core.EventMessageCommitted, map[string]any{"text": "deployed api\nmore"}),
	ev(9, 2*time.Minute+12*time.Second+700*time.Millisecond, core.EventTurnFinished, map[string]any{"status": "succeeded"}),
}

func TestTimelineInWords(t *testing.T) {
	t.Parallel()
	ms := Timeline(aDeploy)
	var got []string
	for _, m := range ms {
		got = append(got, "+"+Duration(m.Since)+" "+m.Text)
	}
	want := []string{
		"+0ms queued: deploy service=api version=1.2.3",
		"+100ms started",
		"+200ms asked for approval to run deploy service=api (high_impact); group:sre to decide",
		"+2m00s approved by console:admin",
		"+200ms resumed",
		"+100ms running deploy service=api",
		"+12s deploy finished in 12s",
		"+100ms replied: deployed api …",
		"+0ms the run succeeded",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("timeline:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, m := range ms {
		if strings.Contains(m.Text, "step index") || strings.Contains(m.Text, "turn") {
			t.Fatalf("engine jargon: %q", m.Text)
		}
	}
}

func TestSpentSaysWhereTheTimeWent(t *testing.T) {
	t.Parallel()
	sh := Spent(aDeploy, t0.Add(time.Hour))
	got := SpentText(sh)
	want := "2m13s in all: 2m00s waiting for approval (90%), 12s running deploy (9%), 400ms working (0%), 300ms queued (0%)"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	// A run still waiting: the wait runs up to now.
	open := Spent(aDeploy[:3], t0.Add(10*time.Minute))
	if len(open) == 0 || open[0].What != "waiting for approval" || open[0].Took != 10*time.Minute-300*time.Millisecond {
		t.Fatalf("open run %+v", open)
	}
	if Spent(nil, t0) != nil || SpentText(nil) != "" {
		t.Fatal("no events, no shares")
	}
}

func TestDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{-time.Second: "0ms", 850 * time.Millisecond: "850ms", 12 * time.Second: "12s",
		185 * time.Second: "3m05s", 2*time.Hour + 4*time.Minute: "2h04m", 74 * time.Hour: "3d02h"} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%s) = %q, want %q", d, got, want)
		}
	}
}

// FuzzSentence: any entry renders as one line, without panicking.
func FuzzSentence(f *testing.F) {
	f.Add("approval.decided", "slack:U1", "deploy", `{"action":"reject","reason":"x"}`)
	f.Add("run.cancelled", "", "", `{"previous_status":5}`)
	f.Add("grant.created", "a", "t", `{"args":[1],"pattern":{"a":"*"},"expires_at":"2026-01-01T00:00:00Z"}`)
	f.Fuzz(func(t *testing.T, kind, actor, tool, detail string) {
		s := Sentence(approvals.AuditEntry{Kind: approvals.AuditKind(kind), Actor: actor, Tool: tool, Detail: json.RawMessage(detail), ApprovalID: "ap-1"}, deployCall)
		if strings.ContainsAny(s, "\n\r") {
			t.Fatalf("two lines: %q", s)
		}
		for _, m := range Timeline([]core.RunEvent{{Type: kind, Data: json.RawMessage(detail)}}) {
			if strings.ContainsAny(m.Text, "\n\r") {
				t.Fatalf("two lines: %q", m.Text)
			}
		}
	})
}
