package shortid

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// v7 makes n UUIDv7 ids in a row: the same millisecond for most of them,
// so they share their leading timestamp digits, as a run and its card do.
func v7(t *testing.T, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		u, err := uuid.NewV7()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = u.String()
	}
	return out
}

func TestTimestampCollisionsResolved(t *testing.T) {
	t.Parallel()
	ids := v7(t, 50)
	if ids[0][:8] != ids[1][:8] {
		t.Logf("the first two ids did not share a millisecond prefix: %s %s", ids[0], ids[1])
	}
	short := Shortest(ids...)
	seen := map[string]string{}
	for _, id := range ids {
		s := short[id]
		if len(s) < MinLen || !strings.HasPrefix(id[24:], s) {
			t.Fatalf("short form %q of %s: want ≥%d characters of its random part", s, id, MinLen)
		}
		if other, dup := seen[s]; dup {
			t.Fatalf("%s and %s both show as %q", other, id, s)
		}
		seen[s] = id
		got, err := Resolve(s, cands(ids...))
		if err != nil || got.ID != id {
			t.Fatalf("Resolve(%q) = %v, %v; want %s", s, got.ID, err, id)
		}
	}
	// The old git-style prefix of a timestamp names them all: ambiguous.
	if _, err := Resolve(ids[0][:8], cands(ids[:2]...)); ids[0][:8] == ids[1][:8] && !isAmbiguous(err) {
		t.Fatalf("a shared timestamp prefix resolved: %v", err)
	}
}

func cands(ids ...string) []Candidate {
	out := make([]Candidate, len(ids))
	for i, id := range ids {
		out[i] = Candidate{Kind: "run", ID: id}
	}
	return out
}

func isAmbiguous(err error) bool {
	var ae *AmbiguousError
	return errors.As(err, &ae)
}

func TestShortestGrowsWhereTailsShareCharacters(t *testing.T) {
	t.Parallel()
	a := "01a2504f-1111-7000-8000-abcdef012345"
	b := "01a2504f-2222-7000-8000-abcdef019999"
	c := "01a2504f-3333-7000-8000-123456789abc"
	short := Shortest(a, b, c, a)
	if short[a] != "abcdef012" || short[b] != "abcdef019" || short[c] != "1234567" {
		t.Fatalf("short forms %v", short)
	}
	if Of(a) != "abcdef0" {
		t.Fatalf("Of = %q", Of(a))
	}
	// A random part that begins like another id's timestamp grows past it.
	d := "01a2504f-4444-7000-8000-01a2504f9999"
	if s := Shortest(a, d)[d]; s != "01a2504f9" {
		t.Fatalf("short form %q also names %s", s, a)
	}
	// Ids of another shape are their own short form, or whole.
	if s := Shortest("run-1", "run-10"); s["run-1"] != "run-1" || s["run-10"] != "run-10" {
		t.Fatalf("non-UUID ids: %v", s)
	}
}

func TestMatches(t *testing.T) {
	t.Parallel()
	id := "01a2504f-1111-7000-8000-abcdef012345"
	for typed, want := range map[string]bool{
		id: true, "01a2504f": true, "0": true, // prefixes of the whole id
		"abcdef0": true, "abcd": true, "abcdef012345": true, // the random part
		"abc": false, "bcdef0": false, "abcdef0123456": false, "ABCDEF0": false, "": false,
	} {
		if got := Matches(id, typed); got != want {
			t.Errorf("Matches(%q) = %v, want %v", typed, got, want)
		}
	}
	if Matches("run-abcdef", "abcd") {
		t.Error("the random-part rule applied to an id that is not a UUID")
	}
}

func TestAmbiguousPrefixRefusedWithAList(t *testing.T) {
	t.Parallel()
	run := Candidate{Kind: "run", ID: "01a2504f-1111-7000-8000-abcdef012345", Summary: "deploy, succeeded"}
	card := Candidate{Kind: "approval", ID: "01a2504f-1112-7000-8000-abcd99999999", Summary: "deploy, approved"}
	_, err := Resolve("abcd", []Candidate{run, card})
	var ae *AmbiguousError
	if !errors.As(err, &ae) || len(ae.Matches) != 2 {
		t.Fatalf("err %v", err)
	}
	msg := err.Error()
	for _, want := range []string{`"abcd" is ambiguous`, "run", run.ID, "abcdef0", "deploy, succeeded", "approval", card.ID, "abcd999", "type more"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("message lacks %q:\n%s", want, msg)
		}
	}
	if got, err := Resolve("abcde", []Candidate{run, card}); err != nil || got != run {
		t.Fatalf("abcde: %v %v", got, err)
	}
	if _, err := Resolve("ffff", []Candidate{run, card}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no match: %v", err)
	}
	many := make([]Candidate, 0, 20)
	for i := range 20 {
		many = append(many, Candidate{Kind: "run", ID: "01a2504f-1111-7000-8000-abcd" + strings.Repeat("0", 6) + string(rune('a'+i%6)) + string(rune('a'+i/6))})
	}
	if _, err := Resolve("abcd", many); !errors.As(err, &ae) || len(ae.Matches) != MaxListed || !ae.More || !strings.Contains(err.Error(), "… and more") {
		t.Fatalf("20 matches: %v", err)
	}
}

