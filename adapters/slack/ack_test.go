package slack

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
)

// settle waits for the adapter's post-ack work (ephemerals) to finish.
func (e *env) settle() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*adaptertest.WaitTimeout)
	defer cancel()
	if err := e.a.Drain(ctx); err != nil {
		e.t.Fatalf("Drain: %v", err)
	}
}

// answeredWhileHeld runs post, which must be answered while the fake
// Slack still holds its calls (Hold): an adapter that waited for them would
// not answer until they are released, and is reported after a bound far
// past any scheduling delay.
func answeredWhileHeld(t *testing.T, what string, post func() *http.Response) *http.Response {
	t.Helper()
	done := make(chan *http.Response, 1)
	go func() { done <- post() }()
	select {
	case res := <-done:
		return res
	case <-time.After(adaptertest.WaitTimeout):
		t.Fatalf("%s: no answer while Slack held its calls: the adapter waited for Slack", what)
		return nil
	}
}

// A Slack that does not answer never holds an interaction's answer back:
// ephemerals go out after the ack, and views.open (which must use the
// trigger before it expires) is made before the ack but bounded by the ack
// budget. Slack is held — not slowed by a measured delay — so each answer
// arriving while Slack still sits on the calls proves the adapter did not
// wait for them, whatever the machine's load. When the bounded views.open
// fails, the clicker is told so afterwards.
func TestInteractionAckBoundedWhenSlackIsSlow(t *testing.T) {
	t.Parallel()
	e := setup(t)
	root, card := e.startDeploy()
	run := e.runOf(root.TS)
	releaseEphemeral := e.fake.Hold("chat.postEphemeral")
	releaseOpen := e.fake.Hold("views.open")
	defer releaseEphemeral()
	defer releaseOpen()

	status(t, answeredWhileHeld(t, "refused click", func() *http.Response { return e.clickAs("UOTHER", card, actionApprove) }), http.StatusOK)
	status(t, answeredWhileHeld(t, "reject click", func() *http.Response { return e.click(card, actionReject) }), http.StatusOK)
	if opens := e.fake.Calls("views.open"); len(opens) != 1 {
		t.Fatalf("views.open calls %+v, want one, made before the ack", opens)
	}
	releaseEphemeral()
	releaseOpen()

	e.h.Eventually("both ephemerals sent after the acks", func() bool { return len(e.fake.Calls("chat.postEphemeral")) == 2 })
	e.settle()
	var texts []string
	for _, c := range e.fake.Calls("chat.postEphemeral") {
		texts = append(texts, c.Params["user"]+": "+c.Params["text"])
	}
	joined := strings.Join(texts, "\n")
	if !strings.Contains(joined, "UOTHER: ⛔ You may not decide") || !strings.Contains(joined, "UAPP: Slack could not open the form") {
		t.Fatalf("ephemerals = %q", texts)
	}
	if a := e.h.WaitApprovalPending(run.ID); a.Status != "pending" {
		t.Fatalf("approval %s", a.Status)
	}
}

// Over Socket Mode every envelope is handled on its own: one whose work
// waits on a slow Slack delays neither its own ack past 3 s nor the acks
// of the envelopes after it.
func TestSocketModeSlowEnvelopeDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config, _ *adaptertest.HarnessOptions) {
		c.Mode, c.AppToken, c.SigningSecret = ModeSocket, "xapp-1-test", ""
	})
	ctx, cancel := context.WithCancel(t.Context())
	runDone := make(chan error, 1)
	go func() { runDone <- e.a.Run(ctx) }()
	defer func() { cancel(); <-runDone }()
	if !e.fake.WaitConnected(adaptertest.WaitTimeout) {
		t.Fatal("socket mode client never connected")
	}
	slash, _ := json.Marshal(map[string]string{
		"command": "/ops", "text": "deploy web 4.0.0", "user_id": "UREQ", "channel_id": "C1", "team_id": "T1",
		"trigger_id": "sock.trig.slow",
	})
	e.fake.SendEnvelope("slash-1", "slash_commands", slash, 0)
	e.h.Eventually("slash acked", func() bool { _, ok := ackOf(e, "slash-1"); return ok })
	root := e.roots()[0]
	card := e.waitCard(root.TS)

	// Slack sits on these until released: every ack that arrives before
	// then did not wait for them.
	releaseEphemeral := e.fake.Hold("chat.postEphemeral")
	releaseOpen := e.fake.Hold("views.open")
	defer releaseEphemeral()
	defer releaseOpen()
	click := func(trigger, user, action string) json.RawMessage {
		p := fill(t, "block_actions.json", map[string]string{
			"CARD_TS": card.TS, "ROOT_TS": root.TS, "TRIGGER": trigger, "ACTION": action,
			"VALUE": buttonValueOf(t, card, action),
		})
		return []byte(strings.ReplaceAll(string(p), `"id": "UAPP"`, `"id": "`+user+`"`))
	}
	e.fake.SendEnvelope("slow-refused", "interactive", click("sock.slow.1", "UOTHER", actionApprove), 0)
	e.fake.SendEnvelope("slow-modal", "interactive", click("sock.slow.2", "UAPP", actionEdit), 0)
	raw, err := jsonFile("testdata/socket_events_api.json")
	if err != nil {
		t.Fatal(err)
	}
	e.fake.SendEnvelope("fast-event", raw.Type, raw.Payload, 0)

	// The order the acks arrive in, while Slack still holds its calls.
	var order []string
	e.h.Eventually("every envelope acked while Slack holds its calls", func() bool {
		for _, id := range []string{"slow-refused", "slow-modal", "fast-event"} {
			if _, ok := ackOf(e, id); ok && !slices.Contains(order, id) {
				order = append(order, id)
			}
		}
		return len(order) == 3
	})
	// Queued behind the slow modal, the event would wait out its whole
	// ack budget (views.open is held): it is acked first.
	if slices.Index(order, "fast-event") > slices.Index(order, "slow-modal") {
		t.Errorf("acks in order %v: the events_api envelope waited behind the slow modal", order)
	}
	releaseEphemeral()
	releaseOpen()
	e.settle()
}

