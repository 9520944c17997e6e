package signal

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
)

// TestMedia runs adaptertest's media cases: Signal does not stream
// (clients label every edit and cap them), so streamed text falls back to
// the final answer alone; a file sent to the bot (with text, or alone)
// reaches the agent through signal-cli's getAttachment.
func TestMedia(t *testing.T) {
	var mu sync.Mutex
	envs := map[*adaptertest.Harness]*env{}
	adaptertest.RunMedia(t, adaptertest.MediaSuite{
		New: func(t *testing.T, tweak func(*adaptertest.HarnessOptions)) (*adaptertest.Harness, adaptertest.Fake) {
			var probe adaptertest.HarnessOptions
			tweak(&probe)
			e := newEnv(t, envOpts{noRun: probe.Agents == nil, harness: tweak})
			mu.Lock()
			envs[e.h] = e
			mu.Unlock()
			return e.h, received{e.fake}
		},
		Thread:    core.Thread{Channel: ChannelName, Key: "dm:" + aliceNumber},
		Requester: "signal:" + aliceNumber,
		Edits:     false,
		SendFile: func(t *testing.T, h *adaptertest.Harness, _ adaptertest.Fake, text string, f adaptertest.File) string {
			mu.Lock()
			e := envs[h]
			mu.Unlock()
			before := h.RunIDs()
			e.fake.Push(e.fileDM(aliceNumber, text, f))
			return h.WaitNewRun(ChannelName, before).ID
		},
		Fetcher: func(h *adaptertest.Harness) core.AttachmentFetcher {
			mu.Lock()
			defer mu.Unlock()
			return envs[h].ad
		},
	})
}

// fileDM is a direct message from number with f attached (signal-cli
// holding its content), shaped like testdata/receive_attachment.json.
func (e *env) fileDM(number, text string, f adaptertest.File) string {
	var rv map[string]any
	if err := json.Unmarshal([]byte(e.payload("receive_attachment.json", 0)), &rv); err != nil {
		e.t.Fatal(err)
	}
	env := rv["envelope"].(map[string]any)
	env["sourceNumber"], env["source"] = number, number
	d := env["dataMessage"].(map[string]any)
	d["message"] = text
	if text == "" {
		d["message"] = nil
	}
	d["attachments"] = []map[string]any{e.fake.AddAttachment(f.Name, f.MimeType, f.Data)}
	b, err := json.Marshal(rv)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// TestReplayedFileMessages: recorded envelopes with files normalize to
// their attachments (with the conversation in the ref): a DM's file with
// its text starts the run the text asks for, carrying the file; a group's
// file without "!ops" is not for us; a malformed attachment refuses the
// envelope.
func TestReplayedFileMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noRun: true})
	ctx := context.Background()
	dm := strings.Replace(e.payload("receive_attachment.json", 0), `"message":"what does this say?"`, `"message":"deploy api 1.2.3"`, 1)
	if err := e.ad.handleData(ctx, []byte(dm)); err != nil {
		t.Fatal(err)
	}
	if err := e.ad.handleData(ctx, []byte(e.payload("receive_group_photo.json", 0))); err != nil {
		t.Fatal(err)
	}
	runs := e.runs()
	if len(runs) != 1 || runs[0].Flow != "deploy" || len(runs[0].Attachments) != 1 {
		t.Fatalf("runs %+v, want the DM's deploy with its file (the group's unaddressed photo starts none)", runs)
	}
	if a := runs[0].Attachments[0]; a.Ref != "dm:"+aliceNumber+"#ZwTlzAkE0YDJlp6aiTXQ.txt" || a.Name != "disk-report.txt" || a.Size != 47 || a.Kind != core.AttachmentFile {
		t.Errorf("DM file = %+v", a)
	}
	rv, err := parseReceive([]byte(e.payload("receive_group_photo.json", 0)))
	if err != nil {
		t.Fatal(err)
	}
	photo := attachmentsOf(threadKey{Group: opsGroup}, rv.Envelope.DataMessage)
	if len(photo) != 1 || photo[0].Kind != core.AttachmentImage || photo[0].Name != "3aYq7Pz0fK1rLx9WbNcM.jpg" || photo[0].Ref != "group:"+opsGroup+"#3aYq7Pz0fK1rLx9WbNcM.jpg" {
		t.Errorf("group photo = %+v", photo)
	}
	for old, bad := range map[string]string{
		`"id":"ZwTlzAkE0YDJlp6aiTXQ.txt"`:  `"id":"../../etc/passwd"`,
		`"id":"ZwTlzAkE0YDJlp6aiTXQ.txt",`: `"id":"",`,
		`"size":47`:                        `"size":-1`,
	} {
		if _, err := parseReceive([]byte(strings.Replace(e.payload("receive_attachment.json", 0), old, bad, 1))); err == nil {
			t.Errorf("accepted an attachment with %s", bad)
		}
	}
}

// TestFetchAttachmentRefusals: the recorded size is judged before
// getAttachment is asked; an unknown id is gone; an answer larger than
// the limit allows is cut off unread.
func TestFetchAttachmentRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noRun: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data := []byte(strings.Repeat("log line\n", 100))
	obj := e.fake.AddAttachment("a.log", "text/plain", data)
	ref := "dm:" + aliceNumber + "#" + obj["id"].(string)
	if _, err := e.ad.FetchAttachment(ctx, core.NewAttachment(ref, "a.log", "text/plain", 900), 100); !errors.Is(err, core.ErrAttachmentTooLarge) {
		t.Errorf("recorded over the limit: %v", err)
	}
	if n := len(e.fake.Fetched()); n != 0 {
		t.Errorf("getAttachment asked %d times for a file over the limit", n)
	}
	if _, err := e.ad.FetchAttachment(ctx, core.NewAttachment(ref, "a.log", "text/plain", 50), 100); !errors.Is(err, core.ErrAttachmentTooLarge) {
		t.Errorf("larger than recorded: %v", err)
	}
	if _, err := e.ad.FetchAttachment(ctx, core.NewAttachment("dm:"+aliceNumber+"#nosuch.txt", "x", "text/plain", 5), 100); !errors.Is(err, core.ErrAttachmentGone) {
		t.Errorf("unknown id: %v", err)
	}
	got, err := e.ad.FetchAttachment(ctx, core.NewAttachment(ref, "a.log", "text/plain", int64(len(data))), 1<<20)
	if err != nil || string(got) != string(data) {
		t.Fatalf("fetch: %q %v", got, err)
	}
}
