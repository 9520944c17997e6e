package approvals

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
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
	// AuditApprovalEscalated: a step of an escalation ladder fired
	// (escalation.go).
	AuditApprovalEscalated AuditKind = "approval.escalated"
	// AuditApprovalDelegated: an approver handed a pending approval to a
	// person or group (Delegate).
	AuditApprovalDelegated AuditKind = "approval.delegated"
	AuditRunCancelled      AuditKind = "run.cancelled"
	AuditRunRedispatched   AuditKind = "run.redispatched"
	AuditRunInterrupted    AuditKind = "run.interrupted"
	AuditGrantApplied      AuditKind = "grant.applied"
	AuditGrantCreated      AuditKind = "grant.created"
	AuditGrantRevoked      AuditKind = "grant.revoked"
	AuditPolicyDenied      AuditKind = "policy.denied"
	// AuditDispatchRefused: a decided call the gate would not dispatch —
	// its arguments no longer match the digest its deciders saw, or the
	// live configuration no longer lets its deciders approve it.
	AuditDispatchRefused AuditKind = "dispatch.refused"
	AuditRequestRefused  AuditKind = "request.refused"
	AuditConfigReloaded  AuditKind = "config.reloaded"
	AuditConfigRefused   AuditKind = "config.reload_refused"
	AuditKeyed           AuditKind = "audit.keyed"
	// Agent tasks (agent_task steps an external agent performs over MCP).
	AuditAgentCallRequested AuditKind = "agent_call.requested"
	AuditAgentCallClaimed   AuditKind = "agent_call.claimed"
	AuditAgentCallCompleted AuditKind = "agent_call.completed"
	AuditAgentCallFailed    AuditKind = "agent_call.failed"
	// Schedules (core/schedule): what people did to one; the ticks
	// themselves are runs with requester "schedule:<name>".
	AuditSchedulePaused  AuditKind = "schedule.paused"
	AuditScheduleResumed AuditKind = "schedule.resumed"
	AuditScheduleRun     AuditKind = "schedule.run"
)

// Valid reports whether k is one of the kinds above.
func (k AuditKind) Valid() bool {
	switch k {
	case AuditApprovalRequested, AuditApprovalDecided, AuditApprovalRefused, AuditApprovalExpired, AuditApprovalEscalated, AuditApprovalDelegated,
		AuditRunCancelled, AuditRunRedispatched, AuditRunInterrupted, AuditGrantApplied, AuditGrantCreated,
		AuditGrantRevoked, AuditPolicyDenied, AuditDispatchRefused, AuditRequestRefused, AuditConfigReloaded, AuditConfigRefused, AuditKeyed,
		AuditAgentCallRequested, AuditAgentCallClaimed, AuditAgentCallCompleted, AuditAgentCallFailed,
		AuditSchedulePaused, AuditScheduleResumed, AuditScheduleRun:
		return true
	}
	return false
}

// NewAuditEntry builds an entry stamped at; detail is encoded as JSON (an
// unencodable detail is left out). The store seals it into the chain.
func NewAuditEntry(at time.Time, kind AuditKind, actor, runID, approvalID, tool string, detail any) AuditEntry {
	ae := AuditEntry{At: at, Kind: kind, Actor: actor, RunID: runID, ApprovalID: approvalID, Tool: tool}
	if detail != nil {
		if b, err := json.Marshal(detail); err == nil {
			ae.Detail = b
		}
	}
	return ae
}

// AuditEntry is one line of the append-only decision log. Each entry
// carries the hash of the previous one, so altering a row, or deleting one
// before the newest, breaks the chain at the next row and `opsgate audit
// verify` names it. Deleting the newest rows leaves a shorter chain that is
// still intact: only a head recorded elsewhere (ChainReport's HeadSeq and
// HeadHash) shows that.
//
// The hash is an HMAC-SHA256 under a key kept outside the store
// (audit.key_file), written "hmac:<hex>": someone who can rewrite rows
// cannot re-seal them, because the algorithm is public but the key is not.
// Entries sealed before opsgate had a key carry a bare SHA-256 ("legacy");
// they verify only as a prefix of the chain, before the first keyed entry,
// whose link then protects them too.
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

