package approvals

import (
	"encoding/json"
	"testing"
	"time"
)

func chain(n int) []AuditEntry {
	var out []AuditEntry
	prev := ""
	for i := 0; i < n; i++ {
		e := AuditEntry{At: t0.Add(time.Duration(i) * time.Second), Kind: "approval.decided", Actor: "slack:U1",
			ApprovalID: "ap1", Detail: json.RawMessage(`{"action":"approve"}`)}
		e.Seal(int64(i+1), prev)
		prev = e.Hash
		out = append(out, e)
	}
	return out
}

func TestVerifyChain(t *testing.T) {
	t.Parallel()
	if bad := VerifyChain("", chain(5)); bad != 0 {
		t.Fatalf("intact chain reported bad at %d", bad)
	}
	cases := map[string]func([]AuditEntry) []AuditEntry{
		"AlteredDetail": func(c []AuditEntry) []AuditEntry { c[2].Detail = json.RawMessage(`{"action":"reject"}`); return c },
		"AlteredActor":  func(c []AuditEntry) []AuditEntry { c[2].Actor = "slack:U2"; return c },
		"AlteredTime":   func(c []AuditEntry) []AuditEntry { c[2].At = c[2].At.Add(time.Second); return c },
		"Deleted":       func(c []AuditEntry) []AuditEntry { return append(c[:2], c[3:]...) },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			c := mutate(chain(5))
			want := int64(3)
			if name == "Deleted" {
				want = 4 // the entry after the gap no longer links
			}
			if bad := VerifyChain("", c); bad != want {
				t.Fatalf("first bad = %d, want %d", bad, want)
			}
		})
	}
}

func TestChainReportProblemNamesAlterationAndRemoval(t *testing.T) {
	if p := (ChainReport{HeadSeq: 9, HeadHash: "ab"}).Problem(); p != "" {
		t.Fatalf("intact chain has problem %q", p)
	}
	r := ChainReport{BadSeq: 8, HeadSeq: 9}
	want := "entry 8 does not link to the entry before it: it was altered, or an entry before it was removed"
	if r.Intact() || r.Problem() != want {
		t.Fatalf("Problem() = %q (intact %v), want %q", r.Problem(), r.Intact(), want)
	}
}

// A row whose detail is not JSON (a hand edit) neither panics the sealer
// nor verifies as intact once changed.
func TestSealInvalidDetailDoesNotPanic(t *testing.T) {
	t.Parallel()
	e := AuditEntry{At: t0, Kind: "approval.decided", Actor: "x", Detail: json.RawMessage("not json")}
	e.Seal(1, "")
	if e.Hash == "" || VerifyChain("", []AuditEntry{e}) != 0 {
		t.Fatalf("sealed invalid detail: %+v", e)
	}
	e.Detail = json.RawMessage("not json either")
	if VerifyChain("", []AuditEntry{e}) != 1 {
		t.Fatal("an altered invalid detail must fail verification")
	}
}
