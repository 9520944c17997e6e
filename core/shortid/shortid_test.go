package shortid

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
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

// listStore is a Store over fixed lists, filtered and paged as the stores
// filter and page (the cursor is an offset into the matches).
type listStore struct {
	runs []*core.Run
	aps  []*approvals.Approval
	err  error
}

func pageOf[T any](items []T, id func(T) string, prefix, cursor string, limit int) ([]T, string) {
	var match []T
	for _, it := range items {
		if Matches(id(it), prefix) {
			match = append(match, it)
		}
	}
	from, _ := strconv.Atoi(cursor)
	match = match[min(from, len(match)):]
	if len(match) > limit {
		return match[:limit], strconv.Itoa(from + limit)
	}
	return match, ""
}

func (l listStore) RunList(_ context.Context, p core.RunListParams) ([]*core.Run, string, error) {
	out, next := pageOf(l.runs, func(r *core.Run) string { return r.ID }, p.IDPrefix, p.Cursor, p.Limit)
	return out, next, l.err
}

func (l listStore) ApprovalList(_ context.Context, p approvals.ApprovalListParams) ([]*approvals.Approval, string, error) {
	out, next := pageOf(l.aps, func(a *approvals.Approval) string { return a.ID }, p.IDPrefix, p.Cursor, p.Limit)
	return out, next, l.err
}

// seeOnly is a Visible that keeps the ids in it; a nil seeOnly keeps all.
type seeOnly map[string]bool

func (v seeOnly) Runs(_ context.Context, runs []*core.Run) ([]*core.Run, error) {
	return slices.DeleteFunc(slices.Clone(runs), func(r *core.Run) bool { return v != nil && !v[r.ID] }), nil
}

func (v seeOnly) Approvals(_ context.Context, as []*approvals.Approval) ([]*approvals.Approval, error) {
	return slices.DeleteFunc(slices.Clone(as), func(a *approvals.Approval) bool { return v != nil && !v[a.ID] }), nil
}

func TestFind(t *testing.T) {
	t.Parallel()
	ts := "01a2504f-1111-7000-8000-"
	st := listStore{runs: []*core.Run{{ID: ts + "3f9a2c000001", Flow: "deploy"}}}
	for i := range 12 {
		st.aps = append(st.aps, &approvals.Approval{ID: fmt.Sprintf("%s77aa%08d", ts, i), Tool: "deploy", Status: approvals.StatusPending})
	}
	ctx := t.Context()
	var seeAll seeOnly
	if id, err := Find(ctx, st, seeAll, KindRun, "3f9a2c0"); err != nil || id != ts+"3f9a2c000001" {
		t.Fatalf("run: %q %v", id, err)
	}
	if id, err := Find(ctx, st, seeAll, KindApproval, "3f9a2c0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a run's id as an approval's: %q %v", id, err)
	}
	var ae *AmbiguousError
	if _, err := Find(ctx, st, seeAll, KindApproval, "77aa"); !errors.As(err, &ae) || len(ae.Matches) != MaxListed || !ae.More ||
		!strings.Contains(err.Error(), "deploy, pending") {
		t.Fatalf("ambiguous: %v", err)
	}
	whole := ts + "77aa00000003"
	if id, err := Find(ctx, st, seeAll, KindApproval, whole); err != nil || id != whole {
		t.Fatalf("whole id: %q %v", id, err)
	}
	if id, err := Find(ctx, st, seeAll, KindRun, "no such id!"); err != nil || id != "no such id!" {
		t.Fatalf("not an id: %q %v", id, err)
	}
	if _, err := Find(ctx, st, seeAll, "grant", "77aa"); err == nil {
		t.Fatal("unknown kind accepted")
	}
	boom := errors.New("store down")
	if _, err := Find(ctx, listStore{err: boom}, seeAll, KindRun, "3f9a"); !errors.Is(err, boom) {
		t.Fatalf("store error: %v", err)
	}
}

// TestFindLooksOnlyAmongVisible: what the caller may not see is no
// candidate. A short id that names one visible approval and many hidden
// ones names the visible one; the hidden ones are never listed, even when
// they outnumber a page of the store; one that names only hidden ids is
// not found; without a judge of what is visible Find refuses.
func TestFindLooksOnlyAmongVisible(t *testing.T) {
	t.Parallel()
	ts := "01a2504f-1111-7000-8000-"
	var st listStore
	for i := range 3 * findPage {
		st.aps = append(st.aps, &approvals.Approval{ID: fmt.Sprintf("%s77aa%08d", ts, i), Tool: "deploy"})
	}
	mine := st.aps[2*findPage+5].ID // past two pages of others' approvals
	other := st.aps[3].ID
	ctx := t.Context()
	if id, err := Find(ctx, st, seeOnly{mine: true}, KindApproval, "77aa"); err != nil || id != mine {
		t.Fatalf("one visible among hidden: %q %v", id, err)
	}
	var ae *AmbiguousError
	_, err := Find(ctx, st, seeOnly{mine: true, other: true}, KindApproval, "77aa")
	if !errors.As(err, &ae) || len(ae.Matches) != 2 || ae.More {
		t.Fatalf("two visible: %v", err)
	}
	for _, a := range st.aps {
		if a.ID != mine && a.ID != other && strings.Contains(err.Error(), a.ID) {
			t.Fatalf("the ambiguity lists a hidden approval %s:\n%v", a.ID, err)
		}
	}
	if id, err := Find(ctx, st, seeOnly{}, KindApproval, "77aa"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("only hidden matches: %q %v", id, err)
	}
	if _, err := Find(ctx, st, nil, KindApproval, "77aa"); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("no Visible: %v", err)
	}
	// Beyond the bounded read, one visible match is not called unique.
	var many listStore
	for i := range findPages*findPage + 1 {
		many.runs = append(many.runs, &core.Run{ID: fmt.Sprintf("%s88bb%08d", ts, i), Flow: "deploy"})
	}
	first := many.runs[0].ID
	if _, err := Find(ctx, many, seeOnly{first: true}, KindRun, "88bb"); !errors.As(err, &ae) || len(ae.Matches) != 1 || !ae.More {
		t.Fatalf("one visible before an unread rest: %v", err)
	}
}
