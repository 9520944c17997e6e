package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strings"
	"text/template"
)

// pathValue is a string argument already path-escaped for a URL template.
// It is a distinct type so raw and query can recover the original value
// without guessing whether a string was escaped.
type pathValue string

// baseFuncs are available in every template.
func baseFuncs() template.FuncMap {
	return template.FuncMap{
		// json renders any value as JSON, so a body template can embed a
		// string argument without the author writing quoting rules.
		"json": func(v any) (string, error) {
			b, err := json.Marshal(unwrapPath(v))
			if err != nil {
				return "", fmt.Errorf("json: %w", err)
			}
			return string(b), nil
		},
		// raw undoes the automatic path escaping of a URL argument, for the
		// rare template that must insert a value with its slashes intact.
		"raw": func(v any) string { return fmt.Sprint(unwrapPath(v)) },
		// query escapes a value for a URL query component.
		"query": func(v any) string { return url.QueryEscape(fmt.Sprint(unwrapPath(v))) },
	}
}

// TemplateFuncs returns the functions every tool template may call (json,
// raw, query), so `opsgate config check` can parse a template with exactly
// the function set the runner gives it and accept or refuse the same text.
func TemplateFuncs() template.FuncMap { return baseFuncs() }

// escapeStrict percent-encodes every byte outside RFC 3986's unreserved set.
// This is stricter than url.PathEscape (which keeps '&', '=', '+', ':' and
// '@'), so the same value is also safe in a query string; it decodes with
// url.PathUnescape.
func escapeStrict(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// unwrapPath returns the original value behind a path-escaped argument.
func unwrapPath(v any) any {
	p, ok := v.(pathValue)
	if !ok {
		return v
	}
	s, err := url.PathUnescape(string(p))
	if err != nil { // cannot happen for a value produced by url.PathEscape
		return string(p)
	}
	return s
}

// compile parses one template element with missingkey=error, so a typo in a
// config or a missing argument fails loudly instead of rendering "<no value>".
func compile(name, text string) (*template.Template, error) {
	t, err := template.New(name).Option("missingkey=error").Funcs(baseFuncs()).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%w: parse %s: %w", ErrTemplate, name, err)
	}
	return t, nil
}

// compileAll parses a list of elements, naming each by its index.
func compileAll(prefix string, texts []string) ([]*template.Template, error) {
	out := make([]*template.Template, len(texts))
	for i, s := range texts {
		t, err := compile(fmt.Sprintf("%s[%d]", prefix, i), s)
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// render executes one compiled template into a string.
func render(t *template.Template, data any) (string, error) {
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("%w: render %s: %w", ErrTemplate, t.Name(), err)
	}
	return b.String(), nil
}

// normalize returns a copy of args fit for printing by a template: JSON
// numbers that are whole become int64 (so 1000000 renders as "1000000", not
// "1e+06"), and nil becomes "" (not "<no value>"). Nested maps and slices are
// normalized too. The caller's map is never modified.
func normalize(args map[string]any) map[string]any {
	out := make(map[string]any, len(args))
	for k, v := range args {
		out[k] = normalizeValue(v, nil)
	}
	return out
}

// escapeArgs is normalize plus escaping of every string, for URL templates:
// an argument can then never add a path segment, a query parameter or a
// fragment, wherever the template puts it.
func escapeArgs(args map[string]any) map[string]any {
	out := make(map[string]any, len(args))
	esc := func(s string) any { return pathValue(escapeStrict(s)) }
	for k, v := range args {
		out[k] = normalizeValue(v, esc)
	}
	return out
}

// normalizeValue converts one value; str, when set, transforms strings.
func normalizeValue(v any, str func(string) any) any {
	switch x := v.(type) {
	case nil:
		if str != nil {
			return str("")
		}
		return ""
	case string:
		if str != nil {
			return str(x)
		}
		return x
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
		return x
	case float32:
		return normalizeValue(float64(x), str)
	case json.Number:
		if str != nil {
			return str(string(x))
		}
		return x
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = normalizeValue(e, str)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = normalizeValue(e, str)
		}
		return s
	default:
		return v
	}
}
