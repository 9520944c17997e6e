package upstream

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// Keys opsgate puts into every tools/call's _meta. A server that wants to
// deduplicate a call re-sent after opsgate crashed (only tools opsgate
// treats as idempotent ever are) uses MetaIdempotencyKey: it is the same
// on every attempt of one step ("<run id>/<step index>").
const (
	MetaIdempotencyKey = "opsgate/idempotency-key"
	MetaRunID          = "opsgate/run-id"
)

// Transports a Server may use.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// Defaults for zero Server fields.
const (
	DefaultConnectTimeout  = 30 * time.Second
	DefaultCallTimeout     = time.Minute
	DefaultRefreshInterval = 5 * time.Minute
	// DefaultMaxMessage bounds one JSON-RPC message from a server, so a
	// runaway server costs a clear error, not the process's memory.
	DefaultMaxMessage = 16 << 20
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = time.Minute
)

// Bounds no operator should need to change.
const (
	// maxTools and maxPages bound one tools/list, however it paginates.
	maxTools = 2000
	maxPages = 100
	// terminateGrace is how long a stdio server has to exit after its
	// stdin closes before its process group is killed.
	terminateGrace = 2 * time.Second
	// stableAfter resets the restart backoff: a session that lived this
	// long was not a crash loop.
	stableAfter = time.Minute
	// stderrLineMax caps one logged stderr line.
	stderrLineMax = 4 << 10
	// PreviewText is every upstream tool's card preview.
	PreviewText = "no dry run: upstream MCP tool"
)

// Server is one upstream MCP server.
type Server struct {
	// Name prefixes its tools: "<name>.<tool>". Letters, digits, '_', '-'.
	Name string
	// Command is a stdio server's argv (no shell), started in Dir with
	// PATH, HOME, LANG, TZ and Env; exactly one of Command and URL is set.
	Command []string
	Env     map[string]string
	Dir     string
	// URL is a Streamable HTTP server's endpoint; Headers go with every
	// request (credentials, typically from ${VAR}).
	URL     string
	Headers map[string]string
	// Tools are globs over the server's own tool names ("read_*"); only
	// matching tools are offered. Empty offers every tool.
	Tools []string
	// Overrides replace what annotations imply, by the server's tool name.
	Overrides map[string]Override

	ConnectTimeout  time.Duration // connect + initialize + tools/list
	CallTimeout     time.Duration // one tools/call
	RefreshInterval time.Duration // periodic tools/list
	// MaxOutput caps a call's rendered output (tools.CapOutput).
	MaxOutput int64
	// MaxMessage bounds one inbound JSON-RPC message.
	MaxMessage int64
	// MinBackoff and MaxBackoff bound the wait between reconnects (a
	// crashed process is restarted after MinBackoff, doubling each time).
	MinBackoff, MaxBackoff time.Duration
	// Secrets are extra values to mask (those config expanded from
	// ${VAR}). Header values and the URL's password and query values are
	// always masked.
	Secrets []string
	// HTTPTransport carries a Streamable HTTP server's requests; nil
	// means a clone of http.DefaultTransport.
	HTTPTransport http.RoundTripper
	// Required: an agent turn that may use the server's tools cannot do
	// without them (Registry.RequiredDown).
	Required bool
}

// Override replaces an annotation-derived default; a zero field keeps it.
// Description, the operator's words, replaces the server's description as
// models read it, unframed.
type Override struct {
	Risk        approvals.Risk
	Destructive *bool
	Idempotent  *bool
	Description string
}

// Transport reports which transport the server uses.
func (s *Server) Transport() string {
	if s.URL != "" {
		return TransportHTTP
	}
	return TransportStdio
}

var serverNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// reservedHeaders are set by the transport; a configured value would break
// the protocol or the session.
var reservedHeaders = map[string]bool{
	"Content-Type": true, "Accept": true, "Host": true, "Content-Length": true,
	"Mcp-Session-Id": true, "Mcp-Protocol-Version": true, "Last-Event-Id": true,
}

