package discord

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	discordapi "github.com/bwmarrin/discordgo"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/discord/internal/fakediscord"
	"github.com/opsgate/opsgate/core"
)

// TestMedia runs adaptertest's media cases: Discord edits a streamed
// reply (PATCH the message), and a file sent to the bot in a DM over the
// Gateway — with text, or alone — reaches the agent from the CDN.
func TestMedia(t *testing.T) {
	var mu sync.Mutex
	envs := map[*adaptertest.Harness]*env{}
	adaptertest.RunMedia(t, adaptertest.MediaSuite{
		New: func(t *testing.T, tweak func(*adaptertest.HarnessOptions)) (*adaptertest.Harness, adaptertest.Fake) {
			e := newEnv(t, envOpts{gateway: true, harness: tweak})
			mu.Lock()
			envs[e.h] = e
			mu.Unlock()
			return e.h, received{e}
		},
		Thread:    core.Thread{Channel: ChannelName, Key: guildID + "/" + conformanceChannel + "/" + conformanceChannel},
		Requester: "discord:" + requester,
		Edits:     true,
		SendFile: func(t *testing.T, h *adaptertest.Harness, _ adaptertest.Fake, text string, f adaptertest.File) string {
			mu.Lock()
			e := envs[h]
			mu.Unlock()
			e.startGateway()
			before := h.RunIDs()
			dm := e.id()
			if err := e.fake.Dispatch("MESSAGE_CREATE", map[string]any{
				"id": e.id(), "channel_id": dm, "content": text, "type": 0,
				"author":      map[string]any{"id": requester, "username": "req"},
				"attachments": []map[string]any{e.fake.AddAttachment(dm, f.Name, f.MimeType, f.Data)},
			}); err != nil {
				t.Fatal(err)
			}
			return h.WaitNewRun(ChannelName, before).ID
		},
		Fetcher: func(h *adaptertest.Harness) core.AttachmentFetcher {
			mu.Lock()
			defer mu.Unlock()
			return envs[h].ad
		},
	})
}

// startGateway runs the adapter's Gateway once, and waits for READY.
func (e *env) startGateway() {
	e.gatewayOnce.Do(func() {
		e.run()
		e.h.Eventually("READY handled", func() bool { return e.ad.getBotID() == fakediscord.BotID })
	})
}

// TestReplayedFileMessages: real MESSAGE_CREATEs with files normalize to
// their attachments — CDN links only (a link elsewhere is dropped) — and a
// DM of only a file addresses the bot.
func TestReplayedFileMessages(t *testing.T) {
	t.Parallel()
	var m discordapi.Message
	raw, err := os.ReadFile("testdata/message_create_attachment.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	text, ok := addressedText(&m, fakediscord.BotID)
	files := attachmentsOf(&m)
	if !ok || text != "why is api slow?" || len(files) != 2 {
		t.Fatalf("text %q ok %v files %+v", text, ok, files)
	}
	if f := files[0]; f.Name != "api.log" || f.Kind != core.AttachmentFile || f.Size != 2211 || !strings.HasPrefix(f.Ref, "https://cdn.discordapp.com/attachments/") {
		t.Errorf("first file %+v", f)
	}
	if f := files[1]; f.Kind != core.AttachmentImage || f.MimeType != "image/png" {
		t.Errorf("second file %+v", f)
	}
	raw, err = os.ReadFile("testdata/message_create_dm_file_only.json")
	if err != nil {
		t.Fatal(err)
	}
	var dm discordapi.Message
	if err := json.Unmarshal(raw, &dm); err != nil {
		t.Fatal(err)
	}
	if text, ok := addressedText(&dm, fakediscord.BotID); !ok || text != "" || len(attachmentsOf(&dm)) != 1 {
		t.Errorf("a DM of only a file: text %q ok %v", text, ok)
	}
	if _, ok := messageText(&dm, fakediscord.BotID); ok {
		t.Error("messageText accepts a message without text")
	}
}

// TestFetchAttachmentRefusals: the CDN's HEAD is judged before the
// download (too large, another kind); an expired link is gone; only the
// CDN is fetched from, and without the bot token.
func TestFetchAttachmentRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data := []byte(strings.Repeat("log line\n", 100))
	at := func(obj map[string]any) core.Attachment {
		return core.NewAttachment(obj["url"].(string), obj["filename"].(string), obj["content_type"].(string), int64(obj["size"].(int)))
	}
	big := at(e.fake.AddAttachment("7", "big.log", "text/plain", data))
	if _, err := e.ad.FetchAttachment(ctx, big, 100); !errors.Is(err, core.ErrAttachmentTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
	swapped := at(e.fake.AddAttachment("7", "x.png", "application/zip", data))
	swapped.Kind, swapped.MimeType = core.AttachmentImage, "image/png"
	if _, err := e.ad.FetchAttachment(ctx, swapped, 1<<20); !errors.Is(err, core.ErrAttachmentKind) {
		t.Errorf("another kind: %v", err)
	}
	gone := e.fake.AddAttachment("7", "gone.log", "text/plain", data)
	e.fake.ExpireAttachment(gone["id"].(string))
	if _, err := e.ad.FetchAttachment(ctx, at(gone), 1<<20); !errors.Is(err, core.ErrAttachmentGone) {
		t.Errorf("expired link: %v", err)
	}
	if _, err := e.ad.FetchAttachment(ctx, core.NewAttachment("https://evil.example/attachments/7/1/x.txt?hm=1", "x.txt", "text/plain", 3), 1<<20); err == nil {
		t.Error("fetched from outside Discord's CDN")
	}
	if d := e.fake.Downloads(); len(d) != 0 {
		t.Errorf("downloaded %v; refused files must not be", d)
	}
	ok := at(e.fake.AddAttachment("7", "ok.log", "text/plain", data))
	got, err := e.ad.FetchAttachment(ctx, ok, 1<<20)
	if err != nil || string(got) != string(data) {
		t.Fatalf("fetch: %q %v", got, err)
	}
}
