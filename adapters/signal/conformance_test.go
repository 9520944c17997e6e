package signal

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
)

func TestConformance(t *testing.T) {
	adaptertest.RunConformance(t, adaptertest.Suite{
		New: func(t *testing.T) (*adaptertest.Harness, adaptertest.Fake) {
			e := newEnv(t, envOpts{noRun: true})
			return e.h, received{e.fake}
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
