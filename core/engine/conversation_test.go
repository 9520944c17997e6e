package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// outboxOf lists a run's outbox messages of kind ("" for every kind), any
// status, in queue order.
func (h *harness) outboxOf(runID string, kind core.MessageKind) []*core.Delivery {
	h.t.Helper()
	ds, _, err := h.store.OutboxList(context.Background(), core.OutboxListParams{Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []*core.Delivery
	for _, d := range ds {
		if d.RunID == runID && (kind == "" || d.Kind == kind) {
			out = append(out, d)
		}
	}
	return out
}

// sent records outbox message id as delivered under ref, as the delivery
// pipeline does once a platform accepted it.
func (h *harness) sent(id string, ref core.MessageRef) {
	h.t.Helper()
	ctx := context.Background()
	ds, err := h.store.OutboxClaim(ctx, core.OutboxClaimParams{Channel: ref.Channel, Owner: "test-delivery", Limit: 100,
		Now: h.clk.Now(), LeaseUntil: h.clk.Now().Add(time.Hour)})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, d := range ds {
		r := core.MessageRef{Channel: ref.Channel, ID: "other-" + d.ID}
		if d.ID == id {
			r = ref
		}
		if err := h.store.OutboxChunkSent(ctx, d.ID, "test-delivery", 0, r, h.clk.Now()); err != nil {
			h.t.Fatal(err)
		}
		if err := h.store.OutboxDone(ctx, d.ID, "test-delivery", h.clk.Now()); err != nil {
			h.t.Fatal(err)
		}
	}
}

// A reply to the bot's message, wherever the adapter placed it, continues
// the conversation of the thread that message went to: the model sees the
// earlier turn, and the run belongs to that thread. A reference the store
// does not know, or one of another channel, leaves the event where it was.
func TestReplyToTheBotContinuesItsThread(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, sc := agentSetup(t, b)
		sc.Push(fakellm.Say("The first answer."), fakellm.Say("The second answer."), fakellm.Say("A new conversation."))
		first := h.send("slack:U1", "slack:T1/C1/100.1", "remember the word banana")
		h.waitRun(first.RunID, core.RunSucceeded)
		out := h.outboxOf(first.RunID, "")
		if len(out) != 1 {
			t.Fatalf("outbox of the first run: %+v", out)
		}
		h.sent(out[0].ID, core.MessageRef{Channel: "slack", ID: "C1/200.2"})

		ev := h.event("slack:U1", "slack:T1/C1/300.3", "which word?")
		ev.ReplyTo = &core.MessageRef{Channel: "slack", ID: "C1/200.2"}
		rc, err := h.eng.HandleEvent(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		run := h.waitRun(rc.RunID, core.RunSucceeded)
		if run.Thread.String() != "slack:T1/C1/100.1" {
			t.Errorf("the reply's run is in %s, want the thread of the message it replies to", run.Thread)
		}
		if txt := requestText(t, sc, 1); !strings.Contains(txt, "banana") {
			t.Errorf("the model did not see the earlier turn:\n%s", txt)
		}

		ev = h.event("slack:U1", "slack:T1/C1/400.4", "hello")
		ev.ReplyTo = &core.MessageRef{Channel: "slack", ID: "C1/unknown"}
		rc, err = h.eng.HandleEvent(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		if run := h.waitRun(rc.RunID, core.RunSucceeded); run.Thread.String() != "slack:T1/C1/400.4" {
			t.Errorf("a reply to an unknown message moved to %s", run.Thread)
		}
		ev = h.event("slack:U1", "slack:T1/C1/500.5", "deploy api 1.2.3")
		ev.ReplyTo = &core.MessageRef{Channel: "telegram", ID: "C1/200.2"}
		if err := h.eng.continueThread(context.Background(), &ev); err != nil || ev.Thread.String() != "slack:T1/C1/500.5" {
			t.Errorf("another channel's message moved the event to %s (%v)", ev.Thread, err)
		}
	})
}

// Once answered, the question's message is updated (an outbox update that
// replaces it) to show who answered what; a second answer is refused
// naming who answered and when; a reply may give a choice by its number.
func TestAnsweredQuestionUpdatesItsMessage(t *testing.T) {
	askArgs := `{"questions":[{"id":"env","kind":"choice","text":"Which environment?","choices":["staging","prod"]}]}`
	eachBackend(t, func(t *testing.T, b backend) {
		h, sc := agentSetup(t, b)
		sc.Push(call("ask_user", askArgs), fakellm.Say("Using prod."))
		rc := h.send("console:req", "console:q-upd", "ship it")
		h.waitRun(rc.RunID, core.RunWaitingInput)
		out := h.outboxOf(rc.RunID, "")
		if len(out) != 1 || !strings.Contains(out[0].Text, "or its number") {
			t.Fatalf("question message %+v", out)
		}
		question := out[0].ID
		if rc2 := h.send("console:req", "console:q-upd", "2"); rc2.RunID != rc.RunID {
			t.Fatalf("the reply started run %q", rc2.RunID)
		}
		h.waitRun(rc.RunID, core.RunSucceeded)
		if txt := requestText(t, sc, 1); !strings.Contains(txt, `"answer":"prod"`) {
			t.Fatalf("the number did not answer with its choice:\n%s", txt)
		}
		var upd *core.Delivery
		for _, d := range h.outboxOf(rc.RunID, "") {
			if d.Kind == core.KindQuestionUpdate {
				upd = d
			}
		}
		if upd == nil || upd.Replaces != question || !strings.Contains(upd.Text, "Answered by console:req") || !strings.Contains(upd.Text, ": prod") {
			t.Fatalf("question update %+v; want one replacing %s with the answer", upd, question)
		}
		err := h.eng.Answer(context.Background(), core.Actor{ID: "console:req"}, "console", rc.RunID, "ask-0",
			json.RawMessage(`[{"questionId":"env","answer":"staging"}]`))
		var de *core.DecisionError
		if !errors.As(err, &de) || de.Code != core.DecisionAlreadyDecided || de.By != "console:req" || de.At.IsZero() || !de.Question {
			t.Fatalf("second answer refused with %+v", err)
		}
		if txt := core.RefusalText(de); !strings.HasPrefix(txt, "ℹ️ Already answered by console:req at ") {
			t.Errorf("refusal text %q", txt)
		}
	})
}

// A question's buttons and forms answer through the same path: a skip of
// an optional question, a free text, a choice; a skip of a question that
// may not be skipped is refused and the question still waits.
func TestAnswerEventSkipTextAndChoice(t *testing.T) {
	for name, c := range map[string]struct {
		ask    string
		ev     core.AnswerEvent
		want   string
		refuse core.DecisionCode
	}{
		"Skip":        {`{"questions":[{"id":"why","kind":"text","text":"Why?","optional":true}]}`, core.AnswerEvent{Skip: true}, `"isSkipped":true`, ""},
		"SkipRefused": {`{"questions":[{"id":"why","kind":"text","text":"Why?"}]}`, core.AnswerEvent{Skip: true}, "", core.DecisionInvalidArgs},
		"Text":        {`{"questions":[{"id":"why","kind":"text","text":"Why?"}]}`, core.AnswerEvent{Text: "because"}, `"answer":"because"`, ""},
		"Choice":      {`{"questions":[{"id":"env","kind":"choice","text":"Where?","choices":["a","b"]}]}`, core.AnswerEvent{Choice: 1}, `"answer":"b"`, ""},
		"Confirm":     {`{"questions":[{"id":"ok","kind":"confirm","text":"Sure?"}]}`, core.AnswerEvent{Choice: 1}, `"answer":"no"`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			h, sc := agentSetup(t, backends[0])
			sc.Push(call("ask_user", c.ask), fakellm.Say("Done."))
			rc := h.send("console:req", "console:ev-"+name, "go")
			h.waitRun(rc.RunID, core.RunWaitingInput)
			an := c.ev
			an.RunID, an.ActionID = rc.RunID, "ask-0"
			ev := h.event("console:req", "console:ev-"+name, "")
			ev.Answer = &an
			_, err := h.eng.HandleEvent(context.Background(), ev)
			var de *core.DecisionError
			if c.refuse != "" {
				if !errors.As(err, &de) || de.Code != c.refuse {
					t.Fatalf("err = %v, want %s", err, c.refuse)
				}
				if r := h.waitRun(rc.RunID, core.RunWaitingInput); r.Status != core.RunWaitingInput {
					t.Fatalf("run %s", r.Status)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			h.waitRun(rc.RunID, core.RunSucceeded)
			if txt := requestText(t, sc, 1); !strings.Contains(txt, c.want) {
				t.Fatalf("the model got:\n%s\nwant %s", txt, c.want)
			}
		})
	}
}

// What the model says before its tool calls reaches the thread, in order:
// the interim text before the final answer.
func TestInterimTextReachesTheThread(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h, sc := agentSetup(t, b)
		turn := call("status", `{"service":"api","reason":"you asked about api"}`)
		turn.Text = []string{"Checking api first."}
		sc.Push(turn, fakellm.Say("api is healthy."))
		rc := h.send("console:req", "console:interim", "how is api?")
		h.waitRun(rc.RunID, core.RunSucceeded)
		var texts []string
		for _, d := range h.outboxOf(rc.RunID, "") {
			texts = append(texts, d.Text)
		}
		if len(texts) != 2 || texts[0] != "Checking api first." || texts[1] != "api is healthy." {
			t.Fatalf("thread got %q; want the interim text, then the answer", texts)
		}
	})
}
