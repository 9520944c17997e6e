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

// TestDelegateAndPolicyOnTheConsole: the approval shows why the policy
// asked (linked to the Policy page, which lists the rules in force); a
// hand-over to a name the configuration lacks is refused on the card with
// the engine's message, and one to a group moves the say: the card
// records it and its delegator may no longer approve. No receipt yet.
func TestDelegateAndPolicyOnTheConsole(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.send(t, "deleg", "deploy api 1.2.3")
	_, a := b.waitPending(t, "console:deleg")
	c := newClient(t, b.url)
	csrf := c.signIn(adminToken)

	r := c.do("GET", "/approvals/"+a.ID, nil, nil)
	if r.status != 200 || !strings.Contains(r.body, `data-field="why"`) || !strings.Contains(r.body, "policy rule 1: tool deploy: ask") ||
		!strings.Contains(r.body, `action="/approvals/`+a.ID+`/delegate"`) {
		t.Fatalf("approval page: %d %s", r.status, r.body)
	}
	r = c.do("GET", "/policy", nil, nil)
	if r.status != 200 || !strings.Contains(r.body, `id="rule-1"`) || !strings.Contains(r.body, "group:sre") {
		t.Fatalf("policy page: %d %s", r.status, r.body)
	}
	if r := c.do("GET", "/approvals/"+a.ID+"/receipt", nil, nil); r.status != http.StatusConflict {
		t.Fatalf("receipt of a pending approval: %d", r.status)
	}

	r = c.do("POST", "/approvals/"+a.ID+"/delegate", url.Values{csrfField: {csrf}, "to": {"group:nope"}}, nil)
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, "is not a person or approver group") || !strings.Contains(r.body, `value="group:nope"`) {
		t.Fatalf("bad target: %d %s", r.status, r.body)
	}
	r = c.do("POST", "/approvals/"+a.ID+"/delegate", url.Values{csrfField: {csrf}, "to": {"group:sre"}, "reason": {"U1 knows it"}}, nil)
	if r.status != http.StatusSeeOther {
		t.Fatalf("delegate: %d %s", r.status, r.body)
	}
	r = c.do("GET", "/approvals/"+a.ID, nil, nil)
	if !strings.Contains(r.body, `<span data-field="delegated-to">group:sre</span>`) {
		t.Fatalf("the hand-over is not on the card: %s", r.body)
	}
	r = c.do("POST", "/approvals/"+a.ID+"/decision", url.Values{csrfField: {csrf}, "action": {"approve"}}, nil)
	if r.status != http.StatusForbidden {
		t.Fatalf("the delegator approved: %d", r.status)
	}
	cur, _ := b.store.ApprovalGet(context.Background(), a.ID)
	if cur.Status != approvals.StatusPending || len(cur.Decisions) != 1 || cur.Decisions[0].Action != approvals.ActionDelegate {
		t.Fatalf("approval %+v", cur)
	}
	if _, err := b.eng.Decide(context.Background(), core.Actor{ID: "slack:U1"}, "slack", core.Decision{ApprovalID: a.ID, Action: "approve"}); err != nil {
		t.Fatalf("the delegate: %v", err)
	}
}

// TestIDPGroupApproverMayNotHandOn: carol may decide an approval that
// asks group:sre only because the identity provider vouches she is in
// sre; the console passes that group with her hand-over, and the engine
// refuses it for that reason (not as from a stranger) — a hand-over is
// judged live later, without her sign-in. Nothing changes.
func TestIDPGroupApproverMayNotHandOn(t *testing.T) {
	ib := setupIDP(t, idpOpts{})
	br := ib.browser(t)
	p := ib.continued(br, ib.signIn(br, "carol", "pw-carol"))
	m := csrfRe.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("carol is not signed in: %d %s", p.status, p.url)
	}
	ib.send(t, "idp-hand", "deploy api 1.2.3")
	_, a := ib.waitPending(t, "console:idp-hand")
	res, err := br.hc.PostForm(ib.url+"/approvals/"+a.ID+"/delegate", url.Values{csrfField: {m[1]}, "to": {"group:sre"}})
	if err != nil {
		t.Fatal(err)
	}
	if pg := readPage(t, res); pg.status != http.StatusForbidden || !strings.Contains(pg.body, "only an approver the configuration lists may hand it on") {
		t.Fatalf("carol's hand-over: %d\n%s", pg.status, pg.body)
	}
	got, err := ib.store.ApprovalGet(context.Background(), a.ID)
	if err != nil || got.Status != approvals.StatusPending || len(got.Decisions) != 0 {
		t.Fatalf("the refused hand-over changed the approval: %+v %v", got, err)
	}
}