// jsonFile reads a Socket Mode envelope from testdata.
func jsonFile(name string) (struct {
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}, error) {
	var v struct {
		Type    string          `json:"type"`
		Payload json.RawMessage `json:"payload"`
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return v, err
	}
	return v, json.Unmarshal(b, &v)
}

// Reject and Edit on a closed approval are decision attempts like Approve:
// the engine refuses them and audits the refusal, and the clicker is
// told why; no modal opens.
func TestClosedApprovalRejectEditAreAudited(t *testing.T) {
	t.Parallel()
	e := setup(t)
	root, card := e.startDeploy()
	run := e.runOf(root.TS)
	ap := e.h.WaitApprovalPending(run.ID)
	if _, err := e.h.Decide(approver, ap.ID, "approve", ""); err != nil {
		t.Fatal(err)
	}
	status(t, e.click(card, actionReject), http.StatusOK)
	status(t, e.click(card, actionEdit), http.StatusOK)
	e.settle()
	if n := len(e.fake.Calls("views.open")); n != 0 {
		t.Errorf("views.open called %d times on a closed approval", n)
	}
	eph := e.fake.Calls("chat.postEphemeral")
	if len(eph) != 2 {
		t.Fatalf("ephemerals = %+v, want 2", eph)
	}
	for _, c := range eph {
		if c.Params["user"] != "UAPP" || !strings.Contains(c.Params["text"], "Already decided by slack:UAPP at ") {
			t.Errorf("ephemeral = %+v", c.Params)
		}
	}
	got := e.h.RefusedActions(approver)
	if refused := got["reject"] + got["edit"] + got["approve"]; refused != 2 {
		t.Errorf("audited refusals for %s = %d, want 2 (%v)", approver, refused, got)
	}
}

// A forged or tampered button value is answered 200 with an ephemeral
// "not valid" to the clicker, and a forged modal keeps the modal open with
// the same message; neither records or audits anything.
func TestForgedButtonAndModalAnsweredNotValid(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for i, value := range []string{"some-approval.AAAAAAAAAAAAAAAA", e.a.sign.buttonValue(actionReject, "some-approval")} {
		res := e.interact(fill(t, "block_actions.json", map[string]string{
			"CARD_TS": "1.1", "ROOT_TS": "1.0", "TRIGGER": "forged." + string(rune('a'+i)), "ACTION": actionApprove, "VALUE": value,
		}))
		status(t, res, http.StatusOK)
	}
	res := e.interact(fill(t, "view_submission.json", map[string]string{
		"TRIGGER": "forged.m", "META": "some-approval|T1/C1/1.0|AAAAAAAAAAAAAAAA", "CALLBACK": callbackReject,
		"VALUES": `{"reason":{"value":{"type":"plain_text_input","value":"no"}}}`,
	}))
	var errs struct {
		ResponseAction string            `json:"response_action"`
		Errors         map[string]string `json:"errors"`
	}
	if err := json.Unmarshal(status(t, res, http.StatusOK), &errs); err != nil {
		t.Fatal(err)
	}
	if errs.ResponseAction != "errors" || !strings.Contains(errs.Errors[blockReason], "not valid") {
		t.Errorf("forged modal answered %+v, want a 'not valid' error in the modal", errs)
	}
	e.settle()
	eph := e.fake.Calls("chat.postEphemeral")
	if len(eph) != 2 {
		t.Fatalf("ephemerals = %+v, want 2", eph)
	}
	for _, c := range eph {
		if c.Params["user"] != "UAPP" || c.Params["channel"] != "C1" || !strings.Contains(c.Params["text"], "This button is not valid") {
			t.Errorf("ephemeral = %+v", c.Params)
		}
	}
	e.h.StoreEmpty(t)
}
