package config

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// MCPServer is an upstream MCP server whose tools opsgate offers as
// "<name>.<tool>" in rules, flows and agents, behind the same gate as
// every tool (docs/mcp-servers.md).
type MCPServer struct {
	// Name prefixes the server's tools; letters, digits, '_' and '-'.
	Name string `yaml:"name" cfg:"required"`
	// Transport is stdio (opsgate starts Command) or http (Streamable HTTP
	// at URL); default: stdio when command is set, http when url is.
	Transport string `yaml:"transport" enum:"stdio|http"`
	// Command is a stdio server's argv, never through a shell; it runs in
	// the config file's directory with PATH, HOME, LANG, TZ and Env only.
	Command []string          `yaml:"command"`
	Env     map[string]string `yaml:"env"`
	// URL and Headers reach an http server; put credentials in headers
	// with ${VAR}.
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Tools are globs over the server's own tool names ("read_*"): only
	// matching tools are offered. Default: every tool.
	Tools []string `yaml:"tools"`
	// Overrides replace, per tool (the server's name for it), what its
	// annotations imply.
	Overrides map[string]MCPToolOverride `yaml:"overrides"`
	// ConnectTimeout bounds connecting, initialize and tools/list; 30s.
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// Timeout bounds one tools/call; default 1m.
	Timeout Duration `yaml:"timeout"`
	// RefreshInterval re-reads tools/list (besides list_changed); 5m.
	RefreshInterval Duration `yaml:"refresh_interval"`
	// MaxOutput caps a call's output; default 64KiB.
	MaxOutput ByteSize `yaml:"max_output"`
	// Required: an agent turn that may use the server's tools fails with a
	// clear error while it is down, rather than running without them.
	Required bool `yaml:"required"`

	secrets []string
}

// MCPToolOverride replaces annotation defaults for one upstream tool; an
// omitted key keeps what the annotations say. Description replaces the
// server's description as models read it: the operator's words, used as
// written, where the server's are framed as external content.
type MCPToolOverride struct {
	Risk        string `yaml:"risk" enum:"read|reversible|external|high_impact"`
	Destructive *bool  `yaml:"destructive"`
	Idempotent  *bool  `yaml:"idempotent"`
	Description string `yaml:"description"`
}

// MaxMCPDescription bounds an overridden tool description.
const MaxMCPDescription = 4 << 10

// Secrets returns the values of the variables ${VAR} put into the
// server's command, env, url and headers: each is taken for a credential
// and masked wherever opsgate shows text about the server.
func (s *MCPServer) Secrets() []string { return s.secrets }

// Defaults of an mcp_servers entry.
const (
	DefaultMCPConnectTimeout  = 30 * time.Second
	DefaultMCPTimeout         = time.Minute
	DefaultMCPRefreshInterval = 5 * time.Minute
)

func mcpPath(i int, rest string) string { return fmt.Sprintf("mcp_servers[%d].%s", i, rest) }

func mcpServerDefaults(c *Config, given func(string) bool) {
	for i := range c.MCPServers {
		s := &c.MCPServers[i]
		if s.Transport == "" {
			switch {
			case len(s.Command) > 0:
				s.Transport = "stdio"
			case s.URL != "":
				s.Transport = "http"
			}
		}
		setDuration(&s.ConnectTimeout, DefaultMCPConnectTimeout, given(mcpPath(i, "connect_timeout")))
		setDuration(&s.Timeout, DefaultMCPTimeout, given(mcpPath(i, "timeout")))
		setDuration(&s.RefreshInterval, DefaultMCPRefreshInterval, given(mcpPath(i, "refresh_interval")))
		if s.MaxOutput == 0 && !given(mcpPath(i, "max_output")) {
			s.MaxOutput = DefaultMaxOutput
		}
	}
}

// mcpToolRE is MCP's tool name alphabet; mcpGlobRE adds glob characters.
var (
	mcpToolRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	mcpGlobRE = regexp.MustCompile(`^[A-Za-z0-9_.*?-]{1,128}$`)
)

// reservedMCPHeaders are set by the transport itself.
var reservedMCPHeaders = []string{"Accept", "Content-Length", "Content-Type", "Host", "Last-Event-Id", "Mcp-Protocol-Version", "Mcp-Session-Id"}

