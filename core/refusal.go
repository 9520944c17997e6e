package core

import (
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// RefusalText is the one sentence every chat surface answers a refused
// decision or answer with, whatever the platform: one text per refusal
// code, naming who decided and when ("Already decided by … at …"), when an
// approval expired, or what was wrong. Adapters add their markup (an
// emphasis, an ephemeral message) and cut it to their limits; they never
// word a refusal of their own, so every channel says the same thing.
func RefusalText(de *DecisionError) string {
	if de == nil {
		return ""
	}
	msg := sentence(de.Message)
	if de.Batch {
		return "ℹ️ " + msg
	}
	noun, decided := "approval", "decided"
	if de.Question {
		noun, decided = "question", "answered"
	}
	switch de.Code {
	case DecisionAlreadyDecided:
		s := "ℹ️ Already " + decided
		if de.By != "" {
			s += " by " + OneLine(de.By)
		}
		if !de.At.IsZero() {
			s += " at " + refusalTime(de.At)
		}
		if de.By == "" && de.At.IsZero() && msg != "" && !de.Question {
			return "ℹ️ " + upperFirst(msg)
		}
		return s + "."
	case DecisionAlreadyVoted:
		return "👍 Your approval is already counted; the call still waits for more approvers."
	case DecisionExpired:
		if !de.At.IsZero() {
			return "⌛ This " + noun + " expired at " + refusalTime(de.At) + "."
		}
		return "⌛ This " + noun + " has expired."
	case DecisionNotApprover:
		what := "decide this approval"
		if de.Question {
			what = "answer this question"
		}
		return withDetail("⛔ You may not "+what, detail(msg, approvals.ErrNotApprover))
	case DecisionSelfApproval:
		return "⛔ You asked for this call, so you cannot approve it yourself."
	case DecisionHumanRequired:
		return "⛔ Approvals are decided by people: an agent never decides."
	case DecisionDenied:
		return withDetail("⛔ Denied by policy", detail(msg, approvals.ErrDeniedByPolicy))
	case DecisionNotFound:
		return "❓ Unknown " + noun + "."
	case DecisionInvalidArgs:
		if de.Question {
			return withDetail("⚠️ That does not answer the question", msg)
		}
		return withDetail("⚠️ Arguments not accepted", msg)
	case DecisionUnverified:
		return withDetail("⛔ Your decision was not counted: who sent it could not be verified", detail(msg, approvals.ErrUnverified))
	}
	if msg == "" {
		msg = string(de.Code)
	}
	return "⚠️ Not accepted: " + msg
}

// AckText is the short answer to a decision a chat recorded (a button's
// acknowledgement, a notice): recorded before (a platform's retry),
// counted toward a quorum not yet reached, or done.
func AckText(rc Receipt) string {
	switch {
	case rc.Duplicate:
		return "ℹ️ Already recorded."
	case rc.ApprovalStatus == string(approvals.StatusPending):
		return "👍 Your approval is counted; more approvers are needed."
	case rc.ApprovalStatus == string(approvals.StatusRejected):
		return "❌ Rejected."
	case rc.ApprovalStatus == string(approvals.StatusEdited):
		return "✅ Approved with your arguments."
	case rc.ApprovalStatus == string(approvals.StatusApproved):
		return "✅ Approved."
	}
	return "✅ Recorded."
}

// AnsweredText acknowledges an answer to an agent's question.
const AnsweredText = "✅ Your answer is recorded."

// refusalTime is how a refusal names a moment: minutes, in UTC, as cards do.
func refusalTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// sentence is outside words made one line, without a closing period
// (RefusalText adds its own).
func sentence(s string) string {
	return strings.TrimRight(strings.TrimSpace(OneLine(s)), ".")
}

// detail is what msg says beyond the refusal sentinel's own words, which
// the code already says.
func detail(msg string, sentinel error) string {
	rest, ok := strings.CutPrefix(msg, sentinel.Error())
	if !ok {
		return msg
	}
	return strings.TrimSpace(strings.TrimPrefix(rest, ":"))
}

func withDetail(s, detail string) string {
	if detail == "" {
		return s + "."
	}
	return s + ": " + detail + "."
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
