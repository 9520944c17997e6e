package history

import (
	"fmt"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// Sentence is an audit entry in words, one line: who did what to which
// call, and why. Entries of a kind it does not know read as the actor, the
// kind and the detail's fields, so a newer server's entries still show.
// calls supplies the arguments of the approvals that entries name (nil is
// fine: the tool alone is named then).
func Sentence(e approvals.AuditEntry, calls Calls) string {
	d := decode(e.Detail)
	who := actor(e.Actor, d)
	call := func() string {
		if c, ok := calls[e.ApprovalID]; ok && e.ApprovalID != "" {
			return callText(c.Tool, c.Args)
		}
		if a := d.args("args"); a != nil {
			return callText(e.Tool, a)
		}
		if e.Tool == "" {
			return "a call"
		}
		return callText(e.Tool, nil)
	}
	why := func(k string) string {
		if r := clip(d.str(k), maxText); r != "" {
			return ": " + r
		}
		return ""
	}
	switch e.Kind {
	case approvals.AuditApprovalRequested:
		s := fmt.Sprintf("%s asked to run %s", who, call())
		if ap := d.list("approvers"); ap != "" {
			s += "; " + ap + " to decide"
			if q, ok := d.num("quorum"); ok && q > 1 {
				s += fmt.Sprintf(" (%d approvals needed)", q)
			}
		}
		return s
	case approvals.AuditApprovalDecided:
		return decided(who, call(), d)
	case approvals.AuditApprovalRefused:
		return fmt.Sprintf("%s was refused: %s %s%s", who, verbPresent(d.str("action")), call(), why("reason"))
	case approvals.AuditApprovalExpired:
		return call() + " expired with no decision"
	case approvals.AuditRunCancelled:
		s := who + " cancelled the run"
		if p := d.str("previous_status"); p != "" {
			s += " (it was " + strings.ReplaceAll(clip(p, maxValue), "_", " ") + ")"
		}
		return s
	case approvals.AuditRunRedispatched:
		return fmt.Sprintf("%s ran again after a restart%s: the tool is idempotent", call(), stepAttempt(d))
	case approvals.AuditRunInterrupted:
		if d.str("call_id") != "" {
			return fmt.Sprintf("the agent task %s was interrupted%s", clip(d.str("call_id"), maxValue), why("why"))
		}
		return fmt.Sprintf("%s was interrupted%s: the process stopped while it ran, so its outcome is unknown", call(), stepAttempt(d))
	case approvals.AuditGrantApplied:
		s := call() + " ran without asking"
		if r := d.str("requester"); r != "" {
			s += " for " + clip(r, maxValue)
		}
		return s + fmt.Sprintf(", under the %s grant %s gave", clip(d.str("scope"), maxValue), who)
	case approvals.AuditGrantCreated:
		return grantCreated(who, e.Tool, d)
	case approvals.AuditGrantRevoked:
		return fmt.Sprintf("%s revoked the grant %s", who, clip(d.str("grant"), maxValue))
	case approvals.AuditPolicyDenied:
		return "policy denied " + call() + why("why")
	case approvals.AuditRequestRefused:
		s := who + " was refused a request"
		if th := d.str("thread"); th != "" {
			s += " in " + clip(th, maxValue)
		}
		return s + why("why")
	case approvals.AuditConfigReloaded:
		s := "the configuration was reloaded"
		if f := d.str("file"); f != "" {
			s += " from " + clip(f, maxValue*2)
		}
		r, _ := d.num("rules")
		p, _ := d.num("people")
		g, _ := d.num("groups")
		s += fmt.Sprintf(": %d rules, %d people, %d groups", r, p, g)
		if nr := d.list("needs_restart"); nr != "" {
			s += "; a restart is needed for " + nr
		}
		return s
	case approvals.AuditConfigRefused:
		s := "a configuration reload was refused"
		if f := d.str("file"); f != "" {
			s = "a configuration reload from " + clip(f, maxValue*2) + " was refused"
		}
		return s + why("error")
	case approvals.AuditKeyed:
		n, _ := d.num("legacy_until")
		return fmt.Sprintf("the audit chain was keyed; entries 1 to %d were sealed before it had a key", n)
	case approvals.AuditAgentCallRequested:
		return fmt.Sprintf("%s's run asked an agent to %s (task %s)", who, orThing(clip(d.str("stage"), maxValue), "do a task"), clip(d.str("call_id"), maxValue))
	case approvals.AuditAgentCallClaimed:
		return fmt.Sprintf("%s took the agent task %s", who, clip(d.str("call_id"), maxValue))
	case approvals.AuditAgentCallCompleted:
		return fmt.Sprintf("%s completed the agent task %s", who, clip(d.str("call_id"), maxValue))
	case approvals.AuditAgentCallFailed:
		return fmt.Sprintf("%s failed the agent task %s%s", who, clip(d.str("call_id"), maxValue), why("message"))
	}
	s := who + " " + clip(string(e.Kind), maxValue)
	if e.Tool != "" {
		s += " " + clip(e.Tool, maxValue)
	}
	if r := d.rest(); r != "" {
		s += ": " + r
	}
	return s
}

// actor names who acted: the person when the entry knows them, with the
// channel they used ("alice (slack)"), else the identity, with the channel
// when it is not the identity's own ("console:admin (tui)").
func actor(id string, d detail) string {
	ch := clip(d.str("channel"), maxValue)
	// An identity no person claims is its own "person" in the detail.
	if p := clip(d.str("person"), maxValue); p != "" && d.str("person") != id {
		if ch != "" {
			return p + " (" + ch + ")"
		}
		return p
	}
	id = clip(id, maxValue*2)
	if id == "" {
		id = "someone"
	}
	if ch != "" && !strings.HasPrefix(id, ch+":") {
		return id + " (" + ch + ")"
	}
	return id
}

// decided is an approval.decided entry: approve, reject or edit, with its
// scope, the count towards quorum and the reason.
func decided(who, call string, d detail) string {
	var s string
	switch d.str("action") {
	case string(approvals.ActionReject):
		s = fmt.Sprintf("%s rejected %s", who, call)
	case string(approvals.ActionEdit):
		s = fmt.Sprintf("%s approved %s with changes", who, call)
		if a := d.args("args"); a != nil {
			s += " (" + strings.TrimPrefix(callText("", a), " ") + ")"
		}
	default:
		s = fmt.Sprintf("%s approved %s", who, call)
	}
	switch approvals.Scope(d.str("scope")) {
	case approvals.ScopeSession:
		s += " for the session"
	case approvals.ScopeForever:
		s += " from now on"
	}
	if d.str("status") == string(approvals.StatusPending) {
		n, _ := d.num("approvals")
		q, _ := d.num("quorum")
		if q > 1 {
			s += fmt.Sprintf(" (%d of %d approvals)", n, q)
		}
	}
	if r := clip(d.str("reason"), maxText); r != "" {
		s += ": " + r
	}
	return s
}

// grantCreated is a grant.created entry: what the grant covers, for whom,
// until when.
func grantCreated(who, tool string, d detail) string {
	covers := callText(tool, d.args("args"))
	if p := d.args("pattern"); p != nil {
		covers = callText(tool, p) + " (a pattern)"
	}
	s := fmt.Sprintf("%s granted %s approval for %s", who, clip(d.str("scope"), maxValue), covers)
	if r := d.str("requester"); r != "" {
		s += " to " + clip(r, maxValue)
		if th := d.str("thread"); th != "" {
			s += " in " + clip(th, maxValue)
		}
	}
	if exp := d.str("expires_at"); exp != "" {
		if t, err := time.Parse(time.RFC3339Nano, exp); err == nil {
			s += " until " + t.UTC().Format("2006-01-02 15:04 UTC")
		}
	}
	return s
}

// verbPresent is the action a refusal refused, as a verb.
func verbPresent(action string) string {
	switch approvals.Action(action) {
	case approvals.ActionReject:
		return "reject"
	case approvals.ActionEdit:
		return "edit"
	case approvals.ActionApprove:
		return "approve"
	}
	if action == "" {
		return "decide"
	}
	return clip(action, maxValue)
}

// stepAttempt is " (step 2, attempt 3)" from a detail's step and attempts.
func stepAttempt(d detail) string {
	var parts []string
	if n, ok := d.num("step"); ok {
		parts = append(parts, fmt.Sprintf("step %d", n+1))
	}
	if n, ok := d.num("attempts"); ok && n > 0 {
		parts = append(parts, fmt.Sprintf("attempt %d", n))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func orThing(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// CallsOf collects the calls that approval.requested entries carry, so a
// page of entries names the arguments of the decisions among them without
// a lookup.
func CallsOf(entries []approvals.AuditEntry) Calls {
	out := Calls{}
	for _, e := range entries {
		if e.Kind != approvals.AuditApprovalRequested || e.ApprovalID == "" {
			continue
		}
		if a := decode(e.Detail).args("args"); a != nil {
			out[e.ApprovalID] = Call{Tool: e.Tool, Args: a}
		}
	}
	return out
}

// Missing lists the approval ids entries name whose call calls lacks, for
// the caller to look up (each once).
func Missing(entries []approvals.AuditEntry, calls Calls) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range entries {
		if e.ApprovalID == "" || seen[e.ApprovalID] {
			continue
		}
		seen[e.ApprovalID] = true
		if _, ok := calls[e.ApprovalID]; !ok {
			out = append(out, e.ApprovalID)
		}
	}
	return out
}