func (c *checker) mcpServers() {
	seen := map[string]int{}
	for i := range c.cfg.MCPServers {
		s := &c.cfg.MCPServers[i]
		if first, dup := seen[s.Name]; dup && s.Name != "" {
			c.problem(mcpPath(i, "name"), "duplicate mcp server name %q (also mcp_servers[%d])", s.Name, first)
		} else {
			seen[s.Name] = i
		}
		if s.Name != "" && !nameRE.MatchString(s.Name) {
			c.problem(mcpPath(i, "name"), "must be 1-64 letters, digits, '_' or '-' (it prefixes the tools: <name>.<tool>)")
		}
		switch s.Transport {
		case "stdio":
			if len(s.Command) == 0 {
				c.problem(mcpPath(i, "command"), "missing required value (transport is stdio)")
			} else if s.Command[0] == "" {
				c.problem(mcpPath(i, "command[0]"), "program must not be empty")
			}
			if s.URL != "" {
				c.problem(mcpPath(i, "url"), "applies to transport http only; a stdio server is reached through command")
			}
			if len(s.Headers) > 0 {
				c.problem(mcpPath(i, "headers"), "applies to transport http only (pass a stdio server's credentials in env)")
			}
			for k := range s.Env {
				if !validEnvName(k) {
					c.problem(joinKey(mcpPath(i, "env"), k), "invalid environment variable name %q", k)
				}
			}
		case "http":
			if s.URL == "" {
				c.problem(mcpPath(i, "url"), "missing required value (transport is http)")
			} else {
				c.httpURL(mcpPath(i, "url"), s.URL)
			}
			if len(s.Command) > 0 {
				c.problem(mcpPath(i, "command"), "applies to transport stdio only; an http server is reached at url")
			}
			if len(s.Env) > 0 {
				c.problem(mcpPath(i, "env"), "applies to transport stdio only (send an http server's credentials in headers)")
			}
			for k := range s.Headers {
				canon := http.CanonicalHeaderKey(k)
				if !validHeaderName(k) {
					c.problem(joinKey(mcpPath(i, "headers"), k), "invalid header name %q", k)
				} else if slices.Contains(reservedMCPHeaders, canon) {
					c.problem(joinKey(mcpPath(i, "headers"), k), "header %s is set by the transport", canon)
				}
			}
		default:
			c.problem(fmt.Sprintf("mcp_servers[%d]", i), "needs command (transport stdio) or url (transport http)")
		}
		for j, g := range s.Tools {
			if !mcpGlobRE.MatchString(g) {
				c.problem(fmt.Sprintf("%s[%d]", mcpPath(i, "tools"), j), "must be a glob over tool names: letters, digits, '_', '.', '-', '*' and '?'")
			}
		}
		for name, o := range s.Overrides {
			p := joinKey(mcpPath(i, "overrides"), name)
			switch {
			case !mcpToolRE.MatchString(name):
				c.problem(p, "not an MCP tool name (letters, digits, '_', '.', '-')")
			case !s.offers(name):
				c.problem(p, "mcp_servers[%d].tools does not offer %q, so this override never applies", i, name)
			}
			switch d := o.Description; {
			case len(d) > MaxMCPDescription:
				c.problem(p+".description", "is %d bytes; the limit is %d", len(d), MaxMCPDescription)
			case d != "" && strings.TrimSpace(d) == "":
				c.problem(p+".description", "is blank: leave it out to keep the server's description (framed as external content)")
			}
		}
		for _, d := range []struct {
			key string
			v   Duration
		}{{"connect_timeout", s.ConnectTimeout}, {"timeout", s.Timeout}, {"refresh_interval", s.RefreshInterval}} {
			if d.v <= 0 {
				c.problem(mcpPath(i, d.key), "must be greater than 0")
			}
		}
		if s.MaxOutput <= 0 {
			c.problem(mcpPath(i, "max_output"), "must be greater than 0")
		}
		s.secrets = c.expandedUnder(i)
	}
}

// offers reports whether the server's tools globs let remote through.
func (s *MCPServer) offers(remote string) bool {
	if len(s.Tools) == 0 {
		return true
	}
	for _, g := range s.Tools {
		if approvals.Glob(g, remote) {
			return true
		}
	}
	return false
}

// expandedUnder lists the variable values ${VAR} substituted in server
// i's command, env, url and headers.
func (c *checker) expandedUnder(i int) []string {
	var paths []string
	for p := range c.expanded {
		for _, key := range []string{"command", "env", "url", "headers"} {
			if strings.HasPrefix(p, mcpPath(i, key)) {
				paths = append(paths, p)
			}
		}
	}
	sort.Strings(paths)
	var out []string
	for _, p := range paths {
		out = append(out, c.expanded[p]...)
	}
	return out
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// upstreamToolProblem checks a "<server>.<tool>" reference: the server must
// be configured and its tools globs must offer the tool. Whether the
// server really has it is known only at run time (`opsgate mcp tools`).
func (c *checker) upstreamToolProblem(name string) string {
	srv, tool, _ := strings.Cut(name, ".")
	for i := range c.cfg.MCPServers {
		s := &c.cfg.MCPServers[i]
		if s.Name != srv {
			continue
		}
		switch {
		case !mcpToolRE.MatchString(tool):
			return fmt.Sprintf("%q: after %q comes an MCP tool name (letters, digits, '_', '.', '-')", name, srv+".")
		case !s.offers(tool):
			return fmt.Sprintf("mcp_servers[%d].tools does not offer %q", i, tool)
		}
		return ""
	}
	msg := fmt.Sprintf("no tool named %q and no mcp_servers entry named %q", name, srv)
	var names []string
	for _, s := range c.cfg.MCPServers {
		names = append(names, s.Name)
	}
	if near := suggest(srv, names); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near+"."+tool)
	}
	return msg
}

// toolRefProblem checks a literal tool name in a rule: a configured tool
// or an upstream "<server>.<tool>".
func (c *checker) toolRefProblem(name string, tools []string) string {
	if strings.Contains(name, ".") {
		return c.upstreamToolProblem(name)
	}
	if !contains(tools, name) {
		return fmt.Sprintf("no tool named %q", name)
	}
	return ""
}
