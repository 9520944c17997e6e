// Package router turns a chat command line ("deploy api 1.2.3") into a flow
// name and its arguments.
//
// Flows declare their command as a pattern such as
// "deploy {service} {version} {env=staging}": literal words, then required
// placeholders, then placeholders with a default. The router is deliberately
// platform-blind: adapters strip "/ops ", slash-command names and "@botname"
// suffixes before the text gets here, so the same router serves Slack,
// Telegram, Discord, email and the console.
package router

import (
	"errors"
	"fmt"
	"strings"
	"text/template"
	"unicode"
	"unicode/utf8"
)

// ErrPattern is wrapped by every error ParsePattern returns, so config
// validation can tell a malformed pattern from other failures.
var ErrPattern = errors.New("invalid command pattern")

// maxPatternTokens bounds patterns so a hostile config cannot make matching
// quadratic; no real command needs more words than this.
const maxPatternTokens = 64

// part is one whitespace-separated element of a pattern.
type part struct {
	literal     string // set for literal words
	name        string // set for placeholders
	def         string // default value of an optional placeholder
	optional    bool   // true when the placeholder was written {name=default}
	placeholder bool
}

// Pattern is a parsed command pattern. It is immutable and safe for
// concurrent use.
type Pattern struct {
	source string
	parts  []part
}

// Placeholder describes one argument of a pattern, for help texts and for
// adapters that register typed commands (Discord options, Slack hints).
type Placeholder struct {
	Name     string
	Default  string
	Optional bool
}

// ParsePattern parses a command pattern. The first word must be a literal
// (it is the command name users type). A placeholder is {name} (required) or
// {name=default} (optional); names are letters, digits, '_' or '-'. Required
// placeholders and literals may not follow an optional placeholder, because
// positional matching would then be ambiguous.
func ParsePattern(s string) (*Pattern, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, fmt.Errorf("%w: empty pattern", ErrPattern)
	}
	if len(fields) > maxPatternTokens {
		return nil, fmt.Errorf("%w: more than %d words", ErrPattern, maxPatternTokens)
	}
	p := &Pattern{source: strings.Join(fields, " ")}
	seen := map[string]bool{}
	sawOptional := false
	for i, f := range fields {
		if !strings.ContainsAny(f, "{}") {
			if i > 0 && sawOptional {
				return nil, fmt.Errorf("%w: literal %q after an optional placeholder", ErrPattern, f)
			}
			if strings.Contains(f, `"`) {
				return nil, fmt.Errorf("%w: literal %q contains a quote", ErrPattern, f)
			}
			p.parts = append(p.parts, part{literal: f})
			continue
		}
		if i == 0 {
			return nil, fmt.Errorf("%w: must start with a literal command word, not %q", ErrPattern, f)
		}
		if len(f) < 2 || f[0] != '{' || f[len(f)-1] != '}' || strings.Count(f, "{") != 1 || strings.Count(f, "}") != 1 {
			return nil, fmt.Errorf("%w: malformed placeholder %q (want {name} or {name=default})", ErrPattern, f)
		}
		inner := f[1 : len(f)-1]
		name, def, optional := strings.Cut(inner, "=")
		if err := checkName(name); err != nil {
			return nil, fmt.Errorf("%w: placeholder %q: %v", ErrPattern, f, err)
		}
		if strings.Contains(def, `"`) {
			return nil, fmt.Errorf("%w: placeholder %q: default contains a quote", ErrPattern, f)
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: duplicate placeholder %q", ErrPattern, name)
		}
		seen[name] = true
		if !optional && sawOptional {
			return nil, fmt.Errorf("%w: required placeholder {%s} after an optional one", ErrPattern, name)
		}
		sawOptional = sawOptional || optional
		p.parts = append(p.parts, part{name: name, def: def, optional: optional, placeholder: true})
	}
	return p, nil
}

func checkName(name string) error {
	if name == "" {
		return errors.New("empty name")
	}
	for _, r := range name {
		if r != '_' && r != '-' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			return fmt.Errorf("name contains %q (use letters, digits, '_' or '-')", r)
		}
	}
	return nil
}

// String returns the pattern as written, with whitespace normalized.
func (p *Pattern) String() string { return p.source }

// Command returns the first literal word: the name users type.
func (p *Pattern) Command() string { return p.parts[0].literal }

// Literals returns the leading literal words, e.g. ["deploy"].
func (p *Pattern) Literals() []string {
	var out []string
	for _, pt := range p.parts {
		if !pt.placeholder {
			out = append(out, pt.literal)
		}
	}
	return out
}

// Placeholders returns the arguments in order.
func (p *Pattern) Placeholders() []Placeholder {
	var out []Placeholder
	for _, pt := range p.parts {
		if pt.placeholder {
			out = append(out, Placeholder{Name: pt.name, Default: pt.def, Optional: pt.optional})
		}
	}
	return out
}

