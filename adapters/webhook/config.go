package webhook

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"text/template"
	"time"

	"github.com/opsgate/opsgate/core"
)

// Channel is the webhook channel's name in thread addresses and actor ids.
const Channel = "webhook"

// PathPrefix is where cmd mounts Handler: it serves POST /hooks/{name}
// (docs/architecture.md) and expects the full path, so mount it without stripping.
const PathPrefix = "/hooks/"

// Limits that are not the operator's to tune.
const (
	// DefaultMaxBodyBytes caps a request body when Config.MaxBodyBytes is
	// 0: alert payloads with dozens of alerts fit comfortably.
	DefaultMaxBodyBytes = 1 << 20
	// MaxText caps the request text, the same as a console message: it is
	// a command line, not a document.
	MaxText = 16 << 10
	// MaxThread caps the rendered thread part of a thread key.
	MaxThread = 200
	// MaxDeliveryID caps a body's "event_id".
	MaxDeliveryID = 200
)

// Hook is one configured webhook (channels.webhooks[]): the caller signs
// its body with Secret and posts it to /hooks/<Name>.
type Hook struct {
	// Name is the URL path segment and the actor ("webhook:<name>"):
	// 1-64 letters, digits, '_' or '-'.
	Name string
	// Secret is the HMAC-SHA256 key the sender signs bodies with.
	Secret string
	// Text, when set, is a Go text/template over the decoded JSON body that
	// yields the command line, e.g. for Alertmanager
	// `restart {{(index .alerts 0).labels.service}}`. Every value it prints
	// is one argument (written as {{quote}} writes it) unless the action
	// ends in verbatim. Without it the body's "text" field is the command
	// line. A key missing from the body fails the request (422) instead of
	// running a command with "<no value>" in it.
	Text string
	// Thread, when set, is a template over the body naming the
	// conversation the request belongs to (e.g. `{{.groupKey}}`), so
	// related requests queue behind each other and share replies. Default:
	// the hook name, one thread per hook.
	Thread string
}

// Config is the adapter's configuration; cmd/opsgate maps
// channels.webhooks onto Hooks.
type Config struct {
	Hooks []Hook
	// MaxBodyBytes caps a request body (413 beyond); default
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// Deps are the adapter's collaborators, supplied by cmd/opsgate.
type Deps struct {
	// Sink records inbound events durably (the engine). Required.
	Sink core.Sink
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

// ErrConfig marks a configuration the adapter cannot start with.
var ErrConfig = errors.New("webhook: invalid config")

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// hook is a Hook with its templates parsed once, at startup.
type hook struct {
	name   string
	secret []byte
	text   *template.Template
	thread *template.Template
}

// Validate reports every problem of c that New would refuse, as a
// *core.ConfigError (matching ErrConfig) whose fields are relative to
// channels.webhooks ("[1].name"). `opsgate config check` calls exactly
// this, so check and serve cannot disagree.
func (c Config) Validate() error {
	_, err := compile(c)
	return err
}

// compile checks every hook and parses its templates once, reporting every
// problem at once.
func compile(cfg Config) (map[string]*hook, error) {
	hooks := make(map[string]*hook, len(cfg.Hooks))
	var probs []core.ConfigProblem
	bad := func(i int, field, format string, args ...any) {
		probs = append(probs, core.ConfigProblem{Field: fmt.Sprintf("[%d].%s", i, field), Message: fmt.Sprintf(format, args...)})
	}
	for i, h := range cfg.Hooks {
		switch {
		case !nameRE.MatchString(h.Name):
			bad(i, "name", "%q: must be 1-64 letters, digits, '_' or '-' (it is a URL path segment)", h.Name)
		case hooks[h.Name] != nil:
			bad(i, "name", "duplicate webhook name %q", h.Name)
		}
		if h.Secret == "" {
			bad(i, "secret", "missing required value: the HMAC key senders sign with")
		}
		c := &hook{name: h.Name, secret: []byte(h.Secret)}
		var err error
		if c.text, err = parseTemplate(h.Name+".text", h.Text, true); err != nil {
			bad(i, "text", "invalid template: %v", err)
		}
		if c.thread, err = parseTemplate(h.Name+".thread", h.Thread, false); err != nil {
			bad(i, "thread", "invalid template: %v", err)
		}
		if hooks[h.Name] == nil {
			hooks[h.Name] = c
		}
	}
	if err := core.ConfigErrorOf(ErrConfig, probs); err != nil {
		return nil, err
	}
	return hooks, nil
}

// parseTemplate parses src, or returns nil for an empty one. missingkey=error
// turns a field the body lacks into a refusal rather than "<no value>".
// A command line (line) writes every value as one token unless the action
// ends in verbatim (template.go); a thread name is written as rendered.
func parseTemplate(name, src string, line bool) (*template.Template, error) {
	if src == "" {
		return nil, nil
	}
	t, err := template.New(name).Option("missingkey=error").Funcs(templateFuncs()).Parse(src)
	if err != nil {
		return nil, err
	}
	if line {
		quoteActions(t)
	}
	return t, nil
}
