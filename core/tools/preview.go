package tools

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/opsgate/opsgate/core/redact"
)

// mask replaces a secret in a preview. Previews go onto approval cards in
// shared chats, so credentials in a tool's config must not appear there.
const mask = redact.Mask

// secretName reports whether a header or parameter name looks like it holds
// a secret (redact.SecretName).
func secretName(name string) bool { return redact.SecretName(name) }

// maskValue masks a header value, keeping an authorization scheme
// ("Bearer ****") so the approver still sees which kind of credential goes.
func maskValue(name, v string) string {
	if scheme, _, ok := strings.Cut(v, " "); ok && isToken(scheme) && len(scheme) <= 16 {
		switch strings.ToLower(scheme) {
		case "bearer", "basic", "token", "digest", "negotiate", "apikey":
			return scheme + " " + mask
		}
	}
	if secretName(name) {
		return mask
	}
	return v
}

// maskURL hides a password in the userinfo and secret-looking query values.
func maskURL(u *url.URL) string { return redact.ParsedURL(u) }

// Preview renders the request (method, URL, headers with secret-looking
// values masked, body) without sending it, capped at PreviewMax. An error
// means the request could not be rendered (missing argument, bad URL, a
// header value with CR/LF): the engine shows it as "dry run failed: …".
func (h *HTTP) Preview(ctx context.Context, c Call) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("http preview: %w", err)
	}
	t, err := h.templates()
	if err != nil {
		return "", err
	}
	r, err := t.build(c)
	if err != nil {
		return "", redact.Error(fmt.Errorf("http preview: %w", err))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", r.method, maskURL(r.url))
	for _, name := range append(append([]string(nil), r.names...), headerIdempotencyKey, headerRunID) {
		fmt.Fprintf(&b, "%s: %s\n", name, maskValue(name, r.headers.Get(name)))
	}
	if r.body != "" {
		b.WriteString("\n")
		b.WriteString(r.body)
	}
	out := newCappedBuffer(orDefault(h.PreviewMax, DefaultPreviewMax))
	_, _ = out.Write([]byte(b.String()))
	text, _ := out.result()
	return text, nil
}
