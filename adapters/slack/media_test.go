package slack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
)

// TestMedia runs adaptertest's media cases: Slack edits a streamed reply
// with chat.update, and a file shared in a DM (a file_share message,
// replayed from testdata) reaches the agent through files.info and
// url_private_download with the bot token.
func TestMedia(t *testing.T) {
	var mu sync.Mutex
	envs := map[*adaptertest.Harness]*env{}
	adaptertest.RunMedia(t, adaptertest.MediaSuite{
		New: func(t *testing.T, tweak func(*adaptertest.HarnessOptions)) (*adaptertest.Harness, adaptertest.Fake) {
			e := setup(t, func(_ *Config, ho *adaptertest.HarnessOptions) { tweak(ho) })
			mu.Lock()
			envs[e.h] = e
			mu.Unlock()
			return e.h, received{e.fake}
		},
		Thread:    core.Thread{Channel: channelName, Key: "T1/C1/1700000000.000001"},
		Requester: "slack:UREQ",
		Edits:     true,
		SendFile: func(t *testing.T, h *adaptertest.Harness, _ adaptertest.Fake, text string, f adaptertest.File) string {
			mu.Lock()
			e := envs[h]
			mu.Unlock()
			return e.shareFile(text, f)
		},
		Fetcher: func(h *adaptertest.Harness) core.AttachmentFetcher {
			mu.Lock()
			defer mu.Unlock()
			return envs[h].a
		},
	})
}

// shareFile has UREQ share f in a DM with text, as Slack's file_share
// event (testdata/event_message_file_share.json), and returns the run it
// started.
func (e *env) shareFile(text string, f adaptertest.File) string {
	e.t.Helper()
	id := e.fake.AddFile(f.Name, f.MimeType, f.Data)
	n := e.seq.Add(1)
	ts := fmt.Sprintf("1700000400.%06d", n)
	quoted, _ := json.Marshal(text)
	body := fill(e.t, "event_message_file_share.json", map[string]string{
		"TEXT": strings.Trim(string(quoted), `"`), "FILE": id, "NAME": f.Name, "MIME": f.MimeType,
		"SIZE": fmt.Sprint(len(f.Data)), "TS": ts, "EVENT": fmt.Sprintf("EvFILE%d", n),
	})
	status(e.t, e.event(body, nil), http.StatusOK)
	run := e.h.LatestRun(core.Thread{Channel: channelName, Key: "T1/D1/" + ts})
	if run == nil {
		return ""
	}
	return run.ID
}
