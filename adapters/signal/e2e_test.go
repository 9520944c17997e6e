package signal

import (
	"strconv"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/adapters/signal/internal/fakesignal"
	"github.com/opsgate/opsgate/core"
)

// TestApprovalRoundTrip: alice asks by direct message, the card comes back
// with a code, carol ("approve CODE", not an approver) is refused, bob's ✅
// reaction approves, the card is edited in place and the result follows.
func TestApprovalRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.fake.Push(e.dm(aliceNumber, "!ops deploy api 1.2.3"))
	card := e.waitSent("the card to alice", func(s fakesignal.Sent) bool {
		return strings.Contains(s.Message, "Approval needed") && len(s.Recipient) == 1 && s.Recipient[0] == aliceNumber
	})
	runs := e.runs()
	if len(runs) != 1 {
		t.Fatalf("runs = %d", len(runs))
	}
	code := codeFor(mustApproval(t, e, runs[0].ID), 4)
	if !strings.Contains(card.Message, "approve "+code) {
		t.Fatalf("card does not show code %s:\n%s", code, card.Message)
	}
	e.fake.Push(e.dm(carolNumber, "approve "+code))
	e.waitSent("carol refused", func(s fakesignal.Sent) bool { return strings.Contains(s.Message, "may not decide") })
	if got := e.h.RefusedActions("signal:" + carolNumber); got["approve"] != 1 {
		t.Errorf("carol's refusal audited %v", got)
	}
	e.h.Eventually("the card's timestamp stored", func() bool {
		id, _ := e.ad.lookup(t.Context(), e.ad.cardKey(card.Timestamp))
		return id != ""
	})
	r := strings.ReplaceAll(e.payload("receive_reaction.json", card.Timestamp), "+15550000002", bobNumber)
	e.fake.Push(r)
	e.h.WaitRun(runs[0].ID, core.RunSucceeded)
	e.waitSent("the card edited", func(s fakesignal.Sent) bool {
		return s.EditTimestamp == card.Timestamp && strings.Contains(s.Message, "Approved by signal:"+bobNumber)
	})
	e.waitSent("the result", func(s fakesignal.Sent) bool { return strings.Contains(s.Message, "deployed api 1.2.3 to staging") })
	if n := len(e.h.Dispatches()); n != 1 {
		t.Errorf("dispatched %d times", n)
	}
}

func mustApproval(t *testing.T, e *env, runID string) string {
	t.Helper()
	return e.h.WaitApprovalPending(runID).ID
}

// TestGroupRequestQuoteReject: a request in a listed group, rejected by
// quoting the card with a reason.
func TestGroupRequestQuoteReject(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.fake.Push(e.payload("receive_group.json", 0))
	card := e.waitSent("the card in the group", func(s fakesignal.Sent) bool {
		return s.GroupID == opsGroup && strings.Contains(s.Message, "Approval needed")
	})
	q := e.payload("receive_quote.json", card.Timestamp)
	q = strings.Replace(q, `"text":"Approval needed: deploy service=api version=1.2.3"`, `"text":`+strconv.Quote(card.Message), 1)
	q = strings.Replace(q, `"dataMessage":{`, `"dataMessage":{"groupInfo":{"groupId":"`+opsGroup+`","type":"DELIVER"},`, 1)
	e.fake.Push(q)
	e.h.WaitRun(e.runs()[0].ID, core.RunRejected)
	e.waitSent("the card edited", func(s fakesignal.Sent) bool {
		return s.EditTimestamp == card.Timestamp && strings.Contains(s.Message, "not during the freeze")
	})
}

// TestEditByCode: "edit CODE {json}" approves new arguments.
func TestEditByCode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.fake.Push(e.dm(aliceNumber, "deploy api 1.2.3"))
	e.waitSent("the card", func(s fakesignal.Sent) bool { return strings.Contains(s.Message, "Approval needed") })
	code := codeFor(mustApproval(t, e, e.runs()[0].ID), 4)
	e.fake.Push(e.dm(bobNumber, `edit `+code+` {"service":"api","version":"1.2.4"}`))
	e.h.WaitRun(e.runs()[0].ID, core.RunSucceeded)
	if c := e.h.Dispatches(); len(c) != 1 || c[0].Args["version"] != "1.2.4" {
		t.Errorf("dispatches %+v", c)
	}
}

// TestRateLimitHonoured: signal-cli's rate-limit error (-5) pauses the
// conversation for its retryAfterSeconds; the message still arrives once.
func TestRateLimitHonoured(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noRun: true})
	var rl *core.RateLimitError
	e.fake.RateLimitNext(1, 7)
	_, err := e.ad.Send(t.Context(), core.Outbound{Key: "k", Kind: core.KindReply, Text: "hi", Thread: core.Thread{Channel: ChannelName, Key: "dm:" + aliceNumber}})
	if !asRate(err, &rl) || rl.RetryAfter.Seconds() != 7 {
		t.Fatalf("rate-limited send = %v, want RateLimitError after 7s", err)
	}
	if _, err := e.ad.Send(t.Context(), core.Outbound{Key: "k", Kind: core.KindReply, Text: "hi", Thread: core.Thread{Channel: ChannelName, Key: "dm:+1"}}); err == nil {
		t.Error("send to a malformed thread succeeded")
	}
}

// TestReconnectResumesAfterLastEvent: events handled before a restart are
// not handled again; one pushed while opsgate was down is.
func TestReconnectResumesAfterLastEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.fake.Push(e.dm(aliceNumber, "deploy api 1.2.3"))
	e.h.Eventually("the first run and its stream position", func() bool {
		_, err := e.h.Store.StateGet(t.Context(), e.ad.lastEventKey())
		return len(e.runs()) == 1 && err == nil
	})
	e.stop()
	e.h.Eventually("the reader to disconnect", func() bool { return e.fake.Clients() == 0 })
	e.fake.Push(e.dm(aliceNumber, "deploy web 2.0.0"))
	e.ad = e.newAdapter(e.h)
	e.start()
	e.h.Eventually("the run sent while down", func() bool { return len(e.runs()) == 2 })
	// A later message answered proves the replay was read to its end.
	e.fake.Push(e.dm(bobNumber, "help"))
	e.waitSent("the answer to bob", func(s fakesignal.Sent) bool { return len(s.Recipient) == 1 && s.Recipient[0] == bobNumber })
	if n := len(e.runs()); n != 2 {
		t.Errorf("runs = %d after the restart, want 2 (none repeated)", n)
	}
}
