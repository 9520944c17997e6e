// Package config loads and validates opsgate's YAML configuration.
//
// The document is decoded from a yaml.Node tree by a walk of our own rather
// than yaml.Unmarshal, so that every problem in a file (unknown keys, wrong
// types, missing values, bad references) is reported at once with its YAML
// path and line: an operator fixing a config should need one round trip, not
// one per mistake. The key names are the README's reference; see configs/production.yaml
// for a complete example.
//
// Struct tags used by the walk: `yaml:"name"` names the key, `cfg:"required"`
// makes it mandatory, `enum:"a|b"` restricts a string.
package config

import (
	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/approvals/condition"
	"github.com/opsgate/opsgate/core/router"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Config is a whole opsgate configuration, defaults applied and validated.
type Config struct {
	// Source is the file the configuration came from ("" for none); not a key.
	Source string `yaml:"-"`
	// lines maps YAML paths to their lines, for Config.Line.
	lines map[string]int
	// warnings are what config check reports without failing (Warnings).
	warnings []Problem

	Server   Server   `yaml:"server"`
	Store    Store    `yaml:"store"`
	Engine   Engine   `yaml:"engine"`
	API      API      `yaml:"api"`
	Channels Channels `yaml:"channels"`
	// People maps one human to their identities on several channels
	// ("alice": ["console:alice", "slack:UALICE"]): quorum, self-approval
	// and eligibility count persons, not identities.
	People    map[string][]string `yaml:"people"`
	Approvers Approvers           `yaml:"approvers"`
	Tools     []Tool              `yaml:"tools"`
	Flows     []Flow              `yaml:"flows"`
	Policy    Policy              `yaml:"policy"`
	Approvals Approvals           `yaml:"approvals"`
	Audit     Audit               `yaml:"audit"`
	// Telemetry turns on OpenTelemetry traces (docs/telemetry.md).
	Telemetry Telemetry `yaml:"telemetry"`

	// MCPServers are upstream MCP servers whose tools are offered as
	// "<server>.<tool>" beside Tools (see mcp.go).
	MCPServers []MCPServer `yaml:"mcp_servers"`
	// MCP configures opsgate's own MCP endpoints (config/mcpserver.go).
	MCP MCP `yaml:"mcp"`
	// Models and Agents are the LLM agents (config/agents.go).
	Models []Model `yaml:"models"`
	Agents []Agent `yaml:"agents"`
	// Schedules start runs on their own, at the ticks of a cron
	// expression (config/schedules.go).
	Schedules []Schedule `yaml:"schedules"`
}

// Audit keys the hash chain of the audit log.
type Audit struct {
	// KeyFile holds the HMAC key of the audit chain, kept outside the
	// store; generated (mode 0600) on first start when missing; default
	// <data_dir>/audit.key. Every replica must read the same key.
	KeyFile string `yaml:"key_file"`
	// Sinks receive every audit entry, in order, at least once
	// (core/auditsink, docs/audit-sinks.md).
	Sinks []AuditSink `yaml:"sinks"`
}

// AuditSink is one external system every audit entry is delivered to.
type AuditSink struct {
	// Name keys the sink's delivery position in the store; default
	// "<type>:<addr or url>". Keep it when changing the address to
	// continue where delivery was; a new name starts at the first entry.
	Name string `yaml:"name"`
	// Type is syslog (RFC 5424 over udp, tcp or a unix socket) or http
	// (JSON lines POSTed to url).
	Type string `yaml:"type" cfg:"required" enum:"syslog|http"`
	// Addr is the syslog receiver: udp://host:port, tcp://host:port or
	// unix:///path.
	Addr string `yaml:"addr"`
	// URL and Headers reach an http sink; put credentials in headers
	// with ${VAR}.
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
}

// Server is the single HTTP listener and where local state lives.
type Server struct {
	// Listen is host:port; default 127.0.0.1:8080 so a fresh install is not
	// exposed to the network by accident.
	Listen string `yaml:"listen"`
	// PublicURL is the externally reachable base URL, used for links in cards
	// and for registering platform webhooks.
	PublicURL string `yaml:"public_url"`
	// DataDir holds local state (the SQLite database by default); default "./data".
	DataDir string `yaml:"data_dir"`
}

// Store selects the database. SQLite serves one process; Postgres is needed
// for more than one replica.
type Store struct {
	// Driver is sqlite (default) or postgres.
	Driver string `yaml:"driver" enum:"sqlite|postgres"`
	// DSN is a file path for sqlite (default <data_dir>/opsgate.db) or a
	// postgres:// URL (required for postgres).
	DSN string `yaml:"dsn"`
}

// Engine tunes the run engine.
type Engine struct {
	// Concurrency bounds tool calls running at once per process; default 16.
	Concurrency int `yaml:"concurrency"`
	// Lease is how long a claimed job stays owned without a heartbeat before
	// another replica may take it over; default 30s.
	Lease Duration `yaml:"lease"`
	// PollInterval is how often idle workers look for work when no
	// notification arrives (SQLite always polls); default 1s.
	PollInterval Duration `yaml:"poll_interval"`
}

// API configures bearer tokens for /api/v1 and /mcp. With no tokens the
// server generates one on first start, keeps it in <data_dir>/admin.token
// (mode 0600, reused on later starts) and logs the file's path, never the
// token.
type API struct {
	Tokens []APIToken `yaml:"tokens"`
}

// APIToken is one bearer token and the actor it acts as.
type APIToken struct {
	// Name identifies the token in logs and audit entries; unique.
	Name string `yaml:"name" cfg:"required"`
	// Token is the secret; non-empty, unique. Use ${VAR}.
	Token string `yaml:"token" cfg:"required"`
	// Actor is the identity requests made with the token act as; default
	// "api:<name>".
	Actor string `yaml:"actor"`
	// Scopes limit what the token may do: read, request, decide, admin,
	// session.run. Without the key a token keeps [read, request, decide,
	// admin], or [read, request, session.run] for an "agent:" actor; an
	// agent never decides, whatever its scopes say.
	Scopes []string `yaml:"scopes"`
	// AgentConcurrency is how many Agent API turns (scope session.run) the
	// token runs at once, 1..32; default DefaultAgentConcurrency. Up to
	// AgentQueueFactor times as many more wait in order; beyond that a new
	// turn is refused (429 queue_full). docs/agent-api.md.
	AgentConcurrency int `yaml:"agent_concurrency"`
	// Internal marks a token of the internal MCP endpoints
	// (/internal/mcp, /internal/mcp/studio): it works there only, and no
	// other token works there (config/mcpserver.go).
	Internal bool `yaml:"internal"`
}

// Requesters names who may start runs on a chat channel or by email:
// "group:<name>", "person:<name>" or identities, or "anyone". Unset: only
// identities the configuration knows (listed under people or in an approver
// group).
type Requesters []string

// Approvers names groups of identities ("slack:U1", "email:a@b.c") or
// persons ("person:alice") that policy rules refer to as "group:<name>".
type Approvers struct {
	Groups map[string][]string `yaml:"groups"`
}

// Risk tiers, lowest to highest. They feed policy.default auto and are shown
// on approval cards.
const (
	RiskRead       = "read"
	RiskReversible = "reversible"
	RiskExternal   = "external"
	RiskHighImpact = "high_impact"
)

// Tool is one operation opsgate can run: a process (exec) or an HTTP call.
type Tool struct {
	// Name is unique; letters, digits, '_' and '-' (MCP's tool name rules).
	Name        string `yaml:"name" cfg:"required"`
	Description string `yaml:"description"`
	// Risk is read, reversible, external or high_impact.
	Risk string `yaml:"risk" cfg:"required" enum:"read|reversible|external|high_impact"`
	// Destructive marks tools whose effect cannot be undone; policy default
	// auto always asks for them.
	Destructive bool `yaml:"destructive"`
	// Idempotent tools may be re-dispatched after a crash mid-call; others
	// make the run interrupted instead.
	Idempotent bool `yaml:"idempotent"`
	// InputSchema is a JSON Schema (object) for the arguments, kept as
	// decoded JSON values; default {"type": "object"}. See Tool.Schema.
	InputSchema map[string]any `yaml:"input_schema"`
	Exec        *Exec          `yaml:"exec"`
	HTTP        *HTTP          `yaml:"http"`
	// MaxOutput caps captured output; default 64KiB.
	MaxOutput ByteSize `yaml:"max_output"`
	// DryRunTimeout bounds the dry run made for the approval card; default 30s.
	DryRunTimeout Duration `yaml:"dry_run_timeout"`

	schema *jsonschema.Schema
}

// Schema returns the compiled InputSchema, ready to validate arguments.
// It is nil only for a Tool that did not come from Parse.
func (t *Tool) Schema() *jsonschema.Schema { return t.schema }

// Exec runs a program. Arguments are argv elements rendered with
// text/template from the call's arguments; no shell is involved.
type Exec struct {
	Command []string `yaml:"command" cfg:"required"`
	// DryRun, when set, is run to produce the approval card's preview.
	DryRun []string `yaml:"dry_run"`
	// Timeout bounds one call; default 1m.
	Timeout Duration `yaml:"timeout"`
	// Env adds variables to the process environment. Values are literal:
	// the runner does not render them, so config check refuses "{{" here.
	Env map[string]string `yaml:"env"`
	// AllowDashArgs lets an argument value start an argv element with "-".
	// Default false: such a value would reach the program as an option
	// ("--upload-pack=…"), so the call is refused as invalid arguments.
	AllowDashArgs bool `yaml:"allow_dash_args"`
}

// HTTP makes one HTTP request; URL, header values and Body are templates.
type HTTP struct {
	// Method defaults to GET.
	Method  string            `yaml:"method" enum:"GET|HEAD|POST|PUT|PATCH|DELETE"`
	URL     string            `yaml:"url" cfg:"required"`
	Headers map[string]string `yaml:"headers"`
	Body    string            `yaml:"body"`
	// Timeout bounds one call; default 1m.
	Timeout Duration `yaml:"timeout"`
}

// Flow is a named sequence of tool calls started by a chat command.
type Flow struct {
	Name        string `yaml:"name" cfg:"required"`
	Description string `yaml:"description"`
	// Command is a router pattern: "deploy {service} {version} {env=staging}".
	Command string `yaml:"command" cfg:"required"`
	Steps   []Step `yaml:"steps" cfg:"required"`

	pattern *router.Pattern
}

// Pattern returns the parsed Command; nil only for a Flow not from Parse.
func (f *Flow) Pattern() *router.Pattern { return f.pattern }

// Step calls one tool; string values in Args are templates over the flow's
// arguments ("{{.service}}"). A step with agent_task instead is work an
// external agent performs over MCP (agenttask.go, docs/mcp.md).
type Step struct {
	// Name is the step's stage name (artifacts are found by flow and
	// stage); default the tool's name, or "agent_task".
	Name      string         `yaml:"name"`
	Tool      string         `yaml:"tool"`
	Args      map[string]any `yaml:"args"`
	AgentTask *AgentTask     `yaml:"agent_task"`
}

// Policy decides, per tool call, allow, ask or deny.
type Policy struct {
	// Default applies when no rule matches: auto (default) asks for
	// destructive tools and risk external or high_impact and allows the
	// rest; allow, ask and deny apply to every tool.
	Default string `yaml:"default" enum:"auto|allow|ask|deny"`
	// Rules are evaluated in order; the last match wins, except that a deny
	// is never overridden.
	Rules []Rule `yaml:"rules"`
	// DefaultApprovers decide calls that ask without naming approvers: the
	// no-match default, or an ask rule with no approvers. When empty, every
	// member of every approver group may decide them.
	DefaultApprovers []string `yaml:"default_approvers"`
	// ForeverHighImpact lets an approver's "forever" grant (a stored allow
	// rule) cover a high_impact tool; default false.
	ForeverHighImpact bool `yaml:"forever_high_impact"`
}

// Rule is one policy rule.
type Rule struct {
	Match  Match  `yaml:"match"`
	Action string `yaml:"action" cfg:"required" enum:"allow|ask|deny"`
	// Approvers are "group:<name>" references or identities ("slack:U1").
	Approvers []string `yaml:"approvers"`
	// Quorum is how many distinct persons must approve: an integer
	// (default 1) or a CEL expression giving one.
	Quorum Quorum `yaml:"quorum"`
	// AllowSelfApproval lets the requester approve their own call when this
	// rule asks; by default nobody does.
	AllowSelfApproval bool `yaml:"allow_self_approval"`
	// Escalation is the rule's ladder while its asks wait; unset takes
	// approvals.escalation, an empty list turns escalation off.
	Escalation []EscalationStep `yaml:"escalation"`
	// When is a CEL condition over tool, args, requester, channel, risk and
	// now: the rule applies only where it is true (docs/policy.md).
	When string `yaml:"when"`
	// Description says what the rule is for, in a few words; cards, the
	// console and the CLI show it as why the rule asked.
	Description string `yaml:"description"`

	// cond and quorumFn are When and Quorum.Expr compiled by the check
	// (Condition, QuorumExpr).
	cond, quorumFn *condition.Expr
}

// Condition is the rule's `when` compiled, or nil (no condition, or one
// that did not compile: the configuration was refused then).
func (r *Rule) Condition() approvals.Condition {
	if r.cond == nil {
		return nil
	}
	return r.cond
}

// QuorumExpr is the rule's quorum expression compiled, or nil.
func (r *Rule) QuorumExpr() approvals.QuorumExpr {
	if r.quorumFn == nil {
		return nil
	}
	return r.quorumFn
}

// EscalationStep is one rung of an escalation ladder: after After, if the approval
// still waits, remind the approvers, add approvers, or end it with an
// outcome (deny, or approve — never for high_impact or destructive tools).
type EscalationStep struct {
	After        Duration `yaml:"after" cfg:"required"`
	Remind       bool     `yaml:"remind"`
	AddApprovers []string `yaml:"add_approvers"`
	Outcome      string   `yaml:"outcome" enum:"deny|approve"`
}

// Match selects tool calls: Tool is a glob over the tool name (path.Match
// syntax), Args maps argument names to globs over their string form.
type Match struct {
	Tool string            `yaml:"tool"`
	Args map[string]string `yaml:"args"`
}

// Approvals governs pending approvals.
type Approvals struct {
	// TTL is how long an approval stays pending before it expires; default 1h.
	TTL Duration `yaml:"ttl"`
	// AllowSelfApproval lets requesters approve their own calls under every
	// rule (older configs, the one-user quickstart); prefer the rule-level
	// allow_self_approval.
	AllowSelfApproval bool `yaml:"allow_self_approval"`
	// SessionTTL is how long a session grant lasts; default 1h.
	SessionTTL Duration `yaml:"session_ttl"`
	// Escalation is the default ladder of every ask whose rule has none.
	Escalation []EscalationStep `yaml:"escalation"`
	// ReceiptKeyFile holds the Ed25519 key that signs approval receipts
	// (docs/receipts.md); serve generates it, mode 0600, on first start.
	// Default <data_dir>/receipt.key.
	ReceiptKeyFile string `yaml:"receipt_key_file"`
	// ReceiptTTL is how long a receipt is valid after its decision
	// (its exp claim); default 24h.
	ReceiptTTL Duration `yaml:"receipt_ttl"`
	// QuestionAnswerers says who may answer an agent's ask_user question:
	// "requester_or_approvers" (default) or "requester" — for teams where a
	// question about the requester's intent must not be answered for them.
	QuestionAnswerers string `yaml:"question_answerers"`
}

// Telemetry configures OpenTelemetry traces (docs/telemetry.md). Off unless
// OTLPEndpoint or the standard OTEL_EXPORTER_OTLP_ENDPOINT is set.
type Telemetry struct {
	// OTLPEndpoint is the OTLP/HTTP collector's base URL
	// (http://127.0.0.1:4318); traces go to <endpoint>/v1/traces.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// ServiceName is the service.name resource attribute (default opsgate).
	ServiceName string `yaml:"service_name"`
}
