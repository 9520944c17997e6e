package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// The card says what happens next and shows the ladder; it lists what a
// task or session grant would cover before anyone saves one; "for" bounds
// the session grant (a bad one is refused on the card); the grants page
// lists it with its end and revokes it.
func TestCardEscalationAndGrantOffers(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	run := b.send(t, "grants", "scale api 3")
	_, a := b.waitPending(t, "console:grants")
	c := newClient(t, b.url)
	csrf := c.signIn(adminToken)
	r := c.do("GET", "/approvals/"+a.ID, nil, nil)
	for _, want := range []string{`data-field="next">the approvers are reminded at`, `data-field="ladder"`, "after 2h0m0s: deny",
		`data-offer="task"`, "this run&#39;s later calls of scale that rule r", `data-offer="session"`,
		"console:bob&#39;s later calls of scale in console:grants", "at most 1h0m0s", `data-action="approve-grant"`} {
		if !strings.Contains(r.body, want) {
			t.Fatalf("approval page lacks %q:\n%s", want, r.body)
		}
	}
	// A bad "for" is refused on the card; nothing is decided.
	r = c.do("POST", "/approvals/"+a.ID+"/decision", url.Values{csrfField: {csrf}, "action": {"approve"}, "scope": {"session"}, "for": {"soon"}}, nil)
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, "want a duration") {
		t.Fatalf("bad for: %d %s", r.status, r.body)
	}
	r = c.do("POST", "/approvals/"+a.ID+"/decision", url.Values{csrfField: {csrf}, "action": {"approve"}, "scope": {"session"}, "for": {"20m"}}, nil)
	if r.status != http.StatusSeeOther {
		t.Fatalf("approve session for 20m: %d %s", r.status, r.body)
	}
	b.waitRun(t, run, core.RunSucceeded)
	gs, _, err := b.store.GrantList(t.Context(), approvals.GrantListParams{Tool: "scale"})
	if err != nil || len(gs) != 1 || gs[0].ExpiresAt == nil || gs[0].ExpiresAt.Sub(gs[0].At).Minutes() != 20 {
		t.Fatalf("grant: %+v %v", gs, err)
	}
	id := gs[0].ID
	r = c.do("GET", "/grants", nil, nil)
	if !strings.Contains(r.body, `id="g-`+id+`"`) || !strings.Contains(r.body, "console:bob in console:grants") || strings.Contains(r.body, "when revoked</td>") {
		t.Fatalf("grants page: %s", r.body)
	}
	if r := c.do("POST", "/grants/"+id+"/revoke", url.Values{csrfField: {csrf}}, nil); r.status != http.StatusSeeOther {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
}
