package config

import "fmt"

// MinTokenLen is the shortest API token config check does not warn about:
// 24 random characters are well beyond guessing; a shorter token was most
// likely typed by hand.
const MinTokenLen = 24

// warn records a warning: config check prints it, serve logs it, neither
// fails.
func (c *checker) warn(path, format string, args ...any) {
	c.cfg.warnings = append(c.cfg.warnings, Problem{Path: path, Line: c.lineOf(path), Message: fmt.Sprintf(format, args...)})
}

// Warnings are what is odd about the configuration without being wrong:
// a file that sets nothing, a short API token. config check prints them;
// serve logs them.
func (c *Config) Warnings() []Problem { return c.warnings }
