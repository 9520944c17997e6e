package slack

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/opsgate/opsgate/core"
)

var _ core.AttachmentFetcher = (*Adapter)(nil)

// FetchAttachment implements core.AttachmentFetcher: a file a person
// shared (Ref is its id) is looked up with files.info — its size and type
// as Slack has them now, judged before anything is downloaded — then
// downloaded from url_private_download with the bot token (scope
// files:read), never more than maxBytes.
func (a *Adapter) FetchAttachment(ctx context.Context, at core.Attachment, maxBytes int64) ([]byte, error) {
	f, _, _, err := a.api.GetFileInfoContext(ctx, at.Ref, 0, 0)
	if err != nil {
		switch slackErrorCode(err) {
		case "file_not_found", "file_deleted":
			return nil, fmt.Errorf("slack: files.info %s: %w", at.Ref, core.ErrAttachmentGone)
		}
		return nil, fmt.Errorf("slack: files.info %s: %w", at.Ref, err)
	}
	if err := core.CheckAttachment(at, int64(f.Size), f.Mimetype, maxBytes); err != nil {
		return nil, fmt.Errorf("slack: file %s: %w", at.Ref, err)
	}
	link := f.URLPrivateDownload
	if link == "" {
		link = f.URLPrivate
	}
	if !a.fileHost(link) {
		// The bot token goes with the request: only to Slack.
		return nil, fmt.Errorf("slack: file %s: download URL is not on Slack's file host", at.Ref)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return nil, fmt.Errorf("slack: file %s: %w", at.Ref, err)
	}
	req.Header.Set("Authorization", "Bearer "+a.cfg.BotToken)
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("slack: download file %s: %w", at.Ref, redactErr(err))
	}
	if ct := core.BaseMIME(resp.Header.Get("Content-Type")); ct == "text/html" && core.BaseMIME(f.Mimetype) != "text/html" {
		// Slack answers a download it does not authorize with its sign-in
		// page, 200 and all.
		resp.Body.Close()
		return nil, fmt.Errorf("slack: download file %s: Slack answered with a web page (missing files:read scope?)", at.Ref)
	}
	b, err := core.AttachmentFromResponse(resp, at, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("slack: download file %s: %w", at.Ref, err)
	}
	return b, nil
}

// fileHost reports a download URL the bot token may be sent to: https on
// Slack's domains, or the configured API's own host (tests, proxies).
func (a *Adapter) fileHost(link string) bool {
	u, err := url.Parse(link)
	if err != nil || u.Host == "" {
		return false
	}
	if api, err := url.Parse(a.cfg.APIURL); err == nil && api.Host == u.Host && api.Scheme == u.Scheme {
		return true
	}
	h := strings.ToLower(u.Hostname())
	return u.Scheme == "https" && (h == "files.slack.com" || strings.HasSuffix(h, ".slack.com") || strings.HasSuffix(h, ".slack-gov.com"))
}

// redactErr drops the URL a transport error quotes: file URLs name the
// workspace and file, and belong in no log.
func redactErr(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
