package signal

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
)

func TestConformance(t *testing.T) {
	adaptertest.RunConformance(t, adaptertest.Suite{
		New: func(t *testing.T, o adaptertest.HarnessOptions) (*adaptertest.Harness, adaptertest.Fake) {
			e := newEnv(t, envOpts{noRun: true, base: o})
			envs.Store(e.h, e)
			return e.h, received{e.fake}
		},
		Chat: func(t *testing.T, h *adaptertest.Harness) adaptertest.Chat {
			e, _ := envs.Load(h)
			return chatDriver{e.(*env)}
		},
		Lacks: map[adaptertest.Capability]string{
			adaptertest.CapButtons: "Signal has no buttons: a question is answered by quoting it (a choice by its number, \"yes\", \"skip\"), a batch by \"approve all CODE\"",
			adaptertest.CapForms:   "Signal has no forms: a question answered in words is answered by quoting it",
		},
		Thread:    core.Thread{Channel: ChannelName, Key: "dm:" + aliceNumber},
		Requester: "signal:" + aliceNumber,
		Approver:  "signal:" + bobNumber,
		Inert: func(input, rendered string) error {
			// Signal renders no markup from text; what matters is that
			// nothing is lost or turned into something else.
			if strings.TrimSpace(rendered) == "" && strings.ContainsFunc(input, unicode.IsLetter) {
				return fmt.Errorf("text lost")
			}
			return nil
		},
		BadInput: func(t *testing.T, h *adaptertest.Harness) { badInput(t, h.Platform.(*Adapter)) },
	})
}

// envs maps each conformance harness to its env, for the Chat driver.
var envs sync.Map

// chatDriver speaks to the adapter as signal-cli's event stream does:
// replayed envelopes from testdata (a group message, a quote of the bot's
// message, a direct message) with the sender and text of the case.
type chatDriver struct{ e *env }

var _ adaptertest.Direct = chatDriver{}

func (d chatDriver) handle(t *testing.T, data string) {
	t.Helper()
	if err := d.e.ad.handleData(context.Background(), []byte(data)); err != nil {
		t.Fatalf("handle %s: %v", data, err)
	}
}

func number(actor string) string { return strings.TrimPrefix(actor, ChannelName+":") }

// Say addresses the bot in the ops group.
func (d chatDriver) Say(t *testing.T, actor, text string) {
	s := strings.ReplaceAll(d.e.payload("receive_group.json", 0), aliceNumber, number(actor))
	d.handle(t, strings.Replace(s, `"message":"!ops deploy api 1.2.3"`, `"message":`+strconv.Quote("!ops "+text), 1))
}

// Reply quotes the bot's message, in its conversation.
func (d chatDriver) Reply(t *testing.T, actor string, to adaptertest.Message, text string) {
	k, ts, err := parseMessageRef(to.ID)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal([]byte(d.e.payload("receive_quote.json", ts)), &env); err != nil {
		t.Fatal(err)
	}
	e := env["envelope"].(map[string]any)
	e["source"], e["sourceNumber"] = number(actor), number(actor)
	dm := e["dataMessage"].(map[string]any)
	dm["message"] = text
	dm["quote"].(map[string]any)["text"] = to.Text
	if k.Group != "" {
		dm["groupInfo"] = map[string]any{"groupId": k.Group, "groupName": "ops", "revision": 3, "type": "DELIVER"}
	}
	b, _ := json.Marshal(env)
	d.handle(t, string(b))
}

// SayDirect writes to the bot directly.
func (d chatDriver) SayDirect(t *testing.T, actor, text string) {
	d.handle(t, d.e.dm(number(actor), text))
}

// badInput hands the adapter forged, malformed, misdirected and oversized
// envelopes as the event stream would; none reaches the store.
func badInput(t *testing.T, ad *Adapter) {
	t.Helper()
	ctx := context.Background()
	dm := func(from, text string) string {
		return fmt.Sprintf(`{"envelope":{"sourceNumber":%q,"timestamp":17,"dataMessage":{"timestamp":17,"message":%q}},"account":"+15550009999"}`, from, text)
	}
	for name, data := range map[string]string{
		"MalformedJSON":   `{"envelope":`,
		"NoEnvelope":      `{"account":"+15550009999"}`,
		"NoSender":        `{"envelope":{"timestamp":1,"dataMessage":{"message":"!ops deploy api 1.2.3"}}}`,
		"BadNumber":       dm("15550000001", "!ops deploy api 1.2.3"),
		"BadUUID":         `{"envelope":{"sourceUuid":"not-a-uuid","timestamp":1,"dataMessage":{"message":"!ops deploy"}}}`,
		"NoTimestamp":     `{"envelope":{"sourceNumber":"+15550000001","dataMessage":{"message":"!ops deploy"}}}`,
		"OtherAccount":    strings.Replace(dm(aliceNumber, "!ops deploy api 1.2.3"), `"account":"+15550009999"`, `"account":"+15551112222"`, 1),
		"OwnMessage":      dm(botNumber, "!ops deploy api 1.2.3"),
		"UnlistedGroup":   fmt.Sprintf(`{"envelope":{"sourceNumber":%q,"timestamp":2,"dataMessage":{"timestamp":2,"message":"!ops deploy api 1.2.3","groupInfo":{"groupId":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","type":"DELIVER"}}}}`, aliceNumber),
		"BadGroupID":      fmt.Sprintf(`{"envelope":{"sourceNumber":%q,"timestamp":3,"dataMessage":{"message":"!ops deploy","groupInfo":{"groupId":"<x>"}}}}`, aliceNumber),
		"Oversized":       dm(aliceNumber, "!ops deploy "+strings.Repeat("x", maxMessageBytes)),
		"UnknownCode":     dm(bobNumber, "approve ZZZZ"),
		"NoWhichApproval": dm(bobNumber, "approve"),
		"BadEditJSON":     dm(bobNumber, "edit {"),
		"ReactionToOther": fmt.Sprintf(`{"envelope":{"sourceNumber":%q,"timestamp":4,"dataMessage":{"timestamp":4,"reaction":{"emoji":"✅","targetAuthorNumber":%q,"targetSentTimestamp":99,"isRemove":false}}}}`, bobNumber, aliceNumber),
		"ReactionNoCard":  fmt.Sprintf(`{"envelope":{"sourceNumber":%q,"timestamp":5,"dataMessage":{"timestamp":5,"reaction":{"emoji":"✅","targetAuthorNumber":%q,"targetSentTimestamp":99,"isRemove":false}}}}`, bobNumber, botNumber),
		"QuoteOfOther":    fmt.Sprintf(`{"envelope":{"sourceNumber":%q,"timestamp":6,"dataMessage":{"timestamp":6,"message":"approve","quote":{"id":99,"authorNumber":%q,"text":"Approval needed"}}}}`, bobNumber, aliceNumber),
		"TypingOnly":      `{"envelope":{"sourceNumber":"+15550000001","timestamp":7,"typingMessage":{"action":"STARTED"}}}`,
	} {
		if err := ad.handleData(ctx, []byte(data)); err != nil {
			t.Errorf("%s: handleData = %v, want the envelope refused and done", name, err)
		}
	}
}
