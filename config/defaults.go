package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Defaults for values the configuration may omit. They are exported so docs
// and the CLI can show them; they are constants, not settings.
const (
	DefaultListen        = "127.0.0.1:8080"
	DefaultDataDir       = "./data"
	DefaultConcurrency   = 16
	DefaultLease         = 30 * time.Second
	DefaultPollInterval  = time.Second
	DefaultMaxOutput     = 64 << 10
	DefaultToolTimeout   = time.Minute
	DefaultDryRunTimeout = 30 * time.Second
	DefaultApprovalTTL   = time.Hour
	DefaultSessionTTL    = time.Hour
	// DefaultAgentConcurrency is api.tokens[].agent_concurrency when
	// omitted: Agent API turns one token runs at once.
	DefaultAgentConcurrency = 4
	// MaxAgentConcurrency bounds api.tokens[].agent_concurrency.
	MaxAgentConcurrency = 32
	// AgentQueueFactor is how many turns per allowed concurrent turn may
	// wait in a token's queue (4 × agent_concurrency); more are refused.
	AgentQueueFactor = 4
	// DefaultAuditKeyFile is the audit key's file name under data_dir.
	DefaultAuditKeyFile = "audit.key"
	// DefaultReceiptKeyFile is the receipt signing key's file name under
	// data_dir; DefaultReceiptTTL how long a receipt is valid.
	DefaultReceiptKeyFile = "receipt.key"
	DefaultReceiptTTL     = 24 * time.Hour
)

// The values of approvals.question_answerers (the engine's
// AnswerRequesterOrApprovers and AnswerRequester; cmd/opsgate tests that
// they agree).
const (
	QuestionAnswerersRequesterOrApprovers = "requester_or_approvers"
	QuestionAnswerersRequester            = "requester"
)

// applyDefaults fills omitted values. Values given explicitly (even as 0)
// are left for the checks to judge, which is why presence comes from the
// decoder's line table.
func applyDefaults(c *Config, given func(path string) bool) {
	setString(&c.Server.Listen, DefaultListen)
	setString(&c.Server.DataDir, DefaultDataDir)
	setString(&c.Store.Driver, "sqlite")
	if c.Store.Driver == "sqlite" && c.Store.DSN == "" && !given("store.dsn") {
		c.Store.DSN = filepath.Join(c.Server.DataDir, "opsgate.db")
	}
	if !given("engine.concurrency") {
		c.Engine.Concurrency = DefaultConcurrency
	}
	setDuration(&c.Engine.Lease, DefaultLease, given("engine.lease"))
	setDuration(&c.Engine.PollInterval, DefaultPollInterval, given("engine.poll_interval"))
	for i := range c.API.Tokens {
		t := &c.API.Tokens[i]
		if t.Actor == "" && t.Name != "" {
			t.Actor = "api:" + t.Name
		}
		if !given(fmt.Sprintf("api.tokens[%d].agent_concurrency", i)) {
			t.AgentConcurrency = DefaultAgentConcurrency
		}
	}
	normalizeIdentities(c)
	setString(&c.Channels.Slack.Mode, "http")
	setString(&c.Channels.Telegram.Mode, "webhook")
	setString(&c.Channels.Email.IMAP.Mailbox, "INBOX")
	for i := range c.Tools {
		t := &c.Tools[i]
		if t.InputSchema == nil {
			t.InputSchema = map[string]any{"type": "object"}
		}
		if t.MaxOutput == 0 && !given(toolPath(i, "max_output")) {
			t.MaxOutput = DefaultMaxOutput
		}
		setDuration(&t.DryRunTimeout, DefaultDryRunTimeout, given(toolPath(i, "dry_run_timeout")))
		if t.Exec != nil {
			setDuration(&t.Exec.Timeout, DefaultToolTimeout, given(toolPath(i, "exec.timeout")))
		}
		if t.HTTP != nil {
			setString(&t.HTTP.Method, "GET")
			setDuration(&t.HTTP.Timeout, DefaultToolTimeout, given(toolPath(i, "http.timeout")))
		}
	}
	mcpServerDefaults(c, given)
	setString(&c.Policy.Default, "auto")
	for i := range c.Policy.Rules {
		if r := &c.Policy.Rules[i]; r.Quorum == (Quorum{}) && !given(rulePath(i, "quorum")) {
			r.Quorum.N = 1
		}
	}
	setDuration(&c.Approvals.TTL, DefaultApprovalTTL, given("approvals.ttl"))
	setDuration(&c.Approvals.SessionTTL, DefaultSessionTTL, given("approvals.session_ttl"))
	if c.Approvals.QuestionAnswerers == "" {
		c.Approvals.QuestionAnswerers = QuestionAnswerersRequesterOrApprovers
	}
	if !given("channels.email.require_dmarc") {
		// From: alone is forgeable: decisions by mail need our MX's word.
		c.Channels.Email.RequireDMARC = true
	}
	setString(&c.Audit.KeyFile, filepath.Join(c.Server.DataDir, DefaultAuditKeyFile))
	setString(&c.Telemetry.ServiceName, "opsgate")
	setString(&c.Approvals.ReceiptKeyFile, filepath.Join(c.Server.DataDir, DefaultReceiptKeyFile))
	setDuration(&c.Approvals.ReceiptTTL, DefaultReceiptTTL, given("approvals.receipt_ttl"))
	if !given("channels.console.token_login") {
		c.Channels.Console.TokenLogin = true
	}
	setString(&c.Channels.Console.OIDC.PersonClaim, "email")
	for i := range c.Audit.Sinks {
		sk := &c.Audit.Sinks[i]
		setString(&sk.Name, sk.Type+":"+sk.Addr+sk.URL)
	}
	applyAgentDefaults(c, given)
	applyScheduleDefaults(c)
}

func setString(p *string, def string) {
	if *p == "" {
		*p = def
	}
}

func setDuration(p *Duration, def time.Duration, given bool) {
	if *p == 0 && !given {
		*p = Duration(def)
	}
}

// normalizeIdentities lowercases email identities wherever approvers and
// actors are named: mail addresses are case-insensitive in practice and the
// email channel reports senders lowercased, so "email:Bob@Example.com" in a
// group must match a reply from bob@example.com.
func normalizeIdentities(c *Config) {
	lower := func(ids []string) {
		for i, id := range ids {
			if rest, ok := strings.CutPrefix(id, "email:"); ok {
				ids[i] = "email:" + strings.ToLower(rest)
			}
		}
	}
	for _, members := range c.Approvers.Groups {
		lower(members)
	}
	for _, ids := range c.People {
		lower(ids)
	}
	for _, rq := range c.Channels.ChatRequesters() {
		lower(rq)
	}
	for i := range c.Policy.Rules {
		lower(c.Policy.Rules[i].Approvers)
	}
	lower(c.Policy.DefaultApprovers)
	for i := range c.API.Tokens {
		if rest, ok := strings.CutPrefix(c.API.Tokens[i].Actor, "email:"); ok {
			c.API.Tokens[i].Actor = "email:" + strings.ToLower(rest)
		}
	}
}
