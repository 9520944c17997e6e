package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

func verifier(t *testing.T, s core.Store) AuditVerifier {
	t.Helper()
	v, ok := s.(AuditVerifier)
	if !ok {
		t.Fatalf("%T does not implement storetest.AuditVerifier (AuditVerify backs `opsgate audit verify`)", s)
	}
	return v
}

// auditReporter is implemented by stores that also report the chain's
// head with the verification (AuditVerifyReport backs `opsgate audit
// verify` and GET /api/v1/audit/verify).
type auditReporter interface {
	AuditVerifyReport(ctx context.Context) (approvals.ChainReport, error)
}

func reporter(t *testing.T, s core.Store) auditReporter {
	t.Helper()
	r, ok := s.(auditReporter)
	if !ok {
		t.Fatalf("%T does not implement AuditVerifyReport (it backs `opsgate audit verify`)", s)
	}
	return r
}

func testAuditConcurrent(t *testing.T, s core.Store) {
	// Each writer checkpoints its own run, so nothing but the audit
	// append itself serializes them.
	const writers, each = 20, 5
	var ids []string
	for w := range writers {
		ids = append(ids, queueRun(t, s, thread(fmt.Sprintf("audit-%d", w))))
	}
	var wg sync.WaitGroup
	for w := range writers {
		id := ids[w]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				entries := []approvals.AuditEntry{
					{At: t0, Kind: "test.a", Actor: fmt.Sprintf("w%d", w), RunID: id, Detail: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))},
					{At: t0, Kind: "test.b", Actor: fmt.Sprintf("w%d", w), RunID: id},
				}
				if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: id, Now: t0, Audit: entries}); err != nil {
					t.Errorf("checkpoint: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	audit := allAudit(t, s)
	if len(audit) != writers*each*2 {
		t.Fatalf("audit entries = %d, want %d", len(audit), writers*each*2)
	}
	for i, e := range audit {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d has seq %d: the chain has a gap", i, e.Seq)
		}
	}
	mustEqual(t, "VerifyChain", approvals.VerifyChain("", audit), int64(0))
	bad, err := verifier(t, s).AuditVerify(ctx(t))
	if err != nil || bad != 0 {
		t.Errorf("AuditVerify = %d, %v; want 0", bad, err)
	}
}

