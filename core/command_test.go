package core

import "testing"

func TestParseApproveAll(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]struct {
		ref string
		ok  bool
	}{
		"approve all":                {"", true},
		"Approve All":                {"", true},
		"  approve   all  ABCD.  ":   {"ABCD", true},
		"approve all 0190-ab_cd":     {"0190-ab_cd", true},
		"approve all `0190`":         {"0190", true},
		"approve":                    {"", false},
		"approve ABCD":               {"", false},
		"approve all of them please": {"", false},
		"approve allx":               {"", false},
		"reject all":                 {"", false},
		"approve all <>":             {"", false},
		"":                           {"", false},
	} {
		ref, ok := ParseApproveAll(in)
		if ref != want.ref || ok != want.ok {
			t.Errorf("ParseApproveAll(%q) = %q, %v; want %q, %v", in, ref, ok, want.ref, want.ok)
		}
	}
	if ref, ok := ParseApproveAll(ApproveAllCommand("ap-1")); !ok || ref != "ap-1" {
		t.Errorf("the command a card shows does not parse back: %q %v", ref, ok)
	}
}

func FuzzParseApproveAll(f *testing.F) {
	f.Add("approve all ABCD")
	f.Add("APPROVE ALL")
	f.Fuzz(func(t *testing.T, s string) {
		ref, ok := ParseApproveAll(s)
		if !ok && ref != "" {
			t.Fatalf("not a command but ref %q", ref)
		}
		if ok && ref != "" {
			if r2, ok2 := ParseApproveAll(ApproveAllCommand(ref)); !ok2 || r2 != ref {
				t.Fatalf("ref %q does not round-trip: %q %v", ref, r2, ok2)
			}
		}
	})
}
