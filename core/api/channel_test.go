package api

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// decideWithChannel posts an approve decision with ChannelHeader set to
// label ("" for none).
func decideWithChannel(t *testing.T, b *bundle, id, token, label string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", b.url+"/api/v1/approvals/"+id+"/decision", strings.NewReader(`{"action":"approve"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if label != "" {
		req.Header.Set(ChannelHeader, label)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("body %q: %v", raw, err)
	}
	return res.StatusCode, body
}

// TestChannelLabel: the TUI's decisions are recorded with channel "tui";
// without the header they are "api"; any other label is refused before
// anything is recorded, so the header can only name the API's own
// surfaces and never grants or impersonates anything.
func TestChannelLabel(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) {
		o.Tokens = append(o.Tokens, Token{Name: "reader", Token: "reader-token", Actor: "console:admin", Scopes: []core.Scope{core.ScopeRead}})
	})
	for _, id := range []string{"a1", "a2", "a3", "a4"} {
		addApproval(b, id, nil)
	}
	channelOf := func(t *testing.T, id string) []string {
		t.Helper()
		a, err := b.st.ApprovalGet(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range a.Decisions {
			out = append(out, d.Channel)
		}
		return out
	}
	t.Run("TUIRecordedAsTUI", func(t *testing.T) {
		if st, body := decideWithChannel(t, b, "a1", adminToken, TUIChannel); st != 200 {
			t.Fatalf("status %d: %v", st, body)
		}
		if got := channelOf(t, "a1"); len(got) != 1 || got[0] != "tui" {
			t.Fatalf("channels %v", got)
		}
	})
	t.Run("NoHeaderIsAPI", func(t *testing.T) {
		if st, body := decideWithChannel(t, b, "a2", adminToken, ""); st != 200 {
			t.Fatalf("status %d: %v", st, body)
		}
		if got := channelOf(t, "a2"); len(got) != 1 || got[0] != "api" {
			t.Fatalf("channels %v", got)
		}
	})
	for _, label := range []string{"slack", "console", "email", "TUI", "api,tui"} {
		t.Run("Refuses/"+label, func(t *testing.T) {
			st, body := decideWithChannel(t, b, "a3", adminToken, label)
			e, _ := body["error"].(map[string]any)
			if st != 422 || e["field"] != ChannelHeader {
				t.Fatalf("status %d, body %v", st, body)
			}
			if got := channelOf(t, "a3"); len(got) != 0 {
				t.Fatalf("a refused label recorded a decision: %v", got)
			}
		})
	}
	t.Run("GrantsNothing", func(t *testing.T) {
		// A token without decide is refused with the label as without it
		// (its actor is an eligible approver; the scope is what is missing).
		st, body := decideWithChannel(t, b, "a4", "reader-token", TUIChannel)
		if e, _ := body["error"].(map[string]any); st != 403 || e["code"] != string(core.DecisionHumanRequired) {
			t.Fatalf("status %d, body %v", st, body)
		}
		if got := channelOf(t, "a4"); len(got) != 0 {
			t.Fatalf("decisions %v", got)
		}
	})
}

// The TUI's label and the audit list's order and kind go through the same
// authority as every other request: the label lets no agent, token without
// decide or non-approver decide, and an agent token confined to its own
// runs reads no audit log newest first or by kind either.
func TestAttack_TUILabelAndAuditOrderPassTheAuthority(t *testing.T) {
	t.Parallel()
	const daveToken = "dave-token"
	b := setup(t, func(o *Options) {
		o.Tokens = append(o.Tokens,
			Token{Name: "claude", Token: agentToken, Actor: "agent:claude"},
			Token{Name: "dave", Token: daveToken, Actor: "console:dave", Scopes: []core.Scope{core.ScopeRead, core.ScopeDecide}})
	})
	addApproval(b, "a-own", func(a *approvals.Approval) {
		a.Requester, a.Eligible = "agent:claude", []string{"console:admin", "console:bob", "agent:claude"}
	})
	addApproval(b, "a-other", nil)
	for _, c := range []struct{ id, token, code string }{
		{"a-own", agentToken, string(core.DecisionHumanRequired)},
		{"a-other", daveToken, string(core.DecisionNotApprover)},
	} {
		st, body := decideWithChannel(t, b, c.id, c.token, TUIChannel)
		if e, _ := body["error"].(map[string]any); st != 403 || e["code"] != c.code {
			t.Fatalf("%s by %s with the tui label: %d %v, want 403 %s", c.id, c.token, st, body, c.code)
		}
	}
	if st, body := decideWithChannel(t, b, "a-other", agentToken, TUIChannel); st == 200 {
		t.Fatalf("the agent decided another's approval with the tui label: %v", body)
	}
	for _, id := range []string{"a-own", "a-other"} {
		if a, _ := b.st.ApprovalGet(t.Context(), id); a.Status != approvals.StatusPending || len(a.Decisions) != 0 {
			t.Fatalf("%s changed: %+v", id, a)
		}
	}
	for _, q := range []string{"?order=newest", "?kind=approval.decided", "?order=newest&kind=approval.requested&limit=5"} {
		want(t, b.do(t, "GET", "/api/v1/audit"+q, agentToken, nil), 403, "forbidden")
		want(t, b.do(t, "GET", "/api/v1/audit"+q, daveToken, nil), 200, "")
	}
}
