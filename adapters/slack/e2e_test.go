package slack

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/adapters/slack/internal/fakeslack"
	"github.com/opsgate/opsgate/core"
)

// startDeploy runs `/ops deploy api 1.2.3` as UREQ and returns the root
// message and the card posted in its thread.
func (e *env) startDeploy() (root, card fakeslack.Message) {
	e.t.Helper()
	res := e.slash("UREQ", "deploy api 1.2.3")
	if b := status(e.t, res, http.StatusOK); len(strings.TrimSpace(string(b))) != 0 {
		e.t.Fatalf("slash command answered %q, want an empty ack", b)
	}
	roots := e.roots()
	if len(roots) != 1 {
		e.t.Fatalf("roots = %+v, want one root message", roots)
	}
	root = roots[0]
	return root, e.waitCard(root.TS)
}

// A slash command starts a thread: root message, card in the thread, a
// click on Approve, the tool runs once, its result lands in the thread and
// the card is updated in place.
func TestSlashCommandApproveRoundTrip(t *testing.T) {
	t.Parallel()
	e := setup(t)
	root, card := e.startDeploy()
	if root.Channel != "C1" || !strings.Contains(root.Text, "<@UREQ>") || !strings.Contains(root.Text, "`/ops deploy api 1.2.3`") {
		t.Errorf("root message = %+v", root)
	}
	run := e.runOf(root.TS)
	if want := "T1/C1/" + root.TS; run.Thread != (core.Thread{Channel: "slack", Key: want}) || run.Requester != requester {
		t.Fatalf("run thread %v requester %s, want slack:%s and %s", run.Thread, run.Requester, want, requester)
	}
	text := fakeslack.VisibleText(card)
	for _, want := range []string{"deploy", "service", "api", "1.2.3", "Who may decide", "<@UAPP>", "<@UREQ>", "Dry run", "Expires"} {
		if !strings.Contains(text, want) {
			t.Errorf("card lacks %q:\n%s", want, text)
		}
	}

	status(t, e.click(card, actionApprove), http.StatusOK)
	e.h.WaitRun(run.ID, core.RunSucceeded)
	e.h.WaitIdle()

	if d := e.h.Dispatches(); len(d) != 1 || d[0].Args["service"] != "api" {
		t.Fatalf("dispatches = %+v, want one deploy of api", d)
	}
	var result bool
	for _, m := range e.fake.Thread("C1", root.TS) {
		result = result || strings.Contains(m.Text, "deployed api 1.2.3 to staging")
	}
	if !result {
		t.Errorf("no result in the thread: %+v", e.fake.Thread("C1", root.TS))
	}
	e.h.Eventually("card updated in place", func() bool {
		m, _ := e.fake.Message("C1", card.TS)
		return !hasButtons(m) && strings.Contains(fakeslack.VisibleText(m), "Approved* by <@UAPP>")
	})
	if ups := e.fake.Calls("chat.update"); len(ups) == 0 || ups[0].Params["ts"] != card.TS {
		t.Errorf("chat.update calls = %+v, want one for the card %s", ups, card.TS)
	}
	if n := len(e.fake.Calls("chat.postEphemeral")); n != 0 {
		t.Errorf("%d ephemeral messages for an authorized click", n)
	}
}

// Reject opens a modal; its feedback rejects the call, which never runs,
// and the card shows who rejected and why.
func TestRejectWithFeedbackViaModal(t *testing.T) {
	t.Parallel()
	e := setup(t)
	root, card := e.startDeploy()
	run := e.runOf(root.TS)

	status(t, e.click(card, actionReject), http.StatusOK)
	view := e.openedView(t)
	if view.CallbackID != callbackReject {
		t.Fatalf("modal callback %q", view.CallbackID)
	}
	res := e.submit(t, callbackReject, view.PrivateMetadata, map[string]string{blockReason: "use 1.2.4 instead"})
	if b := status(t, res, http.StatusOK); len(strings.TrimSpace(string(b))) != 0 {
		t.Fatalf("submission answered %s, want an empty 200 (modal closes)", b)
	}
	e.h.WaitRun(run.ID, core.RunRejected)
	if d := e.h.Dispatches(); len(d) != 0 {
		t.Fatalf("rejected call dispatched: %+v", d)
	}
	e.h.Eventually("card shows the rejection", func() bool {
		m, _ := e.fake.Message("C1", card.TS)
		txt := fakeslack.VisibleText(m)
		return !hasButtons(m) && strings.Contains(txt, "Rejected* by <@UAPP>") && strings.Contains(txt, "use 1.2.4 instead")
	})
}

