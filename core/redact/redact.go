// Package redact masks credentials in URLs, DSNs, error messages and log
// text, so no secret reaches a chat thread, a card, the outbox's last error
// or a log line. It is the one place that knows what a secret looks like:
//
//   - a URL's userinfo password (user:****@host; the user name stays);
//   - query and fragment parameters whose name looks secret (password,
//     token, key, api_key, secret, client_secret, signature, sig,
//     access_token, credential, auth…; see SecretName);
//   - keyword DSN and log pairs of such names ("password=…", "token='…'");
//   - the secret path parts of well-known webhook URLs (Slack's
//     /services/T/B/<secret>, Discord's /webhooks/<id>/<token>, Telegram's
//     /bot<token>/).
//
// Masking is one-way and errs on the side of hiding: a name that merely
// contains "key" is masked too.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces every secret.
const Mask = "****"

// secretWords mark a parameter or header name as holding a secret when the
// name contains one of them.
var secretWords = []string{"auth", "token", "secret", "passw", "pwd", "cookie", "key", "signature", "credential", "session"}

// secretNames are short names that are secrets only as a whole word.
var secretNames = map[string]bool{"sig": true, "pass": true, "pw": true}

// SecretName reports whether a header, query parameter or keyword name
// looks like it holds a secret. Idempotency keys are opsgate's own and not
// secret.
func SecretName(name string) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	if n == "" || strings.Contains(n, "idempotency") {
		return false
	}
	if secretNames[n] {
		return true
	}
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// URL returns s with its credentials masked. A string that does not parse
// as a URL is masked as text (Text), so a malformed URL in an error message
// is still safe to print.
func URL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return Text(s)
	}
	return ParsedURL(u)
}

// ParsedURL is URL for a parsed URL. u is not modified.
func ParsedURL(u *url.URL) string {
	out, _ := maskURL(u)
	return out
}

// maskURL masks u and reports whether anything was masked; when nothing
// was, it returns u.String().
func maskURL(u *url.URL) (string, bool) {
	if u == nil {
		return "", false
	}
	cp := *u
	changed := false
	if cp.User != nil {
		if pw, has := cp.User.Password(); has && pw != Mask {
			cp.User = url.UserPassword(cp.User.Username(), Mask)
			changed = true
		}
	}
	if q := maskPairs(cp.RawQuery); q != cp.RawQuery {
		cp.RawQuery, changed = q, true
	}
	if cp.Fragment != "" && strings.Contains(cp.Fragment, "=") {
		if f := maskPairs(cp.EscapedFragment()); f != cp.EscapedFragment() {
			cp.RawFragment, changed = f, true
			cp.Fragment, _ = url.PathUnescape(f)
		}
	}
	if p := maskPath(cp.EscapedPath()); p != cp.EscapedPath() {
		cp.RawPath, changed = p, true
		cp.Path, _ = url.PathUnescape(p)
	}
	if !changed {
		return u.String(), false
	}
	// url.UserPassword escapes the mask's "*"; show it plainly.
	return strings.ReplaceAll(cp.String(), url.QueryEscape(Mask), Mask), true
}

// maskPairs masks the values of secret-named pairs in a query string,
// keeping the order and spelling of everything else ("a=1&api_key=****").
func maskPairs(q string) string {
	parts := strings.Split(q, "&")
	for i, p := range parts {
		name, _, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		if dec, err := url.QueryUnescape(name); err == nil {
			name = dec
		}
		if SecretName(name) {
			parts[i] = p[:strings.IndexByte(p, '=')+1] + Mask
		}
	}
	return strings.Join(parts, "&")
}

// Well-known webhook URLs carry their secret in the path.
var secretPaths = []*regexp.Regexp{
	regexp.MustCompile(`(/services/[^/]+/[^/]+/)[^/?#]+`), // Slack incoming webhooks
	regexp.MustCompile(`(/webhooks/[0-9]+/)[^/?#]+`),      // Discord webhooks and interaction follow-ups
	regexp.MustCompile(`(/bot)[0-9]+:[A-Za-z0-9_-]+`),     // Telegram Bot API
}

func maskPath(p string) string {
	for _, re := range secretPaths {
		p = re.ReplaceAllString(p, "${1}"+Mask)
	}
	return p
}

// DSN masks a database connection string: a postgres:// URL as URL does
// (user:****@, ?password=****, ?sslpassword=****), the keyword form's
// password='…' and password=… as Text does.
func DSN(dsn string) string {
	if strings.Contains(dsn, "://") {
		return URL(dsn)
	}
	return Text(dsn)
}

// urlInText finds URLs inside free text, e.g. the quoted URL of a
// net/http error (`Get "https://…?api_key=…": dial tcp …`).
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>` + "`" + `]+`)

// pairsInText find name=value pairs in free text: first with a quoted
// value (password='a b'), then with a bare one, so a quote elsewhere in
// the text cannot hide a bare pair inside a "quoted value".
var pairsInText = []*regexp.Regexp{
	regexp.MustCompile(`([A-Za-z0-9_.\-]+)=('[^']*'|"[^"]*")`),
	regexp.MustCompile(`([A-Za-z0-9_.\-]+)=([^\s&;,'"]+)`),
}

// Text masks every credential it can recognize in free text: URLs (as URL),
// then name=value pairs whose name looks secret.
func Text(s string) string {
	if !strings.Contains(s, "=") && !strings.Contains(s, "://") {
		return s
	}
	s = urlInText.ReplaceAllStringFunc(s, func(m string) string {
		// Punctuation after a URL ("…?k=v: dial tcp") is the sentence's.
		trimmed := strings.TrimRight(m, ":.,;)")
		tail := m[len(trimmed):]
		if u, err := url.Parse(trimmed); err == nil && u.Scheme != "" {
			out, changed := maskURL(u)
			if !changed {
				return m // nothing to mask: keep the text exactly as it was
			}
			// Keep the scheme as written (url.Parse lowers it).
			return trimmed[:len(u.Scheme)] + out[len(u.Scheme):] + tail
		}
		// A URL that does not parse: its userinfo here, its pairs below.
		return maskUserinfo(trimmed) + tail
	})
	for _, re := range pairsInText {
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			sub := re.FindStringSubmatch(m)
			if !SecretName(sub[1]) || strings.HasPrefix(sub[2], Mask) {
				return m
			}
			v := strings.TrimRight(sub[2], ":.)")
			return sub[1] + "=" + Mask + sub[2][len(v):]
		})
	}
	return s
}

// userinfoInText is "scheme://user:password@" of a URL that did not parse.
var userinfoInText = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*://[^:/@]*:)[^@/]*@`)

func maskUserinfo(s string) string {
	return userinfoInText.ReplaceAllString(s, "${1}"+Mask+"@")
}

// Error returns err with its message masked (Text). errors.Is and
// errors.As still see the original chain, so sentinels keep working; print
// only the returned error's message, never what As digs out of it. A nil
// err, or one with nothing to mask, is returned as it is.
func Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	masked := Text(msg)
	if masked == msg {
		return err
	}
	return &maskedError{msg: masked, err: err}
}

type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }
