package telegram

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/telegram/internal/faketelegram"
	"github.com/opsgate/opsgate/core"
)

// TestMedia runs adaptertest's media cases: Telegram edits a streamed
// reply with editMessageText, and a document sent to the bot in a private
// chat — with a caption, or alone — reaches the agent through getFile and
// the file download.
func TestMedia(t *testing.T) {
	var mu sync.Mutex
	envs := map[*adaptertest.Harness]*env{}
	adaptertest.RunMedia(t, adaptertest.MediaSuite{
		New: func(t *testing.T, tweak func(*adaptertest.HarnessOptions)) (*adaptertest.Harness, adaptertest.Fake) {
			e := newEnv(t, envOpts{harness: tweak})
			mu.Lock()
			envs[e.h] = e
			mu.Unlock()
			return e.h, received{e.fake}
		},
		Thread:    core.Thread{Channel: ChannelName, Key: "-100200/5/77"},
		Requester: "telegram:7",
		Edits:     true,
		SendFile: func(t *testing.T, h *adaptertest.Harness, _ adaptertest.Fake, text string, f adaptertest.File) string {
			mu.Lock()
			e := envs[h]
			mu.Unlock()
			u := e.document(requester, text, f)
			e.mustPost(u)
			run := e.h.LatestRun(core.Thread{Channel: ChannelName, Key: threadKey{Chat: requester}.String()})
			if run == nil {
				return ""
			}
			return run.ID
		},
		Fetcher: func(h *adaptertest.Harness) core.AttachmentFetcher { return adapterOf(t, h) },
	})
}

// document is an update in which user from sends f as a document (with
// caption text, when not empty) in a private chat, the fake holding its
// content.
func (e *env) document(from int64, caption string, f adaptertest.File) map[string]any {
	id := e.fake.AddFile(f.Name, f.Data)
	u := e.msg(from, from, 0, "")
	m := u["message"].(map[string]any)
	delete(m, "text")
	m["document"] = map[string]any{"file_name": f.Name, "mime_type": f.MimeType, "file_id": id,
		"file_unique_id": "AgAD" + id[len(id)-6:], "file_size": len(f.Data)}
	if caption != "" {
		m["caption"] = caption
	}
	return u
}

// TestReplayedFileMessages: real file messages normalize to their
// attachments — a document with its caption as the request, the largest
// size of a photo, a file addressed to the bot in a forum topic by a
// mention in its caption — and a file in a group that does not address the
// bot is not for us.
func TestReplayedFileMessages(t *testing.T) {
	t.Parallel()
	ad := &Adapter{}
	for file, want := range map[string]struct {
		text, ref, name, mime string
		kind                  core.AttachmentKind
		size                  int64
		ok                    bool
	}{
		"private_document_caption.json":   {"what does this say?", "BQACAgIAAxkBAAIBLWZmZ2Fk1234567890abcdefghijklmnoAAJkSQACvYVBS0pdZ3ZmZmZmNQQ", "disk-report.txt", "text/plain", core.AttachmentFile, 47, true},
		"private_photo.json":              {"", "AgACAgIAAxkBAAIBLmZmZ2Gs90largeAAJkSQACvYVBS0pdZ3ZmZmZmNQQ", "photo.jpg", "image/jpeg", core.AttachmentImage, 61203, true},
		"group_document_mention.json":     {"why is api failing?", "BQACAgIAAxkBAAIDh2ZmZ2Fsd0cRkN3oAAJlSQACvYVBS1p5m1k3bWVkNQQ", "api.log", "text/plain", core.AttachmentFile, 2211, true},
		"group_document_unaddressed.json": {ok: false},
	} {
		raw, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		u, err := parseUpdate(raw)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		text, files, ok := ad.requestOf(u.Message, "opsbot")
		if ok != want.ok {
			t.Fatalf("%s: ok %v, want %v", file, ok, want.ok)
		}
		if !ok {
			continue
		}
		if text != want.text || len(files) != 1 {
			t.Fatalf("%s: text %q, files %+v", file, text, files)
		}
		a := files[0]
		if a.Ref != want.ref || a.Name != want.name || a.MimeType != want.mime || a.Kind != want.kind || a.Size != want.size {
			t.Errorf("%s: attachment %+v, want %+v", file, a, want)
		}
	}
}

// TestDocumentWithCaptionStartsARun is the reported bug: a document with
// a caption sent to the bot was ignored (no run, no reply). Now it starts
// the run its caption asks for, carrying the file; a file alone in a
// private chat starts one too.
func TestDocumentWithCaptionStartsARun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.mustPost(e.document(requester, "deploy api 1.2.3", adaptertest.File{Name: "notes.txt", MimeType: "text/plain", Data: []byte("ship it")}))
	run := e.h.LatestRun(core.Thread{Channel: ChannelName, Key: threadKey{Chat: requester}.String()})
	if run == nil || run.Flow != "deploy" || len(run.Attachments) != 1 || run.Attachments[0].Name != "notes.txt" {
		t.Fatalf("run = %+v", run)
	}
	// Without an agent a file alone gets a reply saying why nothing started.
	e.mustPost(e.document(requester, "", adaptertest.File{Name: "alone.txt", MimeType: "text/plain", Data: []byte("x")}))
	e.waitMessage(requester, "the reply to a file alone", func(m faketelegram.Message) bool {
		return strings.Contains(visible(m.Text), "Received alone.txt") && strings.Contains(m.Text, "no agent reads files")
	})
}

// TestFetchAttachmentRefusals: getFile's size is judged before any
// download; an unknown file is gone; a file over the Bot API's 20 MB is too
// large; a file larger than getFile said is cut off at the limit; the token
// never appears in an error.
func TestFetchAttachmentRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data := []byte(strings.Repeat("log line\n", 100))
	big := e.fake.AddFile("big.log", data)
	if _, err := e.ad.FetchAttachment(ctx, core.NewAttachment(big, "big.log", "text/plain", 900), 100); !errors.Is(err, core.ErrAttachmentTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
	huge := e.fake.AddFile("huge.bin", data)
	e.fake.ReportSize(huge, 30<<20)
	if _, err := e.ad.FetchAttachment(ctx, core.NewAttachment(huge, "huge.bin", "", 30<<20), 64<<20); !errors.Is(err, core.ErrAttachmentTooLarge) {
		t.Errorf("over the Bot API's 20 MB: %v", err)
	}
	_, err := e.ad.FetchAttachment(ctx, core.NewAttachment("nope", "x", "", 1), 100)
	if !errors.Is(err, core.ErrAttachmentGone) {
		t.Errorf("unknown file_id: %v", err)
	}
	if len(e.fake.Downloads()) != 0 {
		t.Errorf("downloaded %v; refused files must not be", e.fake.Downloads())
	}
	grown := e.fake.AddFile("grown.log", data)
	e.fake.ReportSize(grown, 10)
	if _, err := e.ad.FetchAttachment(ctx, core.NewAttachment(grown, "grown.log", "text/plain", 10), 100); !errors.Is(err, core.ErrAttachmentTooLarge) || strings.Contains(err.Error(), testToken) {
		t.Errorf("larger than reported: %v", err)
	}
	ok := e.fake.AddFile("ok.log", data)
	got, err := e.ad.FetchAttachment(ctx, core.NewAttachment(ok, "ok.log", "text/plain", 900), 1<<20)
	if err != nil || string(got) != string(data) {
		t.Fatalf("fetch: %q, %v", got, err)
	}
	if _, err := e.ad.fileURL("documents/../../bot/x"); err == nil {
		t.Error("a file_path with .. was accepted")
	}
}
