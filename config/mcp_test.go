package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// validMCP declares one server of each transport; other cases build on it.
const validMCP = `mcp_servers:
  - name: github
    url: "https://mcp.example.com/mcp?key=${GH_KEY}"
    headers: {Authorization: "Bearer ${GH_MCP}"}
  - name: fs
    command: ["npx", "-y", "@modelcontextprotocol/server-filesystem", "${RUNBOOKS}"]
    env: {TOKEN: "${FS_TOKEN}", MODE: plain}
    tools: ["read_*", "write_file"]
    overrides:
      write_file: {risk: high_impact, idempotent: false, description: "Write a runbook file (the operator's words)"}
`

var mcpEnv = map[string]string{"GH_MCP": "gh-secret", "GH_KEY": "k3y-value", "RUNBOOKS": "/srv/runbooks", "FS_TOKEN": "fs-secret"}

func TestMCPServersDecodeWithDefaults(t *testing.T) {
	t.Parallel()
	src := validMCP + `flows:
  - name: read
    command: "read {name}"
    steps: [{tool: fs.read_text_file, args: {path: "/srv/runbooks/{{.name}}"}}]
policy:
  rules:
    - {match: {tool: "fs.write_file"}, action: ask}
    - {match: {tool: "github.*"}, action: allow}
`
	cfg, err := Loader{LookupEnv: envOf(mcpEnv)}.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	gh, fs := cfg.MCPServers[0], cfg.MCPServers[1]
	if gh.Transport != "http" || fs.Transport != "stdio" {
		t.Errorf("transports inferred: %q %q", gh.Transport, fs.Transport)
	}
	if fs.ConnectTimeout.D() != 30*time.Second || fs.Timeout.D() != time.Minute || fs.RefreshInterval.D() != 5*time.Minute || fs.MaxOutput != 64<<10 {
		t.Errorf("defaults: %+v", fs)
	}
	o := fs.Overrides["write_file"]
	if o.Risk != "high_impact" || o.Idempotent == nil || *o.Idempotent || o.Destructive != nil || o.Description != "Write a runbook file (the operator's words)" {
		t.Errorf("override: %+v", o)
	}
	// What ${VAR} produced is masked later; literal values are not.
	if got := gh.Secrets(); !slices.Equal(got, []string{"gh-secret", "k3y-value"}) {
		t.Errorf("github secrets: %q", got)
	}
	if got := fs.Secrets(); !slices.Equal(got, []string{"/srv/runbooks", "fs-secret"}) {
		t.Errorf("fs secrets: %q", got)
	}
}