func TestValid(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"abcdef0": true, "01a2504f-1111": true, "": false, "ab_c": false, "ab%": false,
		strings.Repeat("a", 37): false, "run-1": true} {
		if Valid(s) != want {
			t.Errorf("Valid(%q) = %v", s, !want)
		}
	}
}

// TestPropertyShortFormsNameTheirID: for any set of ids (UUIDs drawn
// with shared prefixes, and other shapes), every short form is unique in
// the set and resolves back to its id.
func TestPropertyShortFormsNameTheirID(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		hex := rapid.StringMatching(`[0-9a-f]{1,12}`)
		n := rapid.IntRange(1, 40).Draw(t, "n")
		base := rapid.StringMatching(`[0-9a-f]{12}`).Draw(t, "base")
		var ids []string
		seen := map[string]bool{}
		add := func(id string) {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		for i := range n {
			tail := hex.Draw(t, "tail")
			tail = (tail + base)[:12]
			// Two timestamps, so the same random part can come twice.
			add(rapid.SampledFrom([]string{"01a2504f-1111", "01a2504f-1112"}).Draw(t, "time") + "-7000-8000-" + tail)
			if i%7 == 3 {
				add(rapid.StringMatching(`[a-z]{1,4}-[0-9]{1,3}`).Draw(t, "other"))
			}
		}
		short := Shortest(ids...)
		shown := map[string]string{}
		for _, id := range ids {
			s := short[id]
			if other, dup := shown[s]; dup {
				t.Fatalf("%s and %s both show as %q", other, id, s)
			}
			shown[s] = id
			got, err := Resolve(s, cands(ids...))
			if err != nil || got.ID != id {
				t.Fatalf("Resolve(%q) = %q, %v; want %s (ids %v)", s, got.ID, err, id, ids)
			}
		}
	})
}

// listStore is a Store over fixed lists, filtered as the stores filter.
type listStore struct {
	runs []*core.Run
	aps  []*approvals.Approval
	err  error
}

func (l listStore) RunList(_ context.Context, p core.RunListParams) ([]*core.Run, string, error) {
	var out []*core.Run
	for _, r := range l.runs {
		if Matches(r.ID, p.IDPrefix) && len(out) < p.Limit {
			out = append(out, r)
		}
	}
	return out, "", l.err
}

func (l listStore) ApprovalList(_ context.Context, p approvals.ApprovalListParams) ([]*approvals.Approval, string, error) {
	var out []*approvals.Approval
	for _, a := range l.aps {
		if Matches(a.ID, p.IDPrefix) && len(out) < p.Limit {
			out = append(out, a)
		}
	}
	return out, "", l.err
}

func TestFind(t *testing.T) {
	t.Parallel()
	ts := "01a2504f-1111-7000-8000-"
	st := listStore{runs: []*core.Run{{ID: ts + "3f9a2c000001", Flow: "deploy"}}}
	for i := range 12 {
		st.aps = append(st.aps, &approvals.Approval{ID: fmt.Sprintf("%s77aa%08d", ts, i), Tool: "deploy", Status: approvals.StatusPending})
	}
	ctx := t.Context()
	if id, err := Find(ctx, st, KindRun, "3f9a2c0"); err != nil || id != ts+"3f9a2c000001" {
		t.Fatalf("run: %q %v", id, err)
	}
	if id, err := Find(ctx, st, KindApproval, "3f9a2c0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a run's id as an approval's: %q %v", id, err)
	}
	var ae *AmbiguousError
	if _, err := Find(ctx, st, KindApproval, "77aa"); !errors.As(err, &ae) || len(ae.Matches) != MaxListed || !ae.More ||
		!strings.Contains(err.Error(), "deploy, pending") {
		t.Fatalf("ambiguous: %v", err)
	}
	whole := ts + "77aa00000003"
	if id, err := Find(ctx, st, KindApproval, whole); err != nil || id != whole {
		t.Fatalf("whole id: %q %v", id, err)
	}
	if id, err := Find(ctx, st, KindRun, "no such id!"); err != nil || id != "no such id!" {
		t.Fatalf("not an id: %q %v", id, err)
	}
	if _, err := Find(ctx, st, "grant", "77aa"); err == nil {
		t.Fatal("unknown kind accepted")
	}
	boom := errors.New("store down")
	if _, err := Find(ctx, listStore{err: boom}, KindRun, "3f9a"); !errors.Is(err, boom) {
		t.Fatalf("store error: %v", err)
	}
}