func testAuditTamper(t *testing.T, s core.Store) {
	id := queueRun(t, s, thread("tamper"))
	for i := range 5 {
		if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: id, Now: t0, Audit: []approvals.AuditEntry{
			{At: t0, Kind: "approval.decided", Actor: "console:bob", RunID: id, Detail: json.RawMessage(fmt.Sprintf(`{"status":"approved","i":%d}`, i))},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	v := verifier(t, s)
	if bad, err := v.AuditVerify(ctx(t)); err != nil || bad != 0 {
		t.Fatalf("AuditVerify before tampering = %d, %v; want 0", bad, err)
	}
	raw, ok := s.(RawDB)
	if !ok {
		t.Fatalf("%T does not implement storetest.RawDB; the tamper case needs raw SQL", s)
	}
	if _, err := raw.DB().ExecContext(ctx(t), `UPDATE audit SET detail = '{"status":"rejected","i":2}' WHERE seq = 3`); err != nil {
		t.Fatalf("tamper: %v", err)
	}
	bad, err := v.AuditVerify(ctx(t))
	if err != nil || bad != 3 {
		t.Errorf("AuditVerify after altering row 3 = %d, %v; want 3", bad, err)
	}
	mustEqual(t, "VerifyChain over AuditList", approvals.VerifyChain("", allAudit(t, s)), int64(3))
	// A removed row is found at its successor.
	if _, err := raw.DB().ExecContext(ctx(t), `UPDATE audit SET detail = '{"status":"approved","i":2}' WHERE seq = 3`); err != nil {
		t.Fatal(err)
	}
	if bad, err := v.AuditVerify(ctx(t)); err != nil || bad != 0 {
		t.Fatalf("AuditVerify after restoring row 3 = %d, %v; want 0", bad, err)
	}
	// The report's head is the newest entry: what an operator records.
	all := allAudit(t, s)
	rep := reporter(t, s)
	head, err := rep.AuditVerifyReport(ctx(t))
	if err != nil || !head.Intact() || head.HeadSeq != 5 || head.HeadHash != all[4].Hash || head.Problem() != "" {
		t.Fatalf("AuditVerifyReport of the intact chain = %+v, %v; want head 5 %s", head, err, all[4].Hash)
	}
	// Removing the newest entry leaves an intact, shorter chain: the chain
	// cannot see it, only the head moving back does.
	if _, err := raw.DB().ExecContext(ctx(t), `DELETE FROM audit WHERE seq = 5`); err != nil {
		t.Fatal(err)
	}
	got, err := rep.AuditVerifyReport(ctx(t))
	if err != nil || !got.Intact() || got.HeadSeq != 4 || got.HeadHash != all[3].Hash {
		t.Fatalf("AuditVerifyReport after deleting the newest row = %+v, %v; want intact, head 4", got, err)
	}
	if _, err := raw.DB().ExecContext(ctx(t), `DELETE FROM audit WHERE seq = 2`); err != nil {
		t.Fatal(err)
	}
	if bad, err := v.AuditVerify(ctx(t)); err != nil || bad != 3 {
		t.Errorf("AuditVerify after deleting row 2 = %d, %v; want 3", bad, err)
	}
	got, err = rep.AuditVerifyReport(ctx(t))
	if err != nil || got.BadSeq != 3 || got.HeadSeq != 4 || got.HeadHash != all[3].Hash {
		t.Errorf("AuditVerifyReport after deleting row 2 = %+v, %v; want bad 3, head 4", got, err)
	}
	if want := "entry 3 does not link to the entry before it: it was altered, or an entry before it was removed"; got.Problem() != want {
		t.Errorf("Problem() = %q, want %q", got.Problem(), want)
	}
}

func testAuditListFilters(t *testing.T, s core.Store) {
	id := queueRun(t, s, thread("audit-filters"))
	entries := []approvals.AuditEntry{
		{At: t0, Kind: "k", Actor: "console:bob", RunID: id, ApprovalID: "ap-1", Tool: "deploy"},
		{At: t0, Kind: "k", Actor: "console:carol", RunID: id, ApprovalID: "ap-2", Tool: "restart"},
		{At: t0, Kind: "k", Actor: "console:bob", RunID: "other-run", ApprovalID: "ap-3", Tool: "restart"},
	}
	if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: id, Now: t0, Audit: entries}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    approvals.AuditListParams
		want []int64
	}{
		{approvals.AuditListParams{}, []int64{1, 2, 3}},
		{approvals.AuditListParams{After: 1}, []int64{2, 3}},
		{approvals.AuditListParams{Limit: 1}, []int64{1}},
		{approvals.AuditListParams{Actor: "console:bob"}, []int64{1, 3}},
		{approvals.AuditListParams{Tool: "restart"}, []int64{2, 3}},
		{approvals.AuditListParams{RunID: id}, []int64{1, 2}},
		{approvals.AuditListParams{ApprovalID: "ap-2"}, []int64{2}},
		{approvals.AuditListParams{Actor: "console:bob", Tool: "restart"}, []int64{3}},
	} {
		got, err := s.AuditList(ctx(t), c.p)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for _, e := range got {
			seqs = append(seqs, e.Seq)
		}
		if fmt.Sprint(seqs) != fmt.Sprint(c.want) {
			t.Errorf("AuditList(%+v) seqs = %v, want %v", c.p, seqs, c.want)
		}
	}
	all := allAudit(t, s)
	if len(all) == 3 && (!all[0].At.Equal(t0) || all[0].At != t0) {
		t.Errorf("audit time = %v, want %v exactly", all[0].At, t0)
	}
}