// AuditKey is the secret that keys the audit chain. A nil key seals legacy
// (unkeyed) entries, for tests and stores opened without one.
type AuditKey []byte

// keyedPrefix marks a keyed hash.
const keyedPrefix = "hmac:"

// MinAuditKeyLen is the shortest key NewAuditKey accepts (256 bits).
const MinAuditKeyLen = 32

// Keyed reports whether hash was made with a key (not a legacy SHA-256).
func Keyed(hash string) bool { return strings.HasPrefix(hash, keyedPrefix) }

// Seal sets the entry's sequence, previous hash and own legacy (unkeyed)
// hash; SealKeyed is what stores use once they have a key.
func (e *AuditEntry) Seal(seq int64, prevHash string) { e.SealKeyed(seq, prevHash, nil) }

// SealKeyed sets the entry's sequence, previous hash and own hash under
// key (legacy when key is nil). Stores call it inside the appending
// transaction, after reading the last entry. Times are truncated to
// microseconds, the precision both stores keep.
func (e *AuditEntry) SealKeyed(seq int64, prevHash string, key AuditKey) {
	e.Seq = seq
	e.At = e.At.UTC().Truncate(time.Microsecond)
	e.PrevHash = prevHash
	e.Hash = e.computeHash(key)
}

// VerifyHash reports whether the entry's own hash is right for its
// content: a keyed hash under key, a legacy one under SHA-256.
func (e *AuditEntry) VerifyHash(key AuditKey) bool {
	if Keyed(e.Hash) {
		if key == nil {
			return false
		}
		return hmac.Equal([]byte(e.computeHash(key)), []byte(e.Hash))
	}
	return e.computeHash(nil) == e.Hash
}

func (e *AuditEntry) computeHash(key AuditKey) string {
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
	if key != nil {
		m := hmac.New(sha256.New, key)
		m.Write(b)
		return keyedPrefix + hex.EncodeToString(m.Sum(nil))
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

// VerifyChain checks a legacy (unkeyed) chain: see VerifyChainKeyed.
func VerifyChain(prevHash string, entries []AuditEntry) (badSeq int64) {
	return VerifyChainKeyed(prevHash, entries, nil)
}

// VerifyChainKeyed checks entries in sequence order, continuing from
// prevHash (empty for the first entry ever), with keyed hashes checked
// under key. It returns the sequence number of the first entry that was
// altered, reordered, whose predecessor was removed, or that is a legacy
// entry after a keyed one (a row re-sealed with the public algorithm), or 0
// when the chain is intact.
func VerifyChainKeyed(prevHash string, entries []AuditEntry, key AuditKey) (badSeq int64) {
	for i := range entries {
		e := &entries[i]
		if e.PrevHash != prevHash || !e.VerifyHash(key) || (Keyed(prevHash) && !Keyed(e.Hash)) {
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
	// LegacyUntil is the last entry sealed before the chain had a key (0
	// when every entry is keyed). It never grows once a keyed entry
	// exists: record it with the head.
	LegacyUntil int64 `json:"legacy_until"`
	// UnkeyedHead is set when the verifier has a key but the newest entry
	// is not keyed: the chain was re-sealed (or cut back) without the key,
	// or the store was never served with it. A store that adopts its key
	// appends a keyed entry at once, so an honest chain never shows it.
	UnkeyedHead bool `json:"unkeyed_head,omitempty"`
}

// Intact reports whether every entry links to the one before it and, with
// a key, the newest entry is keyed.
func (r ChainReport) Intact() bool { return r.BadSeq == 0 && !r.UnkeyedHead }

// Problem says what a broken link means, for the CLI and the API; "" when
// the chain is intact. A link breaks at entry N when N itself was altered
// or when an entry before it was removed (or altered), and the chain
// cannot tell which, so the message names both.
func (r ChainReport) Problem() string {
	if r.Intact() {
		return ""
	}
	if r.BadSeq == 0 {
		return fmt.Sprintf("the newest entry (%d) is not sealed with the audit key: the chain was re-sealed or cut back without the key, "+
			"or this store was never served with it (start `opsgate serve` once with audit.key_file)", r.HeadSeq)
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