func TestMCPServerProblems(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ src, path, msg string }{
		"NeitherCommandNorURL":     {"mcp_servers:\n  - name: x\n", "mcp_servers[0]", "needs command (transport stdio) or url (transport http)"},
		"StdioWithoutCommand":      {"mcp_servers:\n  - {name: x, transport: stdio}\n", "mcp_servers[0].command", "transport is stdio"},
		"HTTPWithoutURL":           {"mcp_servers:\n  - {name: x, transport: http}\n", "mcp_servers[0].url", "transport is http"},
		"HTTPWithCommand":          {"mcp_servers:\n  - {name: x, transport: http, url: \"https://a/mcp\", command: [y]}\n", "mcp_servers[0].command", "transport stdio only"},
		"StdioWithHeaders":         {"mcp_servers:\n  - {name: x, command: [y], headers: {A: b}}\n", "mcp_servers[0].headers", "transport http only"},
		"HTTPWithEnv":              {"mcp_servers:\n  - {name: x, url: \"https://a/mcp\", env: {A: b}}\n", "mcp_servers[0].env", "transport stdio only"},
		"RelativeURL":              {"mcp_servers:\n  - {name: x, url: /mcp}\n", "mcp_servers[0].url", "absolute http(s) URL"},
		"UnknownTransport":         {"mcp_servers:\n  - {name: x, transport: sse, url: \"https://a/mcp\"}\n", "mcp_servers[0].transport", "must be one of stdio, http"},
		"DottedName":               {"mcp_servers:\n  - {name: a.b, command: [y]}\n", "mcp_servers[0].name", "prefixes the tools"},
		"DuplicateName":            {"mcp_servers:\n  - {name: a, command: [y]}\n  - {name: a, command: [z]}\n", "mcp_servers[1].name", `duplicate mcp server name "a"`},
		"EmptyProgram":             {"mcp_servers:\n  - {name: a, command: [\"\"]}\n", "mcp_servers[0].command[0]", "must not be empty"},
		"ReservedHeader":           {"mcp_servers:\n  - {name: a, url: \"https://a/mcp\", headers: {mcp-session-id: x}}\n", `mcp_servers[0].headers.mcp-session-id`, "set by the transport"},
		"BadHeaderName":            {"mcp_servers:\n  - {name: a, url: \"https://a/mcp\", headers: {\"a b\": x}}\n", `mcp_servers[0].headers["a b"]`, "invalid header name"},
		"BadEnvName":               {"mcp_servers:\n  - {name: a, command: [y], env: {\"1X\": x}}\n", `mcp_servers[0].env.1X`, "invalid environment variable name"},
		"BadGlob":                  {"mcp_servers:\n  - {name: a, command: [y], tools: [\"read files\"]}\n", "mcp_servers[0].tools[0]", "glob over tool names"},
		"OverrideNotOffered":       {"mcp_servers:\n  - {name: a, command: [y], tools: [\"read_*\"], overrides: {write_file: {risk: read}}}\n", "mcp_servers[0].overrides.write_file", "never applies"},
		"OverrideBadRisk":          {"mcp_servers:\n  - {name: a, command: [y], overrides: {t: {risk: lethal}}}\n", "mcp_servers[0].overrides.t.risk", "must be one of read, reversible"},
		"OverrideBlankDescription": {"mcp_servers:\n  - {name: a, command: [y], overrides: {t: {description: \"  \"}}}\n", "mcp_servers[0].overrides.t.description", "is blank"},
		"OverrideLongDescription":  {"mcp_servers:\n  - {name: a, command: [y], overrides: {t: {description: \"" + strings.Repeat("d", 5000) + "\"}}}\n", "mcp_servers[0].overrides.t.description", "the limit is 4096"},
		"ZeroTimeout":              {"mcp_servers:\n  - {name: a, command: [y], timeout: 0s}\n", "mcp_servers[0].timeout", "greater than 0"},
		"ZeroMaxOutput":            {"mcp_servers:\n  - {name: a, command: [y], max_output: 0}\n", "mcp_servers[0].max_output", "greater than 0"},
		"UnknownKey":               {"mcp_servers:\n  - {name: a, command: [y], header: {}}\n", "mcp_servers[0].header", `did you mean "headers"?`},
		"UnsetSecret":              {"mcp_servers:\n  - {name: a, url: \"https://a/mcp\", headers: {Authorization: \"Bearer ${NOPE}\"}}\n", "mcp_servers[0].headers.Authorization", "NOPE is not set"},
		"FlowUnknownServer": {"mcp_servers:\n  - {name: fs, command: [y]}\nflows:\n  - {name: f, command: f, steps: [{tool: fz.read}]}\n",
			"flows[0].steps[0].tool", `no tool named "fz.read" and no mcp_servers entry named "fz" (did you mean "fs.read"?)`},
		"FlowToolNotOffered": {"mcp_servers:\n  - {name: fs, command: [y], tools: [\"read_*\"]}\nflows:\n  - {name: f, command: f, steps: [{tool: fs.write_file}]}\n",
			"flows[0].steps[0].tool", `mcp_servers[0].tools does not offer "write_file"`},
		"FlowEmptyUpstreamTool": {"mcp_servers:\n  - {name: fs, command: [y]}\nflows:\n  - {name: f, command: f, steps: [{tool: \"fs.\"}]}\n",
			"flows[0].steps[0].tool", "comes an MCP tool name"},
		"RuleUnknownServer": {"policy:\n  rules:\n    - {match: {tool: gh.create_issue}, action: ask}\n",
			"policy.rules[0].match.tool", `no mcp_servers entry named "gh"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var found []string
			for _, p := range parseProblems(t, tc.src) {
				found = append(found, p.Path+": "+p.Message)
				if p.Path == tc.path && strings.Contains(p.Message, tc.msg) {
					return
				}
			}
			t.Fatalf("want %s: …%s…; got:\n%s", tc.path, tc.msg, strings.Join(found, "\n"))
		})
	}
}

func TestMCPServerGlobsAndDotsAccepted(t *testing.T) {
	t.Parallel()
	// Dotted names are upstream tools wherever tool names go; an upstream
	// tool's own name may hold dots too ("fs.v2.read" is tool "v2.read").
	src := `mcp_servers:
  - {name: fs, command: [y], tools: ["v2.*", "read_*"]}
flows:
  - {name: f, command: f, steps: [{tool: fs.v2.read}, {tool: fs.read_file}]}
policy:
  rules:
    - {match: {tool: "fs.*"}, action: allow}
    - {match: {tool: "fs.v2.read"}, action: ask}
`
	if _, err := (Loader{LookupEnv: envOf(nil)}).Parse("t.yaml", []byte(src)); err != nil {
		t.Fatal(err)
	}
}
