package web

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/history"
)

// The view models the templates render. Everything is plain strings (or
// lists of them) so the templates never call into the core and html/template
// escapes every value the same way.

// argField is one argument in a card or in the edit form. JSON marks a
// value that is not a string: it is shown and edited as JSON.
type argField struct {
	Key, Value string
	JSON       bool
	Error      string
}

type decisionRow struct {
	Actor, Channel, Action, Reason, Scope, At, Args string
	// To is whom a delegation handed the approval to.
	To         string
	Superseded bool
}

// cardView is an approval card: everything needed to decide, and, once
// decided, who decided what, when and where.
type cardView struct {
	// BatchPending counts the pending calls of this card's batch (the
	// gated calls of one agent turn) when there are several.
	BatchPending                                                      int
	ID, RunID, Thread, Requester, Tool, Risk, Reason, Preview, Status string
	Destructive, Pending                                              bool
	Approvers, Eligible                                               []string
	Quorum, Counted                                                   int
	Proposed                                                          []argField
	ApprovedJSON, ExecutedJSON, ProposedJSON                          string
	// EditDiff is proposed → approved when an edit changed them; ExecDiff
	// approved (or proposed) → executed when what ran differs; Executed
	// says the call was dispatched at all.
	EditDiff, ExecDiff              []diffLine
	Executed                        bool
	Decisions                       []decisionRow
	CreatedAt, ExpiresAt, DecidedAt string
	// Version changes whenever the card would render differently, so the
	// live updater swaps only the cards that changed.
	Version string
	// Form state after a refused decision (FormTo: a refused hand-over's
	// target).
	Error, Action, FormReason, FormTo string
	EditOpen                          bool
	// Next says what happens if nobody decides, and when; Ladder is the
	// escalation ladder, each step marked once fired (escalation.go).
	Next   string
	Ladder []ladderRow
	// Offers are the grants task and session would save (the forever
	// block has its own form); SessionMax bounds a session's "for".
	Offers     []offerRow
	SessionMax string
	// Why is the policy's reason for asking (the rule and what it is
	// for); HasReceipt says a signed receipt of the decision is there.
	Why        string
	HasReceipt bool
}

func ts(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func tsPtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return ts(*t)
}

// prettyJSON renders args for display; nil stays empty (not yet known).
func prettyJSON(v map[string]any) string {
	if v == nil {
		return ""
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// argFields lists args sorted by key; strings as they are, anything else
// as JSON, so the editor round-trips numbers, booleans and objects.
func argFields(args map[string]any) []argField {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]argField, 0, len(keys))
	for _, k := range keys {
		f := argField{Key: k}
		if s, ok := args[k].(string); ok {
			f.Value = s
		} else {
			b, _ := json.Marshal(args[k])
			f.Value, f.JSON = string(b), true
		}
		out = append(out, f)
	}
	return out
}

func newCardView(a *approvals.Approval, run *core.Run) *cardView {
	v := &cardView{
		ID: a.ID, RunID: a.RunID, Thread: a.Thread, Requester: a.Requester, Tool: a.Tool, Risk: string(a.Risk),
		Reason: core.OneLine(a.Reason), Preview: a.Preview, Status: string(a.Status), Destructive: a.Destructive,
		Pending: a.Status == approvals.StatusPending, Approvers: a.Approvers, Eligible: a.Eligible,
		Quorum: max(a.Quorum, 1), Counted: a.CountedApprovals(), Proposed: argFields(a.ProposedArgs),
		ProposedJSON: prettyJSON(emptyIfNil(a.ProposedArgs)), ApprovedJSON: prettyJSON(a.ApprovedArgs),
		CreatedAt: ts(a.CreatedAt), ExpiresAt: ts(a.ExpiresAt), DecidedAt: tsPtr(a.DecidedAt),
		Why: a.Why, HasReceipt: a.Receipt != "",
	}
	executed := a.ExecutedArgs
	if executed == nil {
		executed = executedArgs(run, a.ID)
	}
	v.ExecutedJSON = prettyJSON(executed)
	base := emptyIfNil(a.ProposedArgs)
	if a.ApprovedArgs != nil {
		v.EditDiff = argDiff(base, a.ApprovedArgs)
		base = a.ApprovedArgs
	}
	if executed != nil {
		v.Executed = true
		v.ExecDiff = argDiff(base, executed)
	}
	for _, d := range a.Decisions {
		v.Decisions = append(v.Decisions, decisionRow{Actor: d.Actor, Channel: d.Channel, Action: string(d.Action),
			Reason: d.Reason, Scope: string(d.Scope), At: ts(d.At), Args: prettyJSON(d.Args), To: d.To, Superseded: d.Superseded})
	}
	escalationRows(v, a)
	v.Version = fmt.Sprintf("%s/%d/%t/%d", v.Status, len(v.Decisions), executed != nil, a.Escalated)
	return v
}

func emptyIfNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// executedArgs finds the step that carries approvalID and returns its args
// once the call was dispatched: what actually ran, not what was approved.
func executedArgs(run *core.Run, approvalID string) map[string]any {
	if run == nil {
		return nil
	}
	for _, st := range run.Steps {
		if st.ApprovalID != approvalID {
			continue
		}
		switch st.Status {
		case core.StepDispatching, core.StepSucceeded, core.StepFailed, core.StepInterrupted:
			return emptyIfNil(st.Args)
		}
	}
	return nil
}

// foldLimit is where tool output is folded behind a <details> summary.
const (
	foldBytes = 1500
	foldLines = 20
)

type stepView struct {
	Index                                 int
	Tool, Status, ArgsJSON, Output, Error string
	// SameAsRun: the step's arguments are the run's, shown once above;
	// ShowArgs: they are shown in the step (not the run's, and not shown
	// by its approval's card or diff).
	SameAsRun, ShowArgs bool
	// Duration of the tool call, when it finished.
	Duration              string
	Head                  string
	Folded                bool
	Attempts              int
	StartedAt, FinishedAt string
	Card                  *cardView
}

type eventRow struct {
	Seq               int64
	Type, At, Summary string
	// Gap is the time since the event before ("+2m00s"; "" for the first).
	Gap string
	// Kind picks the timeline marker: start, ask, decide, tool, reply, end,
	// fail.
	Kind string
}

// spentRow is one line of where a run's time went: what, how long, and the
// share of the whole in percent (for the bar).
type spentRow struct {
	What, Took string
	Percent    int
	// Tenths is Percent in tens, rounded, for the bar's width class (the
	// CSP allows no inline styles).
	Tenths int
}

type runView struct {
	ID, Flow, Thread, Requester, Status, Reason, ErrorCode, ErrorMessage string
	ArgsJSON, CreatedAt, UpdatedAt                                       string
	Final                                                                bool
	Steps                                                                []stepView
	Events                                                               []eventRow
	// Spent is where the run's time went, longest first, and SpentTotal
	// the run's time in all (core/history).
	Spent      []spentRow
	SpentTotal string
	Version    string
	// Agent runs: the conversation, and the question waiting for input.
	Agent        bool
	Conversation []convoEntry
	Question     *questionView
}

// fold splits long output into a head shown at once and the rest behind a
// click, so a timeline with a 64 KiB log stays readable.
func fold(out string) (head string, folded bool) {
	if len(out) <= foldBytes && strings.Count(out, "\n") < foldLines {
		return out, false
	}
	head = out
	if i := nthIndex(head, '\n', 10); i >= 0 {
		head = head[:i]
	}
	if len(head) > 600 {
		head = strings.ToValidUTF8(head[:600], "")
	}
	return head, true
}

func nthIndex(s string, c byte, n int) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n--
			if n == 0 {
				return i
			}
		}
	}
	return -1
}

func newRunView(r *core.Run, evs []core.RunEvent, cards map[string]*cardView, now time.Time) *runView {
	v := &runView{
		ID: r.ID, Flow: r.Flow, Thread: r.Thread.String(), Requester: r.Requester, Status: string(r.Status),
		Reason: r.Reason, ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage, ArgsJSON: prettyJSON(emptyIfNil(r.Args)),
		CreatedAt: ts(r.CreatedAt), UpdatedAt: ts(r.UpdatedAt), Final: r.Status.Final(),
	}
	for _, st := range r.Steps {
		sv := stepView{Index: st.Index, Tool: st.Tool, Status: string(st.Status), ArgsJSON: prettyJSON(emptyIfNil(st.Args)),
			Output: st.Output, Error: st.Error, Attempts: st.Attempts, StartedAt: tsPtr(st.StartedAt), FinishedAt: tsPtr(st.FinishedAt)}
		sv.Head, sv.Folded = fold(st.Output)
		sv.SameAsRun = jsonEqual(emptyIfNil(st.Args), emptyIfNil(r.Args))
		if st.StartedAt != nil && st.FinishedAt != nil {
			sv.Duration = st.FinishedAt.Sub(*st.StartedAt).Round(time.Millisecond).String()
		}
		if st.ApprovalID != "" {
			sv.Card = cards[st.ApprovalID]
		}
		sv.ShowArgs = !sv.SameAsRun && (sv.Card == nil || (!sv.Card.Pending && len(sv.Card.EditDiff) == 0))
		v.Steps = append(v.Steps, sv)
	}
	if _, ok := core.AgentOf(r.Flow); ok {
		v.Agent, v.Conversation, v.Question = true, conversation(evs), pendingQuestion(r)
	}
	kinds := map[int64]string{}
	for _, ev := range evs {
		kinds[ev.Seq] = eventKind(ev)
	}
	for _, m := range history.Timeline(evs) {
		if m.Type == core.EventAgentMessage {
			continue // shown as the conversation
		}
		row := eventRow{Seq: m.Seq, Type: m.Type, At: ts(m.At), Summary: m.Text, Kind: kinds[m.Seq]}
		if len(v.Events) > 0 {
			row.Gap = "+" + history.Duration(m.Since)
		}
		v.Events = append(v.Events, row)
	}
	end := now
	if r.Status.Final() {
		end = r.UpdatedAt
	}
	shares := history.Spent(evs, end)
	var total time.Duration
	for _, sh := range shares {
		total += sh.Took
	}
	for _, sh := range shares {
		pct := int(sh.Took * 100 / max(total, 1))
		v.Spent = append(v.Spent, spentRow{What: sh.What, Took: history.Duration(sh.Took), Percent: pct, Tenths: (pct + 5) / 10})
	}
	if total > 0 {
		v.SpentTotal = history.Duration(total)
	}
	last := int64(0)
	if len(evs) > 0 {
		last = evs[len(evs)-1].Seq
	}
	v.Version = fmt.Sprintf("%s/%d/%d", r.Status, len(r.Steps), last)
	return v
}

