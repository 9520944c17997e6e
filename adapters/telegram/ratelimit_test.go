package telegram

import (
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/telegram/internal/faketelegram"
	"github.com/opsgate/opsgate/core"
)

// A storm of 429s in the middle of a multi-part reply, through the real
// delivery pipeline: nothing is lost or sent twice, the order holds, and
// no sendMessage follows a 429 earlier than its retry_after.
func TestRateLimitStormThroughPipeline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	th := core.Thread{Channel: ChannelName, Key: threadKey{Chat: groupChat}.String()}
	const storm = 3
	const retryAfter = time.Second
	tooMany := faketelegram.Failure{Code: 429, Description: "Too Many Requests: retry after 1", RetryAfter: 1}
	// The first part goes through; the next three attempts are refused.
	e.fake.FailAfter("sendMessage", 1, tooMany, tooMany, tooMany)

	long, lines := adaptertest.LongReply(10 << 10)
	first := e.h.QueueReply(th, long)
	second := e.h.QueueReply(th, "after the storm")
	d := e.h.WaitDelivered(first)
	e.h.WaitDelivered(second)
	if d.ChunksSent < 3 {
		t.Fatalf("long reply went out in %d parts, want ≥ 3 so the storm hits its middle", d.ChunksSent)
	}

	var all strings.Builder
	var texts []string
	for _, en := range e.fake.Log() {
		if en.Method == "sendMessage" && en.Chat == groupChat {
			texts = append(texts, visible(en.Text))
		}
	}
	if len(texts) != d.ChunksSent+1 {
		t.Fatalf("fake accepted %d messages, want %d parts + 1: lost or sent twice", len(texts), d.ChunksSent)
	}
	for _, s := range texts[:len(texts)-1] {
		all.WriteString(s + "\n")
	}
	if err := adaptertest.CheckLines(all.String(), lines); err != nil {
		t.Error(err)
	}
	if last := texts[len(texts)-1]; last != "after the storm" {
		t.Errorf("last message = %q, want the second reply after every part of the first", last)
	}

	calls := e.fake.Calls("sendMessage")
	limited := 0
	for i, c := range calls {
		if c.Failed != 429 {
			continue
		}
		limited++
		if i == 0 {
			t.Fatal("the very first send was refused; the storm should follow a success")
		}
		if i+1 >= len(calls) {
			t.Fatalf("nothing was sent after the 429 at call %d", i)
		}
		if gap := calls[i+1].At.Sub(c.At); gap < retryAfter {
			t.Errorf("call %d came %v after a 429 asking for %v: retried early", i+1, gap, retryAfter)
		}
	}
	if limited != storm {
		t.Errorf("the fake answered %d 429s, want %d in a row", limited, storm)
	}
	if n := len(calls); n != len(texts)+storm {
		t.Errorf("%d sendMessage calls for %d messages and %d 429s: the SDK or pipeline retried on its own", n, len(texts), storm)
	}
}
