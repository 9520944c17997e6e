package email

import (
	"errors"
	"fmt"
	"strings"
)

// AuthResults is one Authentication-Results header (RFC 8601): who wrote it
// and what each method concluded. Only what the DMARC check reads is kept.
type AuthResults struct {
	// AuthservID names the host that wrote the header.
	AuthservID string
	Results    []AuthResult
}

// AuthResult is one "method=result" clause with its properties
// ("header.d" → "example.com").
type AuthResult struct {
	Method string
	Result string
	Props  map[string]string
}

// ErrAuthResults is wrapped by every ParseAuthResults error.
var ErrAuthResults = errors.New("malformed Authentication-Results")

// ParseAuthResults parses one Authentication-Results header value. It is
// lenient about what it does not need (unknown clauses, versions, reason
// strings) and strict about structure: comments and quoted strings must be
// closed.
func ParseAuthResults(v string) (AuthResults, error) {
	if len(v) > 16<<10 {
		return AuthResults{}, fmt.Errorf("%w: longer than 16 KiB", ErrAuthResults)
	}
	clean, err := stripComments(v)
	if err != nil {
		return AuthResults{}, err
	}
	segs := splitOutsideQuotes(clean, ';')
	head := strings.Fields(segs[0])
	if len(head) == 0 {
		return AuthResults{}, fmt.Errorf("%w: no authserv-id", ErrAuthResults)
	}
	ar := AuthResults{AuthservID: strings.ToLower(unquote(head[0]))}
	if ar.AuthservID == "" {
		return AuthResults{}, fmt.Errorf("%w: empty authserv-id", ErrAuthResults)
	}
	for _, seg := range segs[1:] {
		toks := fieldsOutsideQuotes(seg)
		if len(toks) == 0 || strings.EqualFold(toks[0], "none") {
			continue
		}
		method, result, ok := strings.Cut(toks[0], "=")
		if !ok || method == "" || result == "" {
			return AuthResults{}, fmt.Errorf("%w: %q is not method=result", ErrAuthResults, clip(toks[0], 40))
		}
		method, _, _ = strings.Cut(method, "/")
		r := AuthResult{Method: strings.ToLower(method), Result: strings.ToLower(unquote(result)), Props: map[string]string{}}
		for _, t := range toks[1:] {
			k, val, ok := strings.Cut(t, "=")
			if !ok {
				continue
			}
			r.Props[strings.ToLower(k)] = unquote(val)
		}
		ar.Results = append(ar.Results, r)
	}
	return ar, nil
}

// Passes reports whether the results vouch for fromDomain: dmarc=pass (for
// that domain when header.from says which), or dkim=pass with a signing
// domain aligned with it (equal, or a parent domain: relaxed alignment). A
// DKIM pass for some other domain proves nothing about From.
func (ar AuthResults) Passes(fromDomain string) bool {
	fromDomain = strings.ToLower(strings.TrimSuffix(fromDomain, "."))
	if fromDomain == "" {
		return false
	}
	for _, r := range ar.Results {
		if r.Result != "pass" {
			continue
		}
		switch r.Method {
		case "dmarc":
			hf := strings.ToLower(r.Props["header.from"])
			if hf == "" || hf == fromDomain {
				return true
			}
		case "dkim":
			d := strings.ToLower(r.Props["header.d"])
			if d == "" {
				d = strings.ToLower(domainPart(r.Props["header.i"]))
			}
			if d != "" && (d == fromDomain || strings.HasSuffix(fromDomain, "."+d)) {
				return true
			}
		}
	}
	return false
}

// stripComments removes RFC 5322 comments (nested parentheses, with
// backslash escapes) outside quoted strings.
func stripComments(s string) (string, error) {
	var b strings.Builder
	depth, quoted := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && (quoted || depth > 0):
			if depth == 0 {
				b.WriteByte(c)
				if i+1 < len(s) {
					b.WriteByte(s[i+1])
				}
			}
			i++
		case quoted:
			b.WriteByte(c)
			if c == '"' {
				quoted = false
			}
		case c == '(':
			depth++
		case c == ')':
			if depth == 0 {
				return "", fmt.Errorf("%w: unbalanced ')'", ErrAuthResults)
			}
			depth--
			if depth == 0 {
				b.WriteByte(' ')
			}
		case depth > 0:
		case c == '"':
			quoted = true
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	if depth > 0 || quoted {
		return "", fmt.Errorf("%w: unclosed comment or quoted string", ErrAuthResults)
	}
	return b.String(), nil
}

// splitOutsideQuotes splits on sep outside double quotes.
func splitOutsideQuotes(s string, sep byte) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// fieldsOutsideQuotes splits on whitespace outside double quotes.
func fieldsOutsideQuotes(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && quoted && i+1 < len(s):
			cur.WriteByte(c)
			cur.WriteByte(s[i+1])
			i++
		case c == '"':
			quoted = !quoted
			cur.WriteByte(c)
		case !quoted && (c == ' ' || c == '\t' || c == '\r' || c == '\n'):
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteByte(c)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// unquote removes surrounding double quotes and backslash escapes.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	s = s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
