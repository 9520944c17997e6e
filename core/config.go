package core

import "strings"

// ConfigProblem is one invalid setting in a component's configuration.
// Field is the setting's key as the operator writes it under the
// component's section ("app_token", "imap.addr", "[0].secret" for a list),
// so `opsgate config check` can print its YAML path and line.
type ConfigProblem struct {
	Field   string
	Message string
}

// ConfigError lists every problem of one component's configuration, as an
// adapter's Config.Validate (and New) returns it. Err is the component's
// sentinel (slack.ErrConfig, …), which errors.Is matches.
type ConfigError struct {
	Err      error
	Problems []ConfigProblem
}

// Error is "<sentinel>: field: message; field: message".
func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	for i, p := range e.Problems {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		if p.Field != "" {
			b.WriteString(p.Field + ": ")
		}
		b.WriteString(p.Message)
	}
	return b.String()
}

func (e *ConfigError) Unwrap() error { return e.Err }

// ConfigErrorOf returns problems as a *ConfigError under sentinel, or nil
// when there are none.
func ConfigErrorOf(sentinel error, problems []ConfigProblem) error {
	if len(problems) == 0 {
		return nil
	}
	return &ConfigError{Err: sentinel, Problems: problems}
}
