package approvals

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// AuditKind says what an audit entry records.
type AuditKind string

// The audit kinds opsgate writes. Stores keep any kind; these are the ones
// the engine and Decide produce and readers branch on.
const (
	AuditApprovalRequested AuditKind = "approval.requested"
	AuditApprovalDecided   AuditKind = "approval.decided"
	AuditApprovalRefused   AuditKind = "approval.refused"
	AuditApprovalExpired   AuditKind = "approval.expired"
	AuditRunCancelled      AuditKind = "run.cancelled"
	AuditRunRedispatched   AuditKind = "run.redispatched"
	AuditRunInterrupted    AuditKind = "run.interrupted"
	AuditGrantApplied      AuditKind = "grant.applied"
	AuditPolicyDenied      AuditKind = "policy.denied"
)

// Valid reports whether k is one of the kinds above.
func (k AuditKind) Valid() bool {
	switch k {
	case AuditApprovalRequested, AuditApprovalDecided, AuditApprovalRefused, AuditApprovalExpired,
		AuditRunCancelled, AuditRunRedispatched, AuditRunInterrupted, AuditGrantApplied, AuditPolicyDenied:
		return true
	}
	return false
}

// AuditEntry is one line of the append-only decision log. Each entry
// carries the SHA-256 of the previous one, so altering a row, or deleting
// one before the newest, breaks the chain at the next row and `opsgate
// audit verify` names it. Deleting the newest rows leaves a shorter chain
// that is still intact: only a head recorded elsewhere (ChainReport's
// HeadSeq and HeadHash) shows that.
type AuditEntry struct {
	Seq        int64           `json:"seq"`
	At         time.Time       `json:"at"`
	Kind       AuditKind       `json:"kind"`
	Actor      string          `json:"actor"`
	RunID      string          `json:"run_id,omitempty"`
	ApprovalID string          `json:"approval_id,omitempty"`
	Tool       string          `json:"tool,omitempty"`
	Detail     json.RawMessage `json:"detail,omitempty"`
	PrevHash   string          `json:"prev_hash"`
	Hash       string          `json:"hash"`
}

// Seal sets the entry's sequence, previous hash and own hash. Stores call it
// inside the appending transaction, after reading the last entry. Times are
// truncated to microseconds, the precision both stores keep.
func (e *AuditEntry) Seal(seq int64, prevHash string) {
	e.Seq = seq
	e.At = e.At.UTC().Truncate(time.Microsecond)
	e.PrevHash = prevHash
	e.Hash = e.computeHash()
}

func (e *AuditEntry) computeHash() string {
	// The hashed form is fixed-order JSON of every field but Hash itself.
	b, err := json.Marshal(struct {
		Seq        int64           `json:"seq"`
		At         string          `json:"at"`
		Kind       string          `json:"kind"`
		Actor      string          `json:"actor"`
		RunID      string          `json:"run_id"`
		ApprovalID string          `json:"approval_id"`
		Tool       string          `json:"tool"`
		Detail     json.RawMessage `json:"detail"`
		PrevHash   string          `json:"prev_hash"`
	}{e.Seq, e.At.UTC().Format(time.RFC3339Nano), string(e.Kind), e.Actor, e.RunID, e.ApprovalID, e.Tool, e.detail(), e.PrevHash})
	if err != nil {
		panic("approvals: audit hash: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// detail is the hashed form of Detail. A Detail that is not valid JSON
// (only a hand-edited row or a buggy caller can make one) is hashed as a
// JSON string of its bytes, so sealing and verifying never panic on a row
// they cannot control, and an altered row still fails verification.
func (e *AuditEntry) detail() json.RawMessage {
	if len(e.Detail) == 0 {
		return json.RawMessage("null")
	}
	if !json.Valid(e.Detail) {
		b, _ := json.Marshal(string(e.Detail)) // marshalling a string cannot fail
		return b
	}
	return e.Detail
}

// VerifyChain checks entries in sequence order, continuing from prevHash
// (empty for the first entry ever). It returns the sequence number of the
// first entry that was altered, reordered or whose predecessor was removed,
// or 0 when the chain is intact.
func VerifyChain(prevHash string, entries []AuditEntry) (badSeq int64) {
	for i := range entries {
		e := &entries[i]
		if e.PrevHash != prevHash || e.computeHash() != e.Hash {
			return e.Seq
		}
		prevHash = e.Hash
	}
	return 0
}

// ChainReport is what verifying the whole audit chain found: the first
// entry that does not link (0 when the chain is intact) and the chain's
// head, its newest entry. A hash chain cannot know its own end, so the
// head is reported for operators to record outside the database: a head
// that moves backwards, or whose hash changes at the same seq, means the
// newest entries were removed or rewritten.
type ChainReport struct {
	BadSeq   int64  `json:"first_bad_seq"`
	HeadSeq  int64  `json:"head_seq"`
	HeadHash string `json:"head_hash"`
}

// Intact reports whether every entry links to the one before it.
func (r ChainReport) Intact() bool { return r.BadSeq == 0 }

// Problem says what a broken link means, for the CLI and the API; "" when
// the chain is intact. A link breaks at entry N when N itself was altered
// or when an entry before it was removed (or altered), and the chain
// cannot tell which, so the message names both.
func (r ChainReport) Problem() string {
	if r.Intact() {
		return ""
	}
	return fmt.Sprintf("entry %d does not link to the entry before it: it was altered, or an entry before it was removed", r.BadSeq)
}

func detailJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