// Edit opens a modal pre-filled with the arguments; invalid arguments keep
// it open with the schema's message under the field; valid ones approve
// the edited call.
func TestEditViaModalInvalidThenValid(t *testing.T) {
	t.Parallel()
	e := setup(t)
	root, card := e.startDeploy()
	run := e.runOf(root.TS)

	status(t, e.click(card, actionEdit), http.StatusOK)
	view := e.openedView(t)
	if view.CallbackID != callbackEdit {
		t.Fatalf("modal callback %q", view.CallbackID)
	}
	initial := map[string]string{}
	for _, b := range view.Blocks {
		if strings.HasPrefix(b.BlockID, argPrefix) {
			initial[b.BlockID] = b.Element.InitialValue
		}
	}
	if initial["arg:service"] != "api" || initial["arg:version"] != "1.2.3" {
		t.Fatalf("edit modal not pre-filled: %v", initial)
	}

	bad := e.submit(t, callbackEdit, view.PrivateMetadata, map[string]string{"arg:service": "API!!", "arg:version": "1.2.3", "arg:env": "staging"})
	var errs struct {
		ResponseAction string            `json:"response_action"`
		Errors         map[string]string `json:"errors"`
	}
	if err := json.Unmarshal(status(t, bad, http.StatusOK), &errs); err != nil {
		t.Fatal(err)
	}
	if errs.ResponseAction != "errors" || errs.Errors["arg:service"] == "" {
		t.Fatalf("invalid edit answered %+v, want errors under arg:service", errs)
	}
	if a := e.h.WaitApprovalPending(run.ID); a.Status != "pending" {
		t.Fatalf("approval %s after an invalid edit", a.Status)
	}

	good := e.submit(t, callbackEdit, view.PrivateMetadata, map[string]string{"arg:service": "web", "arg:version": "2.0.0", "arg:env": ""})
	status(t, good, http.StatusOK)
	e.h.WaitRun(run.ID, core.RunSucceeded)
	d := e.h.Dispatches()
	if len(d) != 1 || d[0].Args["service"] != "web" || d[0].Args["version"] != "2.0.0" || d[0].Args["env"] != "staging" {
		t.Fatalf("dispatches = %+v, want web 2.0.0 to staging (schema default)", d)
	}
}

// A click by someone who may not decide is answered with an ephemeral
// message; the card and the approval stay as they were, and no modal opens.
func TestUnauthorizedClick(t *testing.T) {
	t.Parallel()
	e := setup(t)
	root, card := e.startDeploy()
	run := e.runOf(root.TS)

	status(t, e.clickAs("UOTHER", card, actionApprove), http.StatusOK)
	status(t, e.clickAs("UOTHER", card, actionReject), http.StatusOK)
	e.settle() // refusals are shown after the ack
	eph := e.fake.Calls("chat.postEphemeral")
	if len(eph) != 2 {
		t.Fatalf("ephemeral calls = %+v, want 2", eph)
	}
	for _, c := range eph {
		if c.Params["user"] != "UOTHER" || c.Params["channel"] != "C1" || c.Params["thread_ts"] != root.TS || !strings.Contains(c.Params["text"], "may not decide") {
			t.Errorf("ephemeral = %+v", c.Params)
		}
	}
	if n := len(e.fake.Calls("views.open")); n != 0 {
		t.Errorf("views.open called %d times for an unauthorized click", n)
	}
	if a := e.h.WaitApprovalPending(run.ID); a.Status != "pending" {
		t.Fatalf("approval %s", a.Status)
	}
	e.h.WaitIdle()
	if m, _ := e.fake.Message("C1", card.TS); !hasButtons(m) || len(e.fake.Calls("chat.update")) != 0 {
		t.Errorf("card changed after an unauthorized click")
	}
	// Both refused attempts — the Approve and the Reject that would have
	// opened a modal — are in the audit log.
	got := e.h.RefusedActions("slack:UOTHER")
	if refused := got["approve"] + got["reject"] + got["edit"]; refused != 2 {
		t.Errorf("audited refusals for slack:UOTHER = %d, want 2 (%v)", refused, got)
	}
}

