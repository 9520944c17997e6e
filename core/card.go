package core

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// Card is a self-contained approval request: everything a person needs to
// decide, even read hours later in a mail client. The core builds it from the
// stored approval; each adapter renders it natively (Block Kit, inline
// keyboard, embed, email) and falls back to PlainText.
type Card struct {
	ApprovalID string         `json:"approval_id"`
	RunID      string         `json:"run_id"`
	Tool       string         `json:"tool"`
	Args       []CardArg      `json:"args"`
	Reason     string         `json:"reason"`
	Risk       approvals.Risk `json:"risk"`
	Preview    string         `json:"preview,omitempty"`
	Requester  string         `json:"requester"`
	Approvers  []string       `json:"approvers"`
	// Eligible are the identities that may decide, so an adapter can refuse
	// a click (or skip opening a modal) before a round trip.
	Eligible  []string  `json:"eligible"`
	Quorum    int       `json:"quorum"`
	Approvals int       `json:"approvals"` // approvals counted so far toward Quorum
	ExpiresAt time.Time `json:"expires_at"`
	// Next says what happens next if nobody decides, and when, for an
	// approval with an escalation ladder ("the approvers are reminded at
	// 2026-01-02 15:20 UTC"); empty otherwise (its expiry is the next).
	Next string `json:"next,omitempty"`
	// Status is the approval's status: pending while buttons should show.
	Status approvals.Status `json:"status"`
	// Outcome is set once decided or expired: "Approved by … at …".
	Outcome *CardOutcome `json:"outcome,omitempty"`
	// ConsoleURL links to the approval in the web console (a page that
	// asks for a confirmation click; no GET ever decides).
	ConsoleURL string `json:"console_url,omitempty"`
	// Why is the policy's reason for asking: the rule that asked and what
	// it is for ("policy rule 3: deploy to prod* by a non-lead: ask").
	Why string `json:"why,omitempty"`
	// Changes is the per-field diff from the proposed to the edited
	// arguments once an approver edited them (Args then shows the edited
	// ones). Every renderer shows ChangeLines when it is not empty.
	Changes []approvals.Change `json:"changes,omitempty"`
	// Batch, when set, makes this one card for several gated calls an
	// agent asked for in one turn: every call, this card's own first, each
	// decidable on its own, plus "Approve all" (Decision ActionApproveAll
	// with this card's ApprovalID). Adapters without a native rendering
	// show the first call and the list in PlainText.
	Batch []CardCall `json:"batch,omitempty"`
}

// CardCall is one call of a batch card.
type CardCall struct {
	ApprovalID string           `json:"approval_id"`
	Tool       string           `json:"tool"`
	Args       []CardArg        `json:"args"`
	Reason     string           `json:"reason"`
	Risk       approvals.Risk   `json:"risk"`
	Quorum     int              `json:"quorum"`
	Approvals  int              `json:"approvals"`
	Status     approvals.Status `json:"status"`
	Outcome    *CardOutcome     `json:"outcome,omitempty"`
	ConsoleURL string           `json:"console_url,omitempty"`
}

// ActionApproveAll, as a Decision's action, approves every pending call of
// the batch the decision's approval leads, each through the normal
// decision path (quorum, self-approval and eligibility per call).
const ActionApproveAll approvals.Action = "approve_all"

// ApproveAllLine is the line a batch card shows where its channel has no
// "Approve all" button: the one text command, with ref naming the card
// (its approval id, or what the channel shows instead).
func (c Card) ApproveAllLine(ref string) string {
	return "To approve every pending call at once, send: " + ApproveAllCommand(ref)
}

// BatchPending reports whether any call of a batch card still takes
// decisions (the card's own status may already be final).
func (c Card) BatchPending() bool {
	for _, b := range c.Batch {
		if b.Status == approvals.StatusPending {
			return true
		}
	}
	return false
}

// CardArg is one argument as shown to the approver, in a stable order.
// Value is the JSON rendering of the argument (strings unquoted).
type CardArg struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// CardOutcome records how an approval ended, for the card's final form.
type CardOutcome struct {
	Status approvals.Status `json:"status"` // approved | rejected | edited | expired
	By     []string         `json:"by,omitempty"`
	At     time.Time        `json:"at"`
	Reason string           `json:"reason,omitempty"`
}

// statusCancelled is an outcome older stores may hold for the approval of a
// cancelled run (cancelling now expires it); cards still render it.
const statusCancelled approvals.Status = "cancelled"

// Verb is the outcome's status as the word that starts "… by X at T":
// "Approved", "Rejected", "Edited and approved"; any other status
// capitalized.
func (o *CardOutcome) Verb() string {
	switch o.Status {
	case approvals.StatusApproved:
		return "Approved"
	case approvals.StatusRejected:
		return "Rejected"
	case approvals.StatusEdited:
		return "Edited and approved"
	case "":
		return ""
	}
	return strings.ToUpper(string(o.Status[:1])) + string(o.Status[1:])
}

// ChangeLines are Changes for people, one line each, values single-lined
// (OneLine): "env: staging → prod", "replicas: added 3", "force: removed
// (was true)". Renderers escape them as any other text.
func (c Card) ChangeLines() []string {
	out := make([]string, 0, len(c.Changes))
	for _, ch := range c.Changes {
		out = append(out, ChangeLine(ch))
	}
	return out
}

// ChangeLine is one change in one line (see Card.ChangeLines).
func ChangeLine(ch approvals.Change) string {
	switch ch.Kind {
	case approvals.ChangeAdded:
		return OneLine(ch.Name) + ": added " + OneLine(ch.To)
	case approvals.ChangeRemoved:
		return OneLine(ch.Name) + ": removed (was " + OneLine(ch.From) + ")"
	}
	return OneLine(ch.Name) + ": " + OneLine(ch.From) + " → " + OneLine(ch.To)
}

