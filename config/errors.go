package config

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a configuration.
type Problem struct {
	// Path is the YAML path, e.g. "tools[1].exec.timeout".
	Path string
	// Line is 1-based; 0 when the problem has no position (e.g. a missing file).
	Line    int
	Message string
}

// Error carries every problem found in one file, so `opsgate config check`
// can print them all and callers can inspect them with errors.As.
type Error struct {
	File     string
	Problems []Problem
}

// Error prints one problem per line as "file:line: path: message".
func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
		if p.Path != "" {
			b.WriteString(p.Path + ": ")
		}
		b.WriteString(p.Message)
	}
	return b.String()
}