// grantRow is one grant on the grants page.
type grantRow struct {
	ID, Scope, Tool, Thread, Requester, RunID, Covers, ApprovalID, GrantedBy, CreatedAt, ExpiresAt, RevokedAt, RevokedBy string
	Active                                                                                                               bool
}

func newGrantRow(g *approvals.Grant, now time.Time) grantRow {
	row := grantRow{ID: g.ID, Scope: string(g.Scope), Tool: g.Tool, Thread: g.Thread, Requester: g.Requester, RunID: g.RunID,
		ApprovalID: g.ApprovalID, GrantedBy: g.Actor, CreatedAt: ts(g.At), RevokedBy: g.RevokedBy, Active: g.Active(now)}
	switch {
	case g.Pattern != nil:
		row.Covers = "pattern " + jsonText(g.Pattern)
	case g.Args != nil:
		row.Covers = "exactly " + jsonText(g.Args)
	default:
		row.Covers = "rule " + g.RuleKey
	}
	if g.ExpiresAt != nil {
		row.ExpiresAt = ts(*g.ExpiresAt)
	}
	if g.RevokedAt != nil {
		row.RevokedAt = ts(*g.RevokedAt)
	}
	return row
}

// diffLine is one line of an argument diff: Op is " " (the same), "-"
// (only in the old arguments) or "+" (only in the new).
type diffLine struct {
	Op, Key, Value string
}

// argDiff compares two argument objects key by key, sorted: unchanged
// keys once, a changed key as - old / + new. It returns nil when they are
// equal, so the page shows arguments once unless something changed.
func argDiff(old, cur map[string]any) []diffLine {
	if old == nil || cur == nil || jsonEqual(old, cur) {
		return nil
	}
	keys := map[string]bool{}
	for k := range old {
		keys[k] = true
	}
	for k := range cur {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []diffLine
	for _, k := range sorted {
		ov, inOld := old[k]
		nv, inNew := cur[k]
		switch {
		case inOld && inNew && jsonEqual(ov, nv):
			out = append(out, diffLine{Op: " ", Key: k, Value: jsonText(ov)})
		default:
			if inOld {
				out = append(out, diffLine{Op: "-", Key: k, Value: jsonText(ov)})
			}
			if inNew {
				out = append(out, diffLine{Op: "+", Key: k, Value: jsonText(nv)})
			}
		}
	}
	return out
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func jsonEqual(a, b any) bool { return jsonText(a) == jsonText(b) }

// relTime says how long ago (or how soon) t is from now, the way people
// read a dashboard: "just now", "3 min ago", "in 12 min", "2 h ago",
// "5 d ago". The absolute time goes in the element's title.
func relTime(t, now time.Time) string {
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	var s string
	switch {
	case d < 45*time.Second:
		return "just now"
	case d < 90*time.Minute:
		s = fmt.Sprintf("%d min", max(1, int((d+30*time.Second)/time.Minute)))
	case d < 36*time.Hour:
		s = fmt.Sprintf("%d h", int((d+30*time.Minute)/time.Hour))
	default:
		s = fmt.Sprintf("%d d", int((d+12*time.Hour)/(24*time.Hour)))
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

// eventKind sorts run events into the timeline's markers.
func eventKind(ev core.RunEvent) string {
	switch ev.Type {
	case core.EventRunQueued, core.EventTurnStarted:
		return "start"
	case core.EventPermissionRequested:
		return "ask"
	case core.EventPermissionDecided:
		var d struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		if d.Status == "rejected" || d.Status == "expired" {
			return "fail"
		}
		return "decide"
	case core.EventToolStarted, core.EventToolOutput:
		return "tool"
	case core.EventToolFinished:
		var d struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		if d.Error != "" {
			return "fail"
		}
		return "tool"
	case core.EventMessageCommitted:
		return "reply"
	case core.EventTurnFinished:
		var d struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		if d.Status != string(core.RunSucceeded) {
			return "fail"
		}
		return "end"
	}
	return "start"
}