// ChangesHeading introduces ChangeLines on every rendering.
const ChangesHeading = "Edited by an approver (proposed → edited):"

// Pending reports whether the card still takes decisions.
func (c Card) Pending() bool { return c.Status == approvals.StatusPending }

// ArgsFromMap turns arguments into CardArgs sorted by name, so every surface
// shows them in the same order.
func ArgsFromMap(args map[string]any) []CardArg {
	out := make([]CardArg, 0, len(args))
	for k, v := range args {
		out = append(out, CardArg{Name: k, Value: ArgString(v)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ArgString renders one argument value for people: strings as they are,
// everything else as compact JSON.
func ArgString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Headline is the one-line summary used in notifications and mail subjects:
// "Approval needed: deploy service=api version=1.2.3". Values are shown
// with OneLine, so the headline stays one line whatever they hold.
func (c Card) Headline() string {
	var b strings.Builder
	if c.Pending() {
		b.WriteString("Approval needed: ")
	} else {
		b.WriteString("Approval " + string(c.Status) + ": ")
	}
	b.WriteString(OneLine(c.Tool))
	for _, a := range c.Args {
		v := a.Shown()
		if len(v) > 40 {
			v = strings.ToValidUTF8(v[:37], "") + "..."
		}
		fmt.Fprintf(&b, " %s=%s", OneLine(a.Name), v)
	}
	return b.String()
}

// OutcomeLine is the sentence that replaces the buttons once decided:
// "Approved by console:admin at 14:02 UTC".
func (c Card) OutcomeLine() string {
	o := c.Outcome
	if o == nil {
		return ""
	}
	at := o.At.UTC().Format("2006-01-02 15:04 UTC")
	switch o.Status {
	case approvals.StatusExpired:
		return "Expired at " + at + " with no decision"
	case statusCancelled:
		return "Cancelled at " + at
	}
	line := fmt.Sprintf("%s by %s at %s", o.Verb(), OneLine(strings.Join(o.By, ", ")), at)
	if o.Reason != "" {
		line += ": " + OneLine(o.Reason)
	}
	return line
}

// PlainText is the fallback rendering every adapter can send when it has
// nothing richer: complete on its own, including how to answer.
func (c Card) PlainText() string {
	var b strings.Builder
	b.WriteString(c.Headline() + "\n\n")
	fmt.Fprintf(&b, "Tool: %s\n", OneLine(c.Tool))
	if len(c.Args) > 0 {
		b.WriteString("Arguments:\n")
		for _, a := range c.Args {
			fmt.Fprintf(&b, "  %s: %s\n", OneLine(a.Name), a.Shown())
		}
	}
	if len(c.Changes) > 0 {
		b.WriteString(ChangesHeading + "\n")
		for _, l := range c.ChangeLines() {
			b.WriteString("  " + l + "\n")
		}
	}
	if c.Reason != "" {
		fmt.Fprintf(&b, "Reason: %s\n", OneLine(c.Reason))
	}
	if c.Why != "" {
		fmt.Fprintf(&b, "Asked by: %s\n", OneLine(c.Why))
	}
	fmt.Fprintf(&b, "Risk: %s\n", OneLine(string(c.Risk)))
	fmt.Fprintf(&b, "Requested by: %s\n", OneLine(c.Requester))
	fmt.Fprintf(&b, "Approvers: %s", OneLine(strings.Join(c.Approvers, ", ")))
	if c.Quorum > 1 {
		fmt.Fprintf(&b, " (%d of %d approvals)", c.Approvals, c.Quorum)
	}
	b.WriteString("\n")
	if c.Pending() {
		fmt.Fprintf(&b, "Expires: %s\n", c.ExpiresAt.UTC().Format(time.RFC3339))
		if c.Next != "" {
			fmt.Fprintf(&b, "Next: %s\n", OneLine(c.Next))
		}
	}
	if c.Preview != "" {
		// Indented, so the tool's output (which may echo arguments) can
		// never pass for a line of the card.
		b.WriteString("\nDry run:\n")
		for _, l := range strings.Split(strings.TrimRight(c.Preview, "\n"), "\n") {
			b.WriteString("    " + l + "\n")
		}
	}
	if len(c.Batch) > 1 {
		fmt.Fprintf(&b, "\nThis card holds %d calls of one agent turn; each is decided on its own:\n", len(c.Batch))
		for i, bc := range c.Batch {
			fmt.Fprintf(&b, "  %d. %s", i+1, OneLine(bc.Tool))
			for _, a := range bc.Args {
				fmt.Fprintf(&b, " %s=%s", OneLine(a.Name), OneLine(a.Shown()))
			}
			fmt.Fprintf(&b, " — %s (approval id %s)\n", bc.Status, bc.ApprovalID)
			if bc.Reason != "" {
				fmt.Fprintf(&b, "     Reason: %s\n", OneLine(bc.Reason))
			}
		}
		if c.BatchPending() {
			fmt.Fprintf(&b, "%s\n", c.ApproveAllLine(c.ApprovalID))
		}
	}
	if c.Pending() {
		fmt.Fprintf(&b, "\nApproval id: %s", c.ApprovalID)
		if c.ConsoleURL != "" {
			fmt.Fprintf(&b, "\nDecide in the console: %s", c.ConsoleURL)
		}
	} else {
		b.WriteString("\n" + c.OutcomeLine())
	}
	return b.String()
}
