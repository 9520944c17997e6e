package approvals

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Digest names exactly what an approval lets run: "sha256:<hex>" over the
// tool, the canonical arguments (after schema defaults: sorted keys,
// compact JSON, numbers in one form), the key of the policy rule that asked
// (Rule.Key) and the policy version (Policy.Version) the ask was judged
// under. The gate stores it on the approval when it asks, an edit makes a
// new one, every decision records the one its approver decided on, and
// dispatch refuses a call whose arguments no longer hash to it
// (docs/architecture.md, "The gate").
func Digest(tool string, args map[string]any, ruleKey, policyVersion string) string {
	b, err := json.Marshal(struct {
		Tool   string `json:"tool"`
		Args   any    `json:"args"`
		Rule   string `json:"rule"`
		Policy string `json:"policy"`
	}{tool, CanonicalArgs(args), ruleKey, policyVersion})
	if err != nil {
		// Arguments are JSON values (they came from JSON or a schema).
		panic("approvals: digest: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// CanonicalArgs is args as plain JSON values: what json.Marshal then writes
// with sorted keys and no spaces, and where 2, 2.0 and json.Number("2")
// are one value. Nil is the empty object.
func CanonicalArgs(args map[string]any) any {
	if args == nil {
		return map[string]any{}
	}
	b, err := json.Marshal(args)
	if err != nil {
		panic(fmt.Sprintf("approvals: canonical arguments: %v", err))
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		panic(fmt.Sprintf("approvals: canonical arguments: %v", err))
	}
	return v
}

// Args is what the approval lets run: the approved arguments once decided
// (an edit's), the proposed ones before.
func (a *Approval) Args() map[string]any {
	if a.ApprovedArgs != nil {
		return a.ApprovedArgs
	}
	return a.ProposedArgs
}

// DigestProblem says why the call the approval would dispatch with args is
// not the one its deciders saw, or "": args must hash (with the approval's
// rule key and policy version) to its Digest, and every decision that
// counts toward its quorum must have been made on that digest. An
// approval stored before digests existed (no Digest and no decision
// carrying one) has nothing to compare and passes.
func (a *Approval) DigestProblem(args map[string]any) string {
	if got := Digest(a.Tool, args, a.RuleKey, a.PolicyVersion); a.Digest != "" && got != a.Digest {
		return fmt.Sprintf("the arguments to run hash to %s, but the approval names %s", got, a.Digest)
	}
	for _, d := range a.Decisions {
		if d.Superseded || (d.Action != ActionApprove && d.Action != ActionEdit) {
			continue
		}
		if d.Digest != a.Digest {
			return fmt.Sprintf("%s decided on %s, but the approval names %s", d.Actor, orNone(d.Digest), orNone(a.Digest))
		}
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "no digest"
	}
	return s
}

// Version identifies the policy as configured: "p" and 16 hex digits of
// the SHA-256 of its JSON form (every rule with its fields in order, the
// default, the default approvers and the policy-wide switches). Two
// configurations with the same policy have the same version; any change to
// it — a rule added, moved, edited — makes a new one. An approval records
// the version it was asked under, as part of its Digest.
func (p *Policy) Version() string {
	if p == nil {
		p = &Policy{}
	}
	b, err := json.Marshal(p)
	if err != nil {
		panic("approvals: policy version: " + err.Error()) // strings, ints and bools
	}
	sum := sha256.Sum256(b)
	return "p" + hex.EncodeToString(sum[:8])
}