// validate checks s and fills defaults. Config check reports the same
// problems with their YAML lines; this is the last line of defence.
func (s *Server) validate() error {
	if !serverNameRE.MatchString(s.Name) {
		return fmt.Errorf("upstream: server name %q: want 1-64 letters, digits, '_' or '-'", s.Name)
	}
	switch {
	case len(s.Command) > 0 && s.URL != "":
		return fmt.Errorf("upstream %s: set command (stdio) or url (http), not both", s.Name)
	case len(s.Command) > 0:
		if s.Command[0] == "" {
			return fmt.Errorf("upstream %s: command[0] is empty", s.Name)
		}
		if len(s.Headers) > 0 {
			return fmt.Errorf("upstream %s: headers apply to http servers only", s.Name)
		}
	case s.URL != "":
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("upstream %s: url must be an absolute http(s) URL", s.Name)
		}
		if len(s.Env) > 0 {
			return fmt.Errorf("upstream %s: env applies to stdio servers only", s.Name)
		}
		for k := range s.Headers {
			if reservedHeaders[http.CanonicalHeaderKey(k)] {
				return fmt.Errorf("upstream %s: header %s is set by the transport", s.Name, http.CanonicalHeaderKey(k))
			}
		}
	default:
		return fmt.Errorf("upstream %s: needs command (stdio) or url (http)", s.Name)
	}
	for _, g := range s.Tools {
		if g == "" {
			return fmt.Errorf("upstream %s: empty tools glob", s.Name)
		}
	}
	for name, o := range s.Overrides {
		if o.Risk != "" && !validRisk(o.Risk) {
			return fmt.Errorf("upstream %s: override %s: unknown risk %q", s.Name, name, o.Risk)
		}
	}
	setDur(&s.ConnectTimeout, DefaultConnectTimeout)
	setDur(&s.CallTimeout, DefaultCallTimeout)
	setDur(&s.RefreshInterval, DefaultRefreshInterval)
	setDur(&s.MinBackoff, DefaultMinBackoff)
	setDur(&s.MaxBackoff, DefaultMaxBackoff)
	if s.MaxBackoff < s.MinBackoff {
		s.MaxBackoff = s.MinBackoff
	}
	if s.MaxOutput <= 0 {
		s.MaxOutput = 64 << 10
	}
	if s.MaxMessage <= 0 {
		s.MaxMessage = DefaultMaxMessage
	}
	return nil
}

func setDur(p *time.Duration, def time.Duration) {
	if *p <= 0 {
		*p = def
	}
}

func validRisk(r approvals.Risk) bool {
	switch r {
	case approvals.RiskRead, approvals.RiskReversible, approvals.RiskExternal, approvals.RiskHighImpact:
		return true
	}
	return false
}

// secrets lists what to mask for s: the configured secrets, every header
// value (and its credential after an auth scheme), the URL's password and
// query values.
func (s *Server) secrets() []string {
	out := append([]string(nil), s.Secrets...)
	for _, v := range s.Headers {
		out = append(out, v)
		if _, cred, ok := strings.Cut(v, " "); ok {
			out = append(out, strings.TrimSpace(cred))
		}
	}
	if u, err := url.Parse(s.URL); err == nil && s.URL != "" {
		if p, ok := u.User.Password(); ok {
			out = append(out, p, url.QueryEscape(p))
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				out = append(out, v, url.QueryEscape(v))
			}
		}
	}
	return out
}

// describe names the server for messages: its transport and command or
// URL, masked.
func (s *Server) describe(m *masker) string {
	if s.Transport() == TransportHTTP {
		return "http " + m.String(s.URL)
	}
	return "stdio " + m.String(strings.Join(s.Command, " "))
}

// ErrClosed is returned by calls on a closed Registry.
var ErrClosed = errors.New("upstream: registry closed")
