package config

import (
	"fmt"
	"net/url"
	"strings"
)

// MCP configures opsgate's own MCP endpoints (docs/mcp.md). Browsers may
// call them only from allowed origins: server.public_url's and
// AllowedOrigins on /mcp and /mcp/codex; loopback ones and InternalOrigins
// on /internal/mcp and /internal/mcp/studio, which take only tokens marked
// internal.
type MCP struct {
	// AllowedOrigins are browser origins allowed on the external
	// endpoints besides public_url's, e.g. "http://localhost:6274" (the MCP
	// Inspector's web UI).
	AllowedOrigins []string `yaml:"allowed_origins"`
	// InternalOrigins are origins allowed on the internal endpoints
	// besides loopback ones.
	InternalOrigins []string `yaml:"internal_origins"`
	// OAuth, when set, is served as RFC 9728 protected resource metadata
	// at /.well-known/oauth-protected-resource (needs server.public_url).
	OAuth *MCPOAuth `yaml:"oauth"`
}

// MCPOAuth names the authorization servers an OAuth-capable client is sent
// to; opsgate itself still accepts only its configured bearer tokens, so
// the authorization server (or a gateway in front) must issue those.
type MCPOAuth struct {
	AuthorizationServers []string `yaml:"authorization_servers" cfg:"required"`
	ScopesSupported      []string `yaml:"scopes_supported"`
}

func (c *checker) mcpServer() {
	m := c.cfg.MCP
	for _, l := range []struct {
		key  string
		list []string
	}{{"allowed_origins", m.AllowedOrigins}, {"internal_origins", m.InternalOrigins}} {
		for j, o := range l.list {
			if msg := originProblem(o); msg != "" {
				c.problem(fmt.Sprintf("mcp.%s[%d]", l.key, j), "%s", msg)
			}
		}
	}
	if m.OAuth != nil {
		if c.cfg.Server.PublicURL == "" {
			c.problem("mcp.oauth", "needs server.public_url (the resource the metadata names)")
		}
		for j, a := range m.OAuth.AuthorizationServers {
			c.httpURL(fmt.Sprintf("mcp.oauth.authorization_servers[%d]", j), a)
		}
	}
}

// originProblem checks an origin: scheme://host[:port], nothing else.
func originProblem(o string) string {
	u, err := url.Parse(o)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Sprintf("%q is not an origin: write scheme://host[:port], e.g. https://studio.example.com", o)
	case strings.TrimRight(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Sprintf("%q: an origin has no path, query or user (scheme://host[:port])", o)
	}
	return ""
}
