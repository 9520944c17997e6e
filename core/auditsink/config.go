// Package auditsink delivers every audit entry to external systems
// (audit.sinks): syslog (RFC 5424 over UDP, TCP or a unix socket) and HTTP
// (JSON lines). Each sink reads the audit chain in sequence order from a
// cursor it keeps in the store, advances it only after the destination
// took the entries, retries with backoff, and runs on one replica at a
// time under a store lease, so delivery is in order, at least once, and
// survives restarts and replica loss. An entry the destination refuses
// for good is a dead letter: counted, logged, and skipped so it does not
// hold up the rest. docs/audit-sinks.md is the operator's side.
package auditsink

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"golang.org/x/net/http/httpguts"

	"github.com/opsgate/opsgate/core"
)

// ErrConfig is the sentinel of every configuration problem.
var ErrConfig = errors.New("audit sink: invalid configuration")

// Sink types.
const (
	TypeSyslog = "syslog"
	TypeHTTP   = "http"
)

// Config is one audit.sinks entry.
type Config struct {
	// Name keys the sink's cursor and lease in the store.
	Name string
	// Type is TypeSyslog or TypeHTTP.
	Type string
	// Addr is the syslog receiver: udp://host:port, tcp://host:port or
	// unix:///path.
	Addr string
	// URL and Headers reach an http sink.
	URL     string
	Headers map[string]string
}

// Validate reports every problem of c as a *core.ConfigError (fields
// named as the keys of an audit.sinks entry).
func (c Config) Validate() error {
	var probs []core.ConfigProblem
	bad := func(field, format string, args ...any) {
		probs = append(probs, core.ConfigProblem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if c.Name == "" {
		bad("name", "missing required value")
	}
	switch c.Type {
	case TypeSyslog:
		if _, _, err := ParseAddr(c.Addr); err != nil {
			bad("addr", "%v", err)
		}
		if c.URL != "" || len(c.Headers) > 0 {
			bad("url", "a syslog sink has addr, not url or headers")
		}
	case TypeHTTP:
		u, err := url.Parse(c.URL)
		if c.URL == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("url", "want an absolute http(s) URL, not %q", c.URL)
		}
		if c.Addr != "" {
			bad("addr", "an http sink has url, not addr")
		}
		for k, v := range c.Headers {
			if !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidHeaderFieldValue(v) {
				bad("headers", "%q is not a valid header", k)
			}
			if http.CanonicalHeaderKey(k) == "Content-Type" {
				bad("headers", "Content-Type is set by opsgate (application/x-ndjson)")
			}
		}
	default:
		bad("type", "want syslog or http, not %q", c.Type)
	}
	return core.ConfigErrorOf(ErrConfig, probs)
}

// ParseAddr splits a syslog address into the network and address
// net.Dial takes: udp://host:port, tcp://host:port, unix:///path.
func ParseAddr(addr string) (network, address string, err error) {
	u, perr := url.Parse(addr)
	if addr == "" || perr != nil {
		return "", "", fmt.Errorf("want udp://host:port, tcp://host:port or unix:///path, not %q", addr)
	}
	switch u.Scheme {
	case "udp", "tcp":
		if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" || u.Path != "" {
			return "", "", fmt.Errorf("want %s://host:port, not %q", u.Scheme, addr)
		}
		return u.Scheme, u.Host, nil
	case "unix":
		if u.Host != "" || u.Path == "" {
			return "", "", fmt.Errorf("want unix:///absolute/path, not %q", addr)
		}
		return "unix", u.Path, nil
	}
	return "", "", fmt.Errorf("want udp://host:port, tcp://host:port or unix:///path, not %q", addr)
}
