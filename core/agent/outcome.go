package agent

import (
	"fmt"
	"strings"
	"time"
)

// OutcomeKind is what became of one tool call at and after the gate.
type OutcomeKind string

// The outcomes of a tool call, each rendered for the model by Result.
const (
	// OutcomeRan: the gate allowed the call (by rule, grant or an approval)
	// and the tool ran; Output holds what it printed, Error its failure.
	OutcomeRan OutcomeKind = "ran"
	// OutcomeEdited: an approver edited the arguments and the edited call
	// ran; By and Args say who and with what.
	OutcomeEdited OutcomeKind = "edited"
	// OutcomeDenied: a policy rule denied the call; Rule names it.
	OutcomeDenied OutcomeKind = "denied"
	// OutcomeRejected: an approver rejected the call; Feedback is theirs.
	OutcomeRejected OutcomeKind = "rejected"
	// OutcomeExpired: nobody decided before the approval expired.
	OutcomeExpired OutcomeKind = "expired"
	// OutcomeInterrupted: opsgate stopped while the call was dispatching
	// and the tool is not idempotent, so it was not run again: its outcome
	// is unknown. The model is told on the next turn.
	OutcomeInterrupted OutcomeKind = "interrupted"
	// OutcomeNoApprover: the call needed an approval nobody could give
	// (the Agent API with no eligible decider): treated as denied.
	OutcomeNoApprover OutcomeKind = "no_approver"
	// OutcomeInvalid: the call never reached the gate — unknown tool,
	// malformed arguments, or arguments the tool's schema refuses; Problem
	// says what.
	OutcomeInvalid OutcomeKind = "invalid"
	// OutcomeStepLimit: the run used all of max_steps; the call did not run.
	OutcomeStepLimit OutcomeKind = "step_limit"
	// OutcomeCancelled: the run was cancelled before the call ran.
	OutcomeCancelled OutcomeKind = "cancelled"
)

// Outcome is everything the tool result of one call is rendered from. The
// engine fills it from the gate's verdict, the decision and the dispatch.
type Outcome struct {
	Kind OutcomeKind
	// Output is what the tool printed (ran, edited); it is external content.
	Output string
	// Error is the tool's failure ("exit status 2", "HTTP 503"); empty when
	// it succeeded. opsgate's words, not the tool's output.
	Error string
	// Source labels Output: "tool:<name>" by default, "mcp:<server>.<tool>"
	// for an upstream MCP tool.
	Source string
	// Rule names the policy rule that denied the call, e.g.
	// `policy.rules[4] (tool "delete_*": deny)`.
	Rule string
	// By is the person who approved, rejected or edited (an identity).
	By string
	// Feedback is the approver's reason for a rejection (external content:
	// a person wrote it).
	Feedback string
	// Args are the arguments that ran after an edit.
	Args map[string]any
	// TTL is how long the approval waited before it expired.
	TTL time.Duration
	// Problem explains an OutcomeInvalid; MaxSteps an OutcomeStepLimit.
	Problem  string
	MaxSteps int
	// Why says why no one could approve (OutcomeNoApprover), optional.
	Why string
}

// Result renders the outcome of call into the tool message the model gets.
// Every message has a non-empty text; everything from outside opsgate (tool
// output, feedback, edited arguments) is framed as external content.
func (o Outcome) Result(call Call, at time.Time) Message {
	m := Message{Role: RoleTool, CallID: call.ID, Tool: call.Tool, At: at}
	note := func(format string, args ...any) { m.Parts = append(m.Parts, Note(fmt.Sprintf(format, args...))) }
	source := o.Source
	if source == "" {
		source = "tool:" + call.Tool
	}
	output := func() {
		if o.Output == "" {
			note("(The tool printed nothing.)")
			return
		}
		m.Parts = append(m.Parts, External(source, "", o.Output))
	}
	switch o.Kind {
	case OutcomeRan:
		if o.By != "" {
			note("Approved by %s.", o.By)
		}
		if o.Error != "" {
			m.IsError = true
			note("The tool ran and failed: %s.", strings.TrimSuffix(o.Error, "."))
		}
		output()
	case OutcomeEdited:
		args := marshalPlain(o.Args)
		by := o.By
		if by == "" {
			by = "an approver"
		}
		note("%s edited the arguments before approving; the call ran with these arguments instead of yours:", by)
		m.Parts = append(m.Parts, External("edit", o.By, string(args)))
		if o.Error != "" {
			m.IsError = true
			note("The tool ran and failed: %s.", strings.TrimSuffix(o.Error, "."))
		}
		output()
	case OutcomeDenied:
		m.IsError = true
		rule := o.Rule
		if rule == "" {
			rule = "the policy default"
		}
		note("Denied by policy (rule %s). The tool did not run. Continue without this call; do not retry it in another form.", rule)
	case OutcomeRejected:
		m.IsError = true
		by := o.By
		if by == "" {
			by = "an approver"
		}
		if strings.TrimSpace(o.Feedback) == "" {
			note("Rejected by %s, without feedback. The tool did not run.", by)
		} else {
			note("Rejected by %s. The tool did not run. Their feedback:", by)
			m.Parts = append(m.Parts, External("approval", o.By, o.Feedback))
		}
	case OutcomeExpired:
		m.IsError = true
		if o.TTL > 0 {
			note("The approval expired: nobody decided within %s. The tool did not run.", o.TTL)
		} else {
			note("The approval expired: nobody decided in time. The tool did not run.")
		}
	case OutcomeInterrupted:
		m.IsError = true
		note("Outcome unknown: opsgate stopped while this call was running, and did not run it again because the tool is not idempotent. It may or may not have taken effect; check before you repeat it, and tell the person.")
	case OutcomeNoApprover:
		m.IsError = true
		why := ""
		if o.Why != "" {
			why = " (" + strings.TrimSuffix(o.Why, ".") + ")"
		}
		note("Denied: this call needs an approval that nobody here can give%s. The tool did not run. Continue without it.", why)
	case OutcomeInvalid:
		m.IsError = true
		problem := o.Problem
		if problem == "" {
			problem = call.Problem
		}
		note("The call was not made: %s.", strings.TrimSuffix(problem, "."))
	case OutcomeStepLimit:
		m.IsError = true
		note("Not run: this run reached its limit of %d tool calls. Answer with what you have.", o.MaxSteps)
	case OutcomeCancelled:
		m.IsError = true
		note("Not run: the run was cancelled.")
	default:
		m.IsError = true
		note("The call did not run (%s).", o.Kind)
	}
	return m
}