// AuditKeyer is implemented by stores that key the audit chain (HMAC with
// a key kept outside the store, audit.key_file).
type AuditKeyer interface {
	SetAuditKey(key approvals.AuditKey)
	AuditAdoptKey(ctx context.Context, key approvals.AuditKey, now time.Time) error
	AuditVerifyReport(ctx context.Context) (approvals.ChainReport, error)
}

func keyer(t *testing.T, s core.Store) AuditKeyer {
	t.Helper()
	k, ok := s.(AuditKeyer)
	if !ok {
		t.Fatalf("%T does not implement storetest.AuditKeyer (the audit chain must be keyed)", s)
	}
	return k
}

var testAuditKey = approvals.AuditKey("storetest audit key, 32+ bytes long")

// auditRun appends n entries through checkpoints of one run.
func auditRun(t *testing.T, s core.Store, key string, n int) {
	t.Helper()
	id := queueRun(t, s, thread(key))
	for i := range n {
		if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: id, Now: t0, Audit: []approvals.AuditEntry{
			{At: t0, Kind: "approval.decided", Actor: "console:bob", RunID: id, Detail: json.RawMessage(fmt.Sprintf(`{"status":"approved","i":%d}`, i))},
		}}); err != nil {
			t.Fatal(err)
		}
	}
}

// reseal rewrites entries from seq from to seq to (0: the newest) with mod
// applied to the first, each re-sealed with the public (unkeyed)
// algorithm, as someone with write access to the database but not the key
// can.
func reseal(t *testing.T, s core.Store, from, to int64, mod func(*approvals.AuditEntry)) {
	t.Helper()
	raw, ok := s.(RawDB)
	if !ok {
		t.Fatalf("%T does not implement storetest.RawDB", s)
	}
	all := allAudit(t, s)
	prev := ""
	for i := range all {
		e := all[i]
		if e.Seq < from {
			prev = e.Hash
			continue
		}
		if to != 0 && e.Seq > to {
			break
		}
		if e.Seq == from {
			mod(&e)
		}
		e.Seal(e.Seq, prev)
		prev = e.Hash
		q := fmt.Sprintf(`UPDATE audit SET actor = '%s', detail = '%s', prev_hash = '%s', hash = '%s' WHERE seq = %d`,
			e.Actor, string(e.Detail), e.PrevHash, e.Hash, e.Seq)
		if _, err := raw.DB().ExecContext(ctx(t), q); err != nil {
			t.Fatalf("reseal %d: %v", e.Seq, err)
		}
	}
}

func testAuditKeyedReseal(t *testing.T, s core.Store) {
	k := keyer(t, s)
	if err := k.AuditAdoptKey(ctx(t), testAuditKey, t0); err != nil {
		t.Fatal(err)
	}
	auditRun(t, s, "keyed", 5)
	all := allAudit(t, s)
	for _, e := range all {
		if !approvals.Keyed(e.Hash) {
			t.Fatalf("entry %d sealed without the key: %s", e.Seq, e.Hash)
		}
	}
	rep, err := k.AuditVerifyReport(ctx(t))
	if err != nil || !rep.Intact() || rep.HeadSeq != 5 || rep.LegacyUntil != 0 {
		t.Fatalf("keyed chain report = %+v, %v", rep, err)
	}
	// Rewrite a decision and re-seal the chain with the public algorithm.
	reseal(t, s, 3, 0, func(e *approvals.AuditEntry) { e.Detail = json.RawMessage(`{"status":"rejected","i":2}`) })
	rep, err = k.AuditVerifyReport(ctx(t))
	if err != nil || rep.BadSeq != 3 {
		t.Fatalf("re-sealed chain report = %+v, %v; want bad 3", rep, err)
	}
}

