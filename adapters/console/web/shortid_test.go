package web

import (
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core/shortid"
)

// TestShortIDsOpenPages: /runs/{id} and /approvals/{id} take the short id
// shown (a prefix of the id's random part) and redirect to the page; one
// that names several is refused with the list; the run page shows the run
// and its card with different short ids.
func TestShortIDsOpenPages(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := newClient(t, b.url)
	c.signIn(adminToken)
	b.send(t, "short-1", "deploy api 1.2.3")
	run, ap := b.waitPending(t, "console:short-1")
	b.send(t, "short-2", "deploy api 1.2.4")
	run2, _ := b.waitPending(t, "console:short-2")

	for _, tc := range []struct{ path, want string }{
		{"/runs/" + shortid.Of(run.ID), "/runs/" + run.ID},
		{"/approvals/" + shortid.Of(ap.ID), "/approvals/" + ap.ID},
	} {
		r := c.do("GET", tc.path, nil, nil)
		if r.status != 303 || r.header.Get("Location") != tc.want {
			t.Fatalf("GET %s: %d → %q, want 303 → %s", tc.path, r.status, r.header.Get("Location"), tc.want)
		}
	}
	// The first four digits of the timestamp name both runs.
	r := c.do("GET", "/runs/"+run.ID[:4], nil, nil)
	if r.status != 409 || !strings.Contains(r.body, "is ambiguous") || !strings.Contains(r.body, run.ID) || !strings.Contains(r.body, run2.ID) {
		t.Fatalf("ambiguous: %d %s", r.status, r.body)
	}
	if r := c.do("GET", "/runs/ffff0000", nil, nil); r.status != 404 {
		t.Fatalf("names nothing: %d", r.status)
	}
	page := c.do("GET", "/runs/"+run.ID, nil, nil).body
	if !strings.Contains(page, shortid.Of(run.ID)) || shortid.Of(run.ID) == shortid.Of(ap.ID) {
		t.Fatalf("run page short ids: run %s card %s", shortid.Of(run.ID), shortid.Of(ap.ID))
	}
	if strings.Contains(page, ">"+run.ID[:8]+"…") {
		t.Fatalf("the run page shows the timestamp as the id")
	}
}
