package matrix

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
)

// TestMedia runs adaptertest's media cases against a real homeserver: a
// streamed reply is one notice replaced in place (m.replace), and a file
// alice sends mentioning the bot (with a caption, or alone) is uploaded to
// the homeserver and reaches the agent through the authenticated media
// endpoint.
func TestMedia(t *testing.T) {
	w := newWorld(t, false) // skips loudly (fails under CI) without Dendrite
	root := w.say(w.alice, "hello", nil)
	var mu sync.Mutex
	envs := map[*adaptertest.Harness]*env{}
	adaptertest.RunMedia(t, adaptertest.MediaSuite{
		New: func(t *testing.T, tweak func(*adaptertest.HarnessOptions)) (*adaptertest.Harness, adaptertest.Fake) {
			// Only a case with agents reads the room: several bots share it.
			var probe adaptertest.HarnessOptions
			tweak(&probe)
			e := newEnv(t, envOpts{world: w, noRun: probe.Agents == nil, harness: tweak})
			mu.Lock()
			envs[e.h] = e
			mu.Unlock()
			return e.h, received{e}
		},
		Thread:    core.Thread{Channel: ChannelName, Key: threadKey{Room: w.room, Root: id.EventID(root)}.String()},
		Requester: "matrix:" + string(w.alice.UserID),
		Edits:     true,
		SendFile: func(t *testing.T, h *adaptertest.Harness, _ adaptertest.Fake, text string, f adaptertest.File) string {
			mu.Lock()
			e := envs[h]
			mu.Unlock()
			before := h.RunIDs()
			e.sendFile(e.alice, text, f, []id.UserID{e.bot.UserID})
			return h.WaitNewRun(ChannelName, before).ID
		},
		Fetcher: func(h *adaptertest.Harness) core.AttachmentFetcher {
			mu.Lock()
			defer mu.Unlock()
			return envs[h].ad
		},
	})
}

// sendFile uploads f as c and sends it into the room (m.image for an
// image, m.file otherwise) with caption as its body, mentioning users;
// it returns the event id and the mxc:// URI.
func (e *env) sendFile(c *mautrix.Client, caption string, f adaptertest.File, mention []id.UserID) (id.EventID, id.ContentURI) {
	e.t.Helper()
	ctx := context.Background()
	up, err := c.UploadBytesWithName(ctx, f.Data, f.MimeType, f.Name)
	if err != nil {
		e.t.Fatalf("upload %s: %v", f.Name, err)
	}
	msgtype := "m.file"
	if strings.HasPrefix(f.MimeType, "image/") {
		msgtype = "m.image"
	}
	body := caption
	if body == "" {
		body = f.Name
	}
	content := map[string]any{"msgtype": msgtype, "body": body, "filename": f.Name, "url": up.ContentURI.String(),
		"info": map[string]any{"mimetype": f.MimeType, "size": len(f.Data)}}
	if len(mention) > 0 {
		content["m.mentions"] = map[string]any{"user_ids": mention}
	}
	resp, err := c.SendMessageEvent(ctx, e.room, event.EventMessage, content)
	if err != nil {
		e.t.Fatalf("send %s: %v", f.Name, err)
	}
	return resp.EventID, up.ContentURI
}

// TestRealHomeserverFileRequests: a file in a listed room is a request
// only when it addresses the bot (a mention, or !ops in its caption); the
// request's run carries the file as an attachment with its mxc:// URI.
func TestRealHomeserverFileRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	f := adaptertest.File{Name: "notes.txt", MimeType: "text/plain", Data: []byte("hello from a file")}
	e.sendFile(e.alice, "", f, nil)                                 // not addressed
	e.sendFile(e.alice, "what is this?", f, nil)                    // a caption, still not addressed
	ev, uri := e.sendFile(e.alice, "!ops deploy api 1.2.3", f, nil) // addressed by its caption
	var run *core.Run
	e.h.Eventually("the addressed file's run", func() bool {
		for _, r := range e.runs() {
			if r.EventID == string(ev) {
				run = r
			}
		}
		return run != nil
	})
	if n := len(e.runs()); n != 1 {
		t.Errorf("%d runs; the unaddressed files must start none", n)
	}
	if run.Flow != "deploy" || len(run.Attachments) != 1 || run.Attachments[0].Ref != uri.String() || run.Attachments[0].Size != int64(len(f.Data)) {
		t.Fatalf("run %+v", run)
	}
}

// TestFetchAttachmentRefusals: the recorded size is judged before any
// request; an unknown media id is gone; content larger than the event
// said is cut off at the limit.
func TestFetchAttachmentRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noRun: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data := []byte(strings.Repeat("log line\n", 100))
	up, err := e.alice.UploadBytesWithName(ctx, data, "text/plain", "a.log")
	if err != nil {
		t.Fatal(err)
	}
	ref := up.ContentURI.String()
	if _, err := e.ad.FetchAttachment(ctx, core.NewAttachment(ref, "a.log", "text/plain", 900), 100); !errors.Is(err, core.ErrAttachmentTooLarge) {
		t.Errorf("recorded over the limit: %v", err)
	}
	if _, err := e.ad.FetchAttachment(ctx, core.NewAttachment(ref, "a.log", "text/plain", 50), 100); !errors.Is(err, core.ErrAttachmentTooLarge) {
		t.Errorf("larger than recorded: %v", err)
	}
	if _, err := e.ad.FetchAttachment(ctx, core.NewAttachment("mxc://localhost/nosuchmedia0000", "x", "text/plain", 5), 100); !errors.Is(err, core.ErrAttachmentGone) {
		t.Errorf("unknown media: %v", err)
	}
	got, err := e.ad.FetchAttachment(ctx, core.NewAttachment(ref, "a.log", "text/plain", 900), 1<<20)
	if err != nil || string(got) != string(data) {
		t.Fatalf("fetch: %q %v", got, err)
	}
}

// TestReplayedFileEvents: real file events normalize to their attachment
// (a caption is the request; a file without one is named by its body) and
// an encrypted file, whose key opsgate does not hold, to none.
func TestReplayedFileEvents(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]struct {
		ok                  bool
		caption, name, mime string
		kind                core.AttachmentKind
		size                int64
	}{
		"m_file_caption.json":   {true, "!ops why does api fail?", "api.log", "text/plain", core.AttachmentFile, 2211},
		"m_image.json":          {true, "", "latency.png", "image/png", core.AttachmentImage, 61203},
		"m_file_encrypted.json": {ok: false},
	} {
		raw, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		ev, err := parseEvent(raw)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		m, err := ev.message()
		if err != nil || !fileTypes[m.MsgType] {
			t.Fatalf("%s: %v %+v", file, err, m)
		}
		a, ok := fileAttachment(m)
		if ok != want.ok {
			t.Fatalf("%s: ok %v", file, ok)
		}
		if !ok {
			continue
		}
		if m.caption() != want.caption || a.Name != want.name || a.MimeType != want.mime || a.Kind != want.kind || a.Size != want.size || !strings.HasPrefix(a.Ref, "mxc://example.org/") {
			t.Errorf("%s: caption %q attachment %+v", file, m.caption(), a)
		}
	}
}
