// Package chunk splits rendered message text into pieces that each fit a
// platform's size limit, so that a long reply reaches a small channel whole,
// in order and readable.
//
// The splitter works on text that is already rendered for the platform
// (Discord Markdown, Slack mrkdwn, Telegram or email HTML, plain text): only
// then can it guarantee that no markup is cut in half. It prefers to cut at a
// paragraph break, then a line break, then a word break; it never cuts inside a
// UTF-8 sequence or a grapheme cluster, keeps links, inline code and inline
// HTML elements whole where they fit, and never leaves a code fence or a
// <pre>/<code>/<b>… element open: it closes it at the end of a chunk and reopens
// it at the start of the next one. The added text counts against the limit.
//
// Every chunk is Open + Body + Close + Marker (see [Chunk]); concatenating the
// Body of all chunks reproduces the input exactly.
package chunk

import (
	"strconv"
	"unicode/utf8"
)

// Unit is what a platform counts when it enforces a message size limit.
// Telegram counts UTF-16 code units, Discord counts characters, email and some
// APIs count bytes; a splitter measuring the wrong unit sends messages the
// platform rejects.
type Unit int

const (
	// Bytes counts UTF-8 bytes.
	Bytes Unit = iota
	// UTF16 counts UTF-16 code units: a code point above U+FFFF counts 2.
	UTF16
	// Runes counts Unicode code points.
	Runes
)

// String names the unit for logs and test output.
func (u Unit) String() string {
	switch u {
	case Bytes:
		return "bytes"
	case UTF16:
		return "utf16"
	case Runes:
		return "runes"
	}
	return "Unit(" + strconv.Itoa(int(u)) + ")"
}

// Syntax tells the splitter which markup the rendered text uses, so that it
// knows what must not be cut and what must be closed and reopened.
type Syntax int

const (
	// Markdown is Discord-style Markdown and plain text: ``` / ~~~ fences are
	// closed and reopened with their language; [text](url) links and `code`
	// spans are kept whole where they fit.
	Markdown Syntax = iota
	// Mrkdwn is Slack mrkdwn: fences and `code` as in Markdown, and
	// <url|text>, <@U123>, <!here> and &amp;-style entities are never cut.
	Mrkdwn
	// HTML is Telegram HTML or email HTML: tags and entities are never cut;
	// elements open at a cut (<pre>, <code>, <b>, <a href>, …) are closed at
	// the end of the chunk and reopened, attributes included, at the start of
	// the next; inline elements are kept whole where they fit.
	HTML
)

// MinLimit is the smallest limit Split honours. Below it there is no room for
// a closing fence plus content, so smaller limits are raised to MinLimit.
// Every real platform limit is far larger.
const MinLimit = 16

// Options parametrize Split for one platform.
type Options struct {
	// Limit is the largest chunk, in Unit, the platform accepts (raised to
	// MinLimit if smaller).
	Limit int
	// Unit is what Limit counts.
	Unit Unit
	// Markers appends "\n(i/n)" to every chunk when there is more than one,
	// so readers know a reply continues. The marker fits inside Limit. It is
	// omitted when it would take more than a quarter of Limit.
	Markers bool
	// Syntax is the markup of the rendered text.
	Syntax Syntax
}

// Chunk is one piece of the split text. Open reopens the code fence or HTML
// elements that were open where the previous chunk was cut; Close closes the
// ones open at this chunk's cut; Marker is the optional "\n(i/n)".
// Concatenating Body over all chunks gives back the input exactly.
type Chunk struct {
	Open, Body, Close, Marker string
}

// String is the text to send.
func (c Chunk) String() string { return c.Open + c.Body + c.Close + c.Marker }

// Split cuts text into chunks that each measure at most opt.Limit in opt.Unit.
// Empty text gives no chunks.
func Split(text string, opt Options) []string {
	parts := SplitChunks(text, opt)
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = p.String()
	}
	return out
}

// SplitChunks is Split with each chunk's parts kept apart, for callers (and
// tests) that need to know which text the splitter added.
func SplitChunks(text string, opt Options) []Chunk {
	if text == "" {
		return nil
	}
	if opt.Limit < MinLimit {
		opt.Limit = MinLimit
	}
	size := Measure(text, opt.Unit)
	if size <= opt.Limit {
		return []Chunk{{Body: text}}
	}
	if !opt.Markers {
		return split(text, opt, 0)
	}
	// The marker's width depends on the number of chunks, which depends on
	// the marker's width: reserve room for d-digit counts and retry with one
	// more digit when the result needs it.
	// At least ceil(size/limit) chunks: start with that many digits.
	lower := (size + opt.Limit - 1) / opt.Limit
	for digits := len(strconv.Itoa(lower)); digits < 10; digits++ {
		reserve := markerWidth(digits)
		if reserve > opt.Limit/4 {
			break
		}
		parts := split(text, opt, reserve)
		n := len(parts)
		if len(strconv.Itoa(n)) > digits {
			continue
		}
		if n > 1 {
			for i := range parts {
				parts[i].Marker = "\n(" + strconv.Itoa(i+1) + "/" + strconv.Itoa(n) + ")"
			}
		}
		return parts
	}
	return split(text, opt, 0)
}

// markerWidth is the width of "\n(n/n)" with d-digit numbers; it is ASCII,
// so the same in every unit.
func markerWidth(digits int) int { return 4 + 2*digits }

// Measure returns the size of s in unit u, the way a platform counts it.
func Measure(s string, u Unit) int {
	switch u {
	case Runes:
		return utf8.RuneCountInString(s)
	case UTF16:
		n := 0
		for i := 0; i < len(s); {
			c := s[i]
			if c < utf8.RuneSelf {
				n++
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			i += size
			if r > 0xFFFF {
				n += 2
			} else {
				n++
			}
		}
		return n
	default:
		return len(s)
	}
}