// Usage renders the pattern for help texts:
// "deploy <service> <version> [env=staging]".
func (p *Pattern) Usage() string {
	var b strings.Builder
	for i, pt := range p.parts {
		if i > 0 {
			b.WriteByte(' ')
		}
		switch {
		case !pt.placeholder:
			b.WriteString(pt.literal)
		case pt.optional:
			b.WriteString("[" + pt.name + "=" + pt.def + "]")
		default:
			b.WriteString("<" + pt.name + ">")
		}
	}
	return b.String()
}

// Match reports whether text fits the pattern and returns the arguments,
// defaults filled in. Tokens are split on whitespace; a double-quoted token
// keeps its spaces ("fix \"the\" bug" style escapes: \" and \\). Literal words
// match case-insensitively, because chat keyboards capitalize the first word.
// Optional placeholders may be given positionally or as name=value in any
// order after the required ones; an "=" inside quotes does not bind
// ("\"env=prod\"" is a value, as Quote writes it). Extra tokens or an
// unterminated quote mean no match.
func (p *Pattern) Match(text string) (map[string]string, bool) {
	tokens, err := tokenize(text)
	if err != nil {
		return nil, false
	}
	return p.matchTokens(tokens)
}

func (p *Pattern) matchTokens(tokens []token) (map[string]string, bool) {
	args := make(map[string]string)
	ti := 0
	i := 0
	// Literals and required placeholders are strictly positional.
	for ; i < len(p.parts) && !p.parts[i].optional; i++ {
		if ti >= len(tokens) {
			return nil, false
		}
		pt := p.parts[i]
		if pt.placeholder {
			args[pt.name] = tokens[ti].text
		} else if !strings.EqualFold(pt.literal, tokens[ti].text) {
			return nil, false
		}
		ti++
	}
	// Optional placeholders: name=value binds by name, anything else fills
	// the next unfilled optional slot in order.
	optional := p.parts[i:]
	set := make(map[string]bool, len(optional))
	next := 0
	for ; ti < len(tokens); ti++ {
		tok := tokens[ti]
		if tok.eq >= 0 {
			if k, v := tok.text[:tok.eq], tok.text[tok.eq+1:]; p.isOptional(k) {
				if set[k] {
					return nil, false
				}
				args[k], set[k] = v, true
				continue
			}
		}
		for next < len(optional) && set[optional[next].name] {
			next++
		}
		if next >= len(optional) {
			return nil, false
		}
		args[optional[next].name], set[optional[next].name] = tok.text, true
		next++
	}
	for _, pt := range optional {
		if !set[pt.name] {
			args[pt.name] = pt.def
		}
	}
	return args, true
}

func (p *Pattern) isOptional(name string) bool {
	for _, pt := range p.parts {
		if pt.optional && pt.name == name {
			return true
		}
	}
	return false
}

// ErrUnterminatedQuote is returned by Tokenize for text with an odd quote.
var ErrUnterminatedQuote = errors.New("unterminated double quote")

// token is one word of a command line. eq is the index in text of the
// first "=" written outside quotes (name=value binding), or -1.
type token struct {
	text string
	eq   int
}

// Tokenize splits a command line on whitespace, keeping double-quoted runs
// together (quotes removed; \" and \\ are escapes inside quotes). A quote may
// start mid-token (env="us east") and joins with the surrounding text.
func Tokenize(text string) ([]string, error) {
	toks, err := tokenize(text)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = t.text
	}
	return out, nil
}

func tokenize(text string) ([]token, error) {
	var (
		tokens  []token
		cur     strings.Builder
		inTok   bool
		inQuote bool
		eq      = -1
	)
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		switch {
		case inQuote && r == '\\' && i < len(text) && (text[i] == '"' || text[i] == '\\'):
			cur.WriteByte(text[i])
			i++
		case r == '"':
			inQuote = !inQuote
			inTok = true
		case !inQuote && unicode.IsSpace(r):
			if inTok {
				tokens = append(tokens, token{text: cur.String(), eq: eq})
				cur.Reset()
				inTok, eq = false, -1
			}
		default:
			if r == '=' && !inQuote && eq < 0 {
				eq = cur.Len()
			}
			cur.WriteString(text[i-size : i]) // keep invalid UTF-8 bytes as they were
			inTok = true
		}
	}
	if inQuote {
		return nil, ErrUnterminatedQuote
	}
	if inTok {
		tokens = append(tokens, token{text: cur.String(), eq: eq})
	}
	return tokens, nil
}

// Quote writes s as one token that Tokenize reads back exactly: in double
// quotes, with \ and " escaped. Whitespace, "=" and quotes inside s stay
// part of the value, so a webhook template's {{quote .labels.x}} cannot add
// words or bind another placeholder by name ("HighCPU duration=720h" stays
// one value).
func Quote(s string) string {
	return `"` + quoteEscapes.Replace(s) + `"`
}

// quoteEscapes is built once (a Replacer is safe for concurrent use).
var quoteEscapes = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// TemplateFuncs are the functions of templates that write command lines
// (webhook text templates): quote writes any value as one token, so a value
// from outside never adds words. `opsgate config check` parses those
// templates with the same set.
func TemplateFuncs() template.FuncMap {
	return template.FuncMap{"quote": func(v any) string {
		if v == nil {
			return Quote("")
		}
		return Quote(fmt.Sprint(v))
	}}
}
