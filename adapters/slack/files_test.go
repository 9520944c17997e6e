package slack

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core"
)

// TestFetchAttachmentRefusals: what files.info says is judged before any
// download (a file over the limit, or of another kind now, is never
// fetched); a file gone is ErrAttachmentGone; a file that grew past what
// files.info said is cut off at the limit; the bot token is sent to Slack's
// file hosts only.
func TestFetchAttachmentRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	data := []byte(strings.Repeat("log line\n", 100))

	big := e.fake.AddFile("big.log", "text/plain", data)
	_, err := e.a.FetchAttachment(ctx, core.NewAttachment(big, "big.log", "text/plain", 900), 100)
	if !errors.Is(err, core.ErrAttachmentTooLarge) {
		t.Errorf("file over the limit: %v, want ErrAttachmentTooLarge", err)
	}
	swapped := e.fake.AddFile("x.png", "application/zip", data)
	if _, err := e.a.FetchAttachment(ctx, core.NewAttachment(swapped, "x.png", "image/png", 900), 1<<20); !errors.Is(err, core.ErrAttachmentKind) {
		t.Errorf("file of another kind now: %v, want ErrAttachmentKind", err)
	}
	if _, err := e.a.FetchAttachment(ctx, core.NewAttachment("F9999999", "gone.txt", "text/plain", 9), 1<<20); !errors.Is(err, core.ErrAttachmentGone) {
		t.Errorf("unknown file: %v, want ErrAttachmentGone", err)
	}
	if got := e.fake.Downloads(); len(got) != 0 {
		t.Errorf("downloaded %v; a refused file must not be", got)
	}
	grown := e.fake.AddFile("grown.log", "text/plain", data)
	e.fake.ReportSize(grown, 50)
	if _, err := e.a.FetchAttachment(ctx, core.NewAttachment(grown, "grown.log", "text/plain", 50), 100); !errors.Is(err, core.ErrAttachmentTooLarge) {
		t.Errorf("file larger than reported: %v, want ErrAttachmentTooLarge", err)
	}
	ok := e.fake.AddFile("ok.log", "text/plain", data)
	got, err := e.a.FetchAttachment(ctx, core.NewAttachment(ok, "ok.log", "text/plain", 900), 1<<20)
	if err != nil || string(got) != string(data) {
		t.Fatalf("fetch = %q, %v", got, err)
	}
}

// TestFileHostKeepsTheToken: the bot token goes only to https on Slack's
// domains, or to the configured API's own host.
func TestFileHostKeepsTheToken(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for link, want := range map[string]bool{
		"https://files.slack.com/files-pri/T1-F1/a.txt": true,
		"https://files.acme.slack.com/x":                true,
		"http://files.slack.com/files-pri/T1-F1/a.txt":  false,
		"https://files.slack.com.evil.example/x":        false,
		"https://evil.example/files-pri/T1-F1/a.txt":    false,
		e.fake.APIURL() + "../files-pri/x":              true,
	} {
		if got := e.a.fileHost(link); got != want {
			t.Errorf("fileHost(%q) = %v, want %v", link, got, want)
		}
	}
}