// A decision made through the API (any other surface) updates the card.
func TestAPIDecisionUpdatesCard(t *testing.T) {
	t.Parallel()
	e := setup(t)
	root, card := e.startDeploy()
	run := e.runOf(root.TS)
	ap := e.h.WaitApprovalPending(run.ID)
	if _, err := e.h.Decide(approver, ap.ID, "approve", ""); err != nil {
		t.Fatal(err)
	}
	e.h.WaitRun(run.ID, core.RunSucceeded)
	e.h.Eventually("card updated after an API decision", func() bool {
		m, _ := e.fake.Message("C1", card.TS)
		return !hasButtons(m) && strings.Contains(fakeslack.VisibleText(m), "Approved* by <@UAPP>")
	})
	// A late click on the stale card is told who decided, nothing changes.
	status(t, e.click(card, actionApprove), http.StatusOK)
	e.settle()
	eph := e.fake.Calls("chat.postEphemeral")
	if len(eph) != 1 || !strings.Contains(eph[0].Params["text"], "Already decided by slack:UAPP at ") {
		t.Fatalf("ephemeral after a stale click = %+v", eph)
	}
	if d := e.h.Dispatches(); len(d) != 1 {
		t.Fatalf("dispatches = %d, want 1", len(d))
	}
}

// modalView is the part of a views.open request the tests read.
type modalView struct {
	CallbackID      string `json:"callback_id"`
	PrivateMetadata string `json:"private_metadata"`
	Blocks          []struct {
		Type    string `json:"type"`
		BlockID string `json:"block_id"`
		Element struct {
			InitialValue string `json:"initial_value"`
		} `json:"element"`
	} `json:"blocks"`
}

// openedView returns the last view passed to views.open.
func (e *env) openedView(t *testing.T) modalView {
	t.Helper()
	calls := e.fake.Calls("views.open")
	if len(calls) == 0 {
		t.Fatal("views.open not called")
	}
	c := calls[len(calls)-1]
	if !strings.HasPrefix(c.Params["trigger_id"], "click.") {
		t.Errorf("views.open trigger_id %q, want the click's", c.Params["trigger_id"])
	}
	var v modalView
	if err := json.Unmarshal([]byte(c.Params["view"]), &v); err != nil {
		t.Fatalf("view: %v\n%s", err, c.Params["view"])
	}
	return v
}

// submit posts a view_submission with the given input values.
func (e *env) submit(t *testing.T, callback, meta string, values map[string]string) *http.Response {
	t.Helper()
	state := map[string]map[string]map[string]any{}
	for block, v := range values {
		val := any(v)
		if v == "" {
			val = nil
		}
		state[block] = map[string]map[string]any{"value": {"type": "plain_text_input", "value": val}}
	}
	sb, _ := json.Marshal(state)
	metaJSON, _ := json.Marshal(meta)
	return e.interact(fill(t, "view_submission.json", map[string]string{
		"TRIGGER": "submit." + strings.ReplaceAll(t.Name(), "/", ".") + "." + string(rune('a'+e.seq.Add(1)%26)),
		"META":    strings.Trim(string(metaJSON), `"`), "CALLBACK": callback, "VALUES": string(sb),
	}))
}
