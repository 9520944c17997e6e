package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

const (
	readOnlyToken = "read-only-token-0123456789"
	agentToken    = "agent-token-0123456789"
)

// TestAttack_ConsoleTokenWithoutDecideApproves: signing in to the console
// with a token that may not decide (an agent's, a read-only one) gave the
// browser every button. The decision is refused, audited, and changes
// nothing.
func TestAttack_ConsoleTokenWithoutDecideApproves(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{tokens: []Token{
		// Both act as console:admin, an approver of the call.
		{Name: "reader", Token: readOnlyToken, Actor: "console:admin", Scopes: []core.Scope{core.ScopeRead}},
		{Name: "claude", Token: agentToken, Actor: "agent:claude"},
	}})
	b.send(t, "scoped", "deploy api 1.2.3")
	_, a := b.waitPending(t, "console:scoped")
	for _, tok := range []string{readOnlyToken, agentToken} {
		c := newClient(t, b.url)
		csrf := c.signIn(tok)
		// The reader reads every run; the agent token without scopes only
		// its own runs' approvals (core/authority): another's is not found.
		wantRead := map[string]int{readOnlyToken: http.StatusOK, agentToken: http.StatusNotFound}[tok]
		if r := c.do("GET", "/approvals/"+a.ID, nil, nil); r.status != wantRead {
			t.Fatalf("%s reads the approval: %d, want %d", tok, r.status, wantRead)
		}
		r := c.do("POST", "/approvals/"+a.ID+"/decision", url.Values{csrfField: {csrf}, "action": {"approve"}}, nil)
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "may not decide") {
			t.Fatalf("%s decision: %d %s", tok, r.status, r.body)
		}
		// Nor may it requeue dead letters or send messages (reader).
		if tok == readOnlyToken {
			if r := c.do("POST", "/chat", url.Values{csrfField: {csrf}, "thread": {"x"}, "text": {"deploy api 2"}}, nil); r.status != http.StatusForbidden {
				t.Fatalf("read-only token sent a message: %d", r.status)
			}
			if r := c.do("GET", "/deliveries", nil, nil); r.status != http.StatusForbidden {
				t.Fatalf("read-only token saw dead letters: %d", r.status)
			}
		}
	}
	cur, _ := b.store.ApprovalGet(context.Background(), a.ID)
	if cur.Status != approvals.StatusPending || len(cur.Decisions) != 0 {
		t.Fatalf("approval changed: %+v", cur)
	}
	es, err := b.store.AuditList(context.Background(), approvals.AuditListParams{ApprovalID: a.ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, e := range es {
		if e.Kind == "approval.refused" {
			refused++
		}
	}
	if refused != 2 {
		t.Fatalf("refused attempts audited: %d, want 2 (%+v)", refused, es)
	}
}

func TestCancelOnlyByRequesterApproverOrAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{tokens: []Token{
		{Name: "eve", Token: "eve-token-0123456789", Actor: "console:eve", Scopes: []core.Scope{core.ScopeRead, core.ScopeRequest}},
	}})
	b.send(t, "cancel", "deploy api 1.2.3") // requested by console:bob
	run, _ := b.waitPending(t, "console:cancel")
	eve := newClient(t, b.url)
	csrf := eve.signIn("eve-token-0123456789")
	if r := eve.do("POST", "/runs/"+run.ID+"/cancel", url.Values{csrfField: {csrf}}, nil); r.status != http.StatusForbidden {
		t.Fatalf("someone else's run cancelled: %d", r.status)
	}
	bob := newClient(t, b.url)
	csrf = bob.signIn(bobToken)
	if r := bob.do("POST", "/runs/"+run.ID+"/cancel", url.Values{csrfField: {csrf}}, nil); r.status != http.StatusSeeOther {
		t.Fatalf("requester cancels: %d %s", r.status, r.body)
	}
	b.waitRun(t, run.ID, core.RunCancelled)
}

func TestGrantsPageListsAndRevokes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{foreverHighImpact: true})
	b.send(t, "forever", "deploy api 1.2.3")
	_, a := b.waitPending(t, "console:forever")
	c := newClient(t, b.url)
	csrf := c.signIn(adminToken)
	r := c.do("GET", "/approvals/"+a.ID, nil, nil)
	if strings.Contains(r.body, "approve-forever") {
		t.Fatal("the forever option is offered on a high_impact card")
	}
	// A decision with scope forever (as the API or CLI makes it).
	r = c.do("POST", "/approvals/"+a.ID+"/decision", url.Values{csrfField: {csrf}, "action": {"approve"}, "scope": {"forever"}}, nil)
	if r.status != http.StatusSeeOther {
		t.Fatalf("approve forever: %d %s", r.status, r.body)
	}
	r = c.do("GET", "/grants", nil, nil)
	id := approvals.GrantID(a.ID)
	if r.status != 200 || !strings.Contains(r.body, `id="g-`+id+`"`) || !strings.Contains(r.body, "exactly {") {
		t.Fatalf("grants page: %d %s", r.status, r.body)
	}
	r = c.do("POST", "/grants/"+id+"/revoke", url.Values{csrfField: {csrf}}, nil)
	if r.status != http.StatusSeeOther {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	if r := c.do("GET", "/grants", nil, nil); strings.Contains(r.body, `id="g-`+id+`"`) {
		t.Fatal("revoked grant still listed as active")
	}
	if r := c.do("GET", "/grants?status=all", nil, nil); !strings.Contains(r.body, "revoked by console:admin") {
		t.Fatalf("all grants: %s", r.body)
	}
	if r := c.do("POST", "/grants/"+id+"/revoke", url.Values{csrfField: {csrf}}, nil); r.status != http.StatusConflict {
		t.Fatalf("second revoke: %d", r.status)
	}
}