func testAuditAdoptKey(t *testing.T, s core.Store) {
	// A chain written before opsgate had a key (read back, so a store that
	// seals after commit has sealed it).
	auditRun(t, s, "legacy", 3)
	mustEqual(t, "legacy entries", len(allAudit(t, s)), 3)
	k := keyer(t, s)
	if err := k.AuditAdoptKey(ctx(t), testAuditKey, t0); err != nil {
		t.Fatal(err)
	}
	all := allAudit(t, s)
	if len(all) != 4 || all[3].Kind != "audit.keyed" || !approvals.Keyed(all[3].Hash) || approvals.Keyed(all[2].Hash) {
		t.Fatalf("after adopting the key: %+v", all)
	}
	auditRun(t, s, "after", 1)
	rep, err := k.AuditVerifyReport(ctx(t))
	if err != nil || !rep.Intact() || rep.LegacyUntil != 3 || rep.HeadSeq != 5 || !approvals.Keyed(rep.HeadHash) {
		t.Fatalf("report = %+v, %v; want intact, legacy until 3, head 5 keyed", rep, err)
	}
	// Adopting again with the same key adds nothing; another key is refused.
	if err := k.AuditAdoptKey(ctx(t), testAuditKey, t0); err != nil || len(allAudit(t, s)) != 5 {
		t.Fatalf("second adoption: %v, %d entries", err, len(allAudit(t, s)))
	}
	if err := k.AuditAdoptKey(ctx(t), approvals.AuditKey("a different key of 32 bytes or so"), t0); err == nil {
		t.Fatal("a key the chain was not sealed with was adopted")
	}
	k.SetAuditKey(testAuditKey)
	// The legacy prefix is protected by the first keyed link.
	reseal(t, s, 2, 3, func(e *approvals.AuditEntry) { e.Actor = "console:mallory" })
	if rep, err := k.AuditVerifyReport(ctx(t)); err != nil || rep.BadSeq != 4 {
		t.Fatalf("report after rewriting a legacy entry = %+v, %v; want bad 4", rep, err)
	}
	// Rewriting a legacy entry and re-sealing everything after it without
	// the key leaves no keyed entry: the head gives it away.
	reseal(t, s, 2, 0, func(e *approvals.AuditEntry) { e.Actor = "console:mallory" })
	rep, err = k.AuditVerifyReport(ctx(t))
	if err != nil || rep.Intact() || !rep.UnkeyedHead || rep.Problem() == "" {
		t.Fatalf("report after re-sealing the whole chain without the key = %+v, %v; want not intact", rep, err)
	}
}

// testAuditRefusesAnotherKey: a process sealing with another key (a
// replica configured differently) must not fork the chain: its appends
// fail (or, sealed after commit, stay pending) until a sealer with the
// chain's key seals them.
func testAuditRefusesAnotherKey(t *testing.T, s core.Store) {
	k := keyer(t, s)
	k.SetAuditKey(testAuditKey)
	auditRun(t, s, "key-a", 2)
	mustEqual(t, "entries", len(allAudit(t, s)), 2)
	other := approvals.AuditKey("a second, different key of 32+ bytes")
	k.SetAuditKey(other)
	id := queueRun(t, s, thread("key-b"))
	_ = s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: id, Now: t0, Audit: []approvals.AuditEntry{{At: t0, Kind: "k", Actor: "x", RunID: id}}})
	// The append may fail, or stay pending, or be sealed under the chain's
	// key by a sealer pass that began before the switch; what must never
	// happen is an entry sealed under the other key.
	_, _ = k.AuditVerifyReport(ctx(t))
	k.SetAuditKey(testAuditKey)
	rep, err := k.AuditVerifyReport(ctx(t))
	if err != nil || !rep.Intact() {
		t.Fatalf("chain after the refused append = %+v, %v", rep, err)
	}
	for _, e := range allAudit(t, s) {
		if e.VerifyHash(other) {
			t.Fatalf("entry %d was sealed under another key", e.Seq)
		}
		if !e.VerifyHash(testAuditKey) {
			t.Fatalf("entry %d does not verify under the chain's key", e.Seq)
		}
	}
}
