package config

import (
	"fmt"
	"strings"

	"github.com/opsgate/opsgate/adapters/console/oidc"
	"github.com/opsgate/opsgate/core/auditsink"
)

// ConsoleOIDCConfig is channels.console.oidc as adapters/console/oidc
// takes it, with the redirect URL opsgate serves:
// <server.public_url>/auth/callback. OIDCEnabled says whether it is on.
func (c *Config) ConsoleOIDCConfig() oidc.Config {
	o := c.Channels.Console.OIDC
	return oidc.Config{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
		RedirectURL: CallbackURL(c.Server.PublicURL), PersonClaim: o.PersonClaim, GroupsClaim: o.GroupsClaim, Scopes: o.Scopes}
}

// CallbackURL is where the identity provider sends people back, to be
// registered at the provider.
func CallbackURL(publicURL string) string {
	if publicURL == "" {
		return ""
	}
	return strings.TrimRight(publicURL, "/") + "/auth/callback"
}

// OIDCEnabled reports whether sign-in with an identity provider is
// configured (channels.console.oidc.issuer is set).
func (c *Config) OIDCEnabled() bool { return c.Channels.Console.OIDC.Issuer != "" }

// AuditSinkConfigs is audit.sinks as core/auditsink takes it.
func (c *Config) AuditSinkConfigs() []auditsink.Config {
	out := make([]auditsink.Config, 0, len(c.Audit.Sinks))
	for _, s := range c.Audit.Sinks {
		out = append(out, auditsink.Config{Name: s.Name, Type: s.Type, Addr: s.Addr, URL: s.URL, Headers: s.Headers})
	}
	return out
}

// consoleSignin checks channels.console's sign-in settings.
func (c *checker) consoleSignin() {
	con := c.cfg.Channels.Console
	o := con.OIDC
	set := o.Issuer != "" || o.ClientID != "" || o.ClientSecret != "" || o.GroupsClaim != "" || len(o.Scopes) > 0 ||
		c.given["channels.console.oidc.person_claim"]
	if !con.TokenLogin && !c.cfg.OIDCEnabled() {
		c.problem("channels.console.token_login", "false needs channels.console.oidc (issuer, client_id): otherwise nobody can sign in to the console")
	}
	if !set {
		return
	}
	cfg := c.cfg.ConsoleOIDCConfig()
	if c.cfg.Server.PublicURL == "" {
		c.problem("server.public_url", "required with channels.console.oidc: the identity provider sends people back to <public_url>/auth/callback")
		cfg.RedirectURL = "http://127.0.0.1/auth/callback" // reported above, not again
	}
	c.adapterProblems("channels.console.oidc", cfg.Validate())
}

// auditSinks checks audit.sinks.
func (c *checker) auditSinks() {
	seen := map[string]int{}
	for i, s := range c.cfg.AuditSinkConfigs() {
		p := fmt.Sprintf("audit.sinks[%d]", i)
		c.adapterProblems(p, s.Validate())
		if j, dup := seen[s.Name]; dup {
			c.problem(p+".name", "%q is also the name of audit.sinks[%d]; give each sink its own name (it keys the sink's position)", s.Name, j)
		}
		seen[s.Name] = i
	}
}
