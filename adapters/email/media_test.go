package email

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
)

// TestMedia runs adaptertest's media cases: mail cannot be edited, so
// streamed text falls back to the final answer alone; a file attached to a
// mail (with a subject, or alone) reaches the agent, fetched again from
// the mailbox by its MIME part.
func TestMedia(t *testing.T) {
	thread := threadKey{Addr: alice, Root: "media-root@example.com", Subject: "status"}.thread()
	var envs sync.Map
	adaptertest.RunMedia(t, adaptertest.MediaSuite{
		New: func(t *testing.T, tweak func(*adaptertest.HarnessOptions)) (*adaptertest.Harness, adaptertest.Fake) {
			var probe adaptertest.HarnessOptions
			tweak(&probe)
			e := newEnv(t, envOptions{Approvers: []string{"console:admin"}, NoRun: probe.Agents == nil, Harness: tweak})
			e.smtp.threads["media-root@example.com"] = thread
			envs.Store(e.h, e)
			return e.h, e.smtp
		},
		Thread:    thread,
		Requester: Actor(alice),
		Edits:     false,
		SendFile: func(t *testing.T, h *adaptertest.Harness, _ adaptertest.Fake, text string, f adaptertest.File) string {
			v, _ := envs.Load(h)
			e := v.(*env)
			before := h.RunIDs()
			e.Deliver(testMail{From: "Alice <" + alice + ">", Subject: text, Files: []adaptertest.File{f}})
			return h.WaitNewRun(ChannelName, before).ID
		},
		Fetcher: func(h *adaptertest.Harness) core.AttachmentFetcher {
			v, _ := envs.Load(h)
			return v.(*env).a
		},
	})
}

// TestReplayedMailWithFiles: a Thunderbird mail with a log attached and an
// inline image lists both, with their IMAP section numbers, and its text
// part is still the body; delivered to the mailbox, each file is fetched
// back by its part exactly.
func TestReplayedMailWithFiles(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/thunderbird_attachments.eml")
	if err != nil {
		t.Fatal(err)
	}
	in, err := parseMail(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(in.Text, "The log and the latency graph are attached.") {
		t.Errorf("body %q", in.Text)
	}
	want := []mailFile{
		{Section: "2", Name: "api.log", MimeType: "text/plain", Size: 118},
		{Section: "3", Name: "latency.png", MimeType: "image/png", Size: 72},
	}
	if fmt.Sprint(in.Files) != fmt.Sprint(want) {
		t.Fatalf("files %+v, want %+v", in.Files, want)
	}
	e := newEnv(t, envOptions{NoRun: true})
	e.imap.Deliver(t, string(raw))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sel := e.uidValidity(ctx)
	atts := e.a.attachmentsOf(in, mailPos{UIDValidity: sel, UID: 1})
	log, err := e.a.FetchAttachment(ctx, atts[0], 1<<20)
	if err != nil || !strings.HasPrefix(string(log), "2026-11-29 12:00:01 api-7 ERROR upstream timeout") || len(log) != 118 {
		t.Fatalf("log: %q %v", log, err)
	}
	img, err := e.a.FetchAttachment(ctx, atts[1], 1<<20)
	if err != nil || !strings.HasPrefix(string(img), "\x89PNG") || len(img) != 72 {
		t.Fatalf("image: %q %v", img, err)
	}
}

// TestFetchAttachmentRefusals: the part's size in BODYSTRUCTURE is judged
// before its content is fetched; a renumbered mailbox, a mail gone and a
// part that does not exist are gone; content larger than allowed is cut.
func TestFetchAttachmentRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRun: true})
	data := []byte(strings.Repeat("log line\n", 100))
	e.Deliver(testMail{From: alice, Subject: "x", Files: []adaptertest.File{{Name: "a.log", MimeType: "text/plain", Data: data}}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v := e.uidValidity(ctx)
	ref := func(uid uint32, section string) string { return fmt.Sprintf("%d/%d/%s", v, uid, section) }
	at := core.NewAttachment(ref(1, "2"), "a.log", "text/plain", int64(len(data)))
	if _, err := e.a.FetchAttachment(ctx, at, 100); !errors.Is(err, core.ErrAttachmentTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
	for name, r := range map[string]string{
		"renumbered": fmt.Sprintf("%d/1/2", v+1), "no mail": ref(9, "2"), "no part": ref(1, "7"),
	} {
		if _, err := e.a.FetchAttachment(ctx, core.NewAttachment(r, "a.log", "text/plain", 9), 1<<20); !errors.Is(err, core.ErrAttachmentGone) {
			t.Errorf("%s: %v, want gone", name, err)
		}
	}
	for _, bad := range []string{"", "1/2", "x/1/2", "1/0/2", "1/1/0", "1/1/a.b"} {
		if _, _, err := parseFileRef(bad); err == nil {
			t.Errorf("ref %q accepted", bad)
		}
	}
	got, err := e.a.FetchAttachment(ctx, at, 1<<20)
	if err != nil || string(got) != string(data) {
		t.Fatalf("fetch: %q %v", got, err)
	}
}

// uidValidity is the mailbox's UIDVALIDITY, as the adapter's fetch sees it.
func (e *env) uidValidity(ctx context.Context) uint32 {
	e.t.Helper()
	c, err := e.a.connect(ctx, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	sel, err := c.Select("INBOX", nil).Wait()
	if err != nil {
		e.t.Fatal(err)
	}
	return sel.UIDValidity
}

// multipart renders m with its files attached (base64, one part each),
// the way a mail client sends them.
func (m testMail) multipart(head string) string {
	var b strings.Builder
	b.WriteString(head)
	b.WriteString("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"=_opsgate_test\"\n\n--=_opsgate_test\n")
	b.WriteString("Content-Type: text/plain; charset=utf-8\n\n" + m.Body + "\n")
	for _, f := range m.Files {
		enc := base64.StdEncoding.EncodeToString(f.Data)
		fmt.Fprintf(&b, "--=_opsgate_test\nContent-Type: %s; name=%q\nContent-Disposition: attachment; filename=%q\nContent-Transfer-Encoding: base64\n\n", f.MimeType, f.Name, f.Name)
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\n")
			enc = enc[76:]
		}
		b.WriteString(enc + "\n")
	}
	b.WriteString("--=_opsgate_test--\n")
	return b.String()
}
