package discord

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
)

// A storm of consecutive 429s in the middle of a multi-part reply, through
// the real delivery pipeline: nothing is lost or sent twice, the order
// holds, and no message POST follows a 429 earlier than its retry_after.
func TestRateLimitStormThroughPipeline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	const storm = 3
	const retryAfter = 500 * time.Millisecond
	// The first part goes through; the next three attempts are refused.
	e.fake.Fail429After(1, storm, retryAfter.Seconds())

	long, lines := adaptertest.LongReply(5 << 10)
	first := e.h.QueueReply(convThread, long)
	second := e.h.QueueReply(convThread, "after the storm")
	d := e.h.WaitDelivered(first)
	e.h.WaitDelivered(second)
	if d.ChunksSent < 3 {
		t.Fatalf("long reply went out in %d parts, want ≥ 3 so the storm hits its middle", d.ChunksSent)
	}

	var texts []string
	for _, ev := range e.fake.Log() {
		if ev.ChannelID == channelID && !ev.Edit {
			texts = append(texts, ev.Content)
		}
	}
	if len(texts) != d.ChunksSent+1 {
		t.Fatalf("fake accepted %d messages, want %d parts + 1: lost or sent twice", len(texts), d.ChunksSent)
	}
	if err := adaptertest.CheckLines(strings.Join(texts[:len(texts)-1], "\n"), lines); err != nil {
		t.Error(err)
	}
	if last := texts[len(texts)-1]; last != "after the storm" {
		t.Errorf("last message = %q, want the second reply after every part of the first", last)
	}

	var posts []struct {
		status int
		at     time.Time
	}
	for _, r := range e.fake.Requests() {
		if r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/channels/"+channelID+"/messages") {
			posts = append(posts, struct {
				status int
				at     time.Time
			}{r.Status, r.At})
		}
	}
	limited, run, longest := 0, 0, 0
	for i, p := range posts {
		if p.status != http.StatusTooManyRequests {
			run = 0
			continue
		}
		limited++
		run++
		longest = max(longest, run)
		if i+1 >= len(posts) {
			t.Fatalf("nothing was sent after the 429 at POST %d", i)
		}
		if gap := posts[i+1].at.Sub(p.at); gap < retryAfter {
			t.Errorf("POST %d came %v after a 429 asking for %v: retried early", i+1, gap, retryAfter)
		}
	}
	if limited != storm || longest != storm {
		t.Errorf("the fake answered %d 429s (%d in a row), want %d in a row", limited, longest, storm)
	}
	// One POST per message and per 429: discordgo did not retry silently.
	if n := len(posts); n != len(texts)+storm {
		t.Errorf("%d message POSTs for %d messages and %d 429s", n, len(texts), storm)
	}
}
