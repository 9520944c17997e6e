package tools

import (
	"fmt"
	"sync"
	"unicode/utf8"
)

// DefaultMaxOutput is the captured-output cap when a tool sets none
// (the README: max_output defaults to 64 KiB).
const DefaultMaxOutput = 64 << 10

// cappedBuffer keeps the first max bytes written to it and counts the rest,
// so a tool printing gigabytes costs a counter, not memory. It is safe for
// concurrent writers (stdout and stderr may share it).
type cappedBuffer struct {
	mu      sync.Mutex
	max     int64
	buf     []byte
	dropped int64
	// live, when set, sees every write, also past the cap (Call.Output).
	live OutputSink
}

func newCappedBuffer(max int64) *cappedBuffer {
	if max <= 0 {
		max = DefaultMaxOutput
	}
	return &cappedBuffer{max: max}
}

// Write never fails, so a tool is never killed by SIGPIPE for printing too
// much; excess bytes are only counted.
func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - int64(len(c.buf))
	if room > int64(len(p)) {
		room = int64(len(p))
	}
	if room > 0 {
		c.buf = append(c.buf, p[:room]...)
	}
	c.dropped += int64(len(p)) - max(room, 0)
	if c.live != nil {
		c.live(p)
	}
	return len(p), nil
}

// result returns the kept text, with a "[… truncated N bytes]" note when
// bytes were dropped. A cut through a multi-byte UTF-8 character is moved
// back to the character's start (those bytes count as truncated), so the
// text stays valid wherever the tool's output was valid.
func (c *cappedBuffer) result() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return capText(c.buf, c.dropped)
}

// capText renders kept bytes plus a truncation note for dropped ones.
func capText(kept []byte, dropped int64) (string, bool) {
	if dropped == 0 {
		return string(kept), false
	}
	// Back off at most utf8.UTFMax-1 bytes to the start of a rune that the
	// cut left incomplete.
	start := len(kept) - 1
	for start >= 0 && start > len(kept)-utf8.UTFMax && !utf8.RuneStart(kept[start]) {
		start--
	}
	if start >= 0 && !utf8.FullRune(kept[start:]) {
		dropped += int64(len(kept) - start)
		kept = kept[:start]
	}
	return fmt.Sprintf("%s\n[… truncated %d bytes]", kept, dropped), true
}

// CapOutput cuts s to max bytes (DefaultMaxOutput when max <= 0) with the
// same "[… truncated N bytes]" note and UTF-8 care as exec and http
// output, for tool kinds that receive their output whole (upstream MCP).
func CapOutput(s string, max int64) (string, bool) {
	if max <= 0 {
		max = DefaultMaxOutput
	}
	if int64(len(s)) <= max {
		return s, false
	}
	return capText([]byte(s[:max]), int64(len(s))-max)
}
