package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func containsStr(s, sub string) bool { return strings.Contains(s, sub) }

// envOf returns a lookup func over a fixed map, so tests never touch the
// process environment.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func parseProblems(t *testing.T, src string) []Problem {
	t.Helper()
	_, err := Loader{LookupEnv: envOf(nil)}.Parse("test.yaml", []byte(src))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse error = %v, want *config.Error", err)
	}
	return ce.Problems
}

// validTools is a minimal valid tool list other cases build on.
const validTools = `tools:
  - name: t
    risk: read
    exec: {command: [echo, hi]}
`

func TestProblemKinds(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		src  string
		path string
		line int
		msg  string
	}{
		"UnknownTopKeyWithSuggestion": {"servr:\n  listen: x\n", "servr", 1, `unknown key (did you mean "server"?)`},
		"UnknownKeyListsKnown":        {"server:\n  zzzzzzzz: 1\n", "server.zzzzzzzz", 2, "unknown key (known: data_dir, listen, public_url)"},
		"UnknownInlineDeliveryKey":    {"channels:\n  slack:\n    rate_limit: {}\n", "channels.slack.rate_limit", 3, `did you mean "rate_limits"?`},
		"WrongTypeString":             {"server:\n  listen: [a]\n", "server.listen", 2, "must be a string, not a list"},
		"WrongTypeMapping":            {"server: 5\n", "server", 1, `must be a mapping, not "5"`},
		"WrongTypeList":               {"tools: {a: 1}\n", "tools", 1, "must be a list, not a mapping"},
		"WrongTypeBool":               {"channels:\n  console: {enabled: maybe}\n", "channels.console.enabled", 2, `must be true or false, not "maybe"`},
		"WrongTypeInt":                {"engine:\n  concurrency: lots\n", "engine.concurrency", 2, `must be an integer, not "lots"`},
		"BadDuration":                 {"approvals:\n  ttl: 10\n", "approvals.ttl", 2, "needs a unit"},
		"EscalationStepDoesTwo": {"approvals:\n  escalation:\n    - {after: 10m, remind: true, outcome: deny}\n",
			"approvals.escalation[0]", 3, "a step does one thing"},
		"EscalationStepNeedsAfter": {"approvals:\n  escalation:\n    - {remind: true}\n",
			"approvals.escalation[0].after", 3, "missing required value"},
		"EscalationOutOfOrder": {"approvals:\n  escalation:\n    - {after: 20m, remind: true}\n    - {after: 10m, remind: true}\n",
			"approvals.escalation[1]", 4, "steps go in order"},
		"EscalationOutcomeNotLast": {"approvals:\n  escalation:\n    - {after: 10m, outcome: deny}\n    - {after: 20m, remind: true}\n",
			"approvals.escalation[0]", 3, "must be the last step"},
		"EscalationUnknownOutcome": {"approvals:\n  escalation:\n    - {after: 10m, outcome: maybe}\n",
			"approvals.escalation[0].outcome", 3, "must be one of deny, approve"},
		"EscalationAfterTheEnd": {"approvals:\n  ttl: 1h\n  escalation:\n    - {after: 90m, remind: true}\n",
			"approvals.escalation[0].after", 4, "would never fire"},
		"EscalationUnknownGroup": {"approvals:\n  escalation:\n    - {after: 10m, add_approvers: [\"group:nope\"]}\n",
			"approvals.escalation[0].add_approvers[0]", 3, `unknown approver group "nope"`},
		"EscalationOnAllowRule": {validTools + "policy:\n  rules:\n    - match: {tool: t}\n      action: allow\n      escalation: [{after: 1m, remind: true}]\n",
			"policy.rules[0].escalation", 9, "only applies to action ask"},
		"EscalationApproveHighImpact": {"tools:\n  - name: t\n    risk: high_impact\n    exec: {command: [x]}\n" +
			"policy:\n  rules:\n    - match: {tool: t}\n      action: ask\n      escalation: [{after: 1m, outcome: approve}]\n",
			"policy.rules[0].escalation[0].outcome", 9, "outcome approve is refused for high_impact and destructive tools"},
		"EscalationDefaultApproveDestructive": {"tools:\n  - name: t\n    risk: read\n    destructive: true\n    exec: {command: [x]}\n" +
			"approvals:\n  escalation: [{after: 1m, outcome: approve}]\n",
			"approvals.escalation[0].outcome", 7, `tool "t" (read, destructive) asks under the default ladder`},
		"BadByteSize":              {validTools + "    max_output: 64 KB per call\n", "tools[0].max_output", 5, "invalid size"},
		"BadRate":                  {"channels:\n  telegram:\n    rate_limits:\n      group: {rate: 20 per minute}\n", "channels.telegram.rate_limits.group.rate", 4, "invalid rate"},
		"RateRequiredInLimit":      {"channels:\n  discord:\n    rate_limits:\n      global: {burst: 3}\n", "channels.discord.rate_limits.global.rate", 4, "missing required value"},
		"MissingRequired":          {"tools:\n  - risk: read\n    exec: {command: [x]}\n", "tools[0].name", 2, "missing required value"},
		"EmptyRequired":            {"tools:\n  - name: \"\"\n    risk: read\n    exec: {command: [x]}\n", "tools[0].name", 2, "must not be empty"},
		"EmptyRequiredList":        {"tools:\n  - name: t\n    risk: read\n    exec: {command: []}\n", "tools[0].exec.command", 4, "must not be empty"},
		"InvalidEnum":              {"store:\n  driver: mysql\n", "store.driver", 2, `must be one of sqlite, postgres, not "mysql"`},
		"InvalidRisk":              {"tools:\n  - name: t\n    risk: scary\n    exec: {command: [x]}\n", "tools[0].risk", 3, "must be one of read, reversible, external, high_impact"},
		"InvalidPolicyDefault":     {"policy:\n  default: maybe\n", "policy.default", 2, "must be one of auto, allow, ask, deny"},
		"DuplicateKey":             {"server:\n  listen: a:1\n  listen: b:2\n", "server.listen", 3, "duplicate key (first at line 2)"},
		"UnsetEnv":                 {"store:\n  driver: postgres\n  dsn: ${PG_URL}\n", "store.dsn", 3, "PG_URL is not set"},
		"SyntaxError":              {"server:\n  listen: [\n", "", 2, "YAML syntax"},
		"MultipleDocuments":        {"server: {}\n---\nstore: {}\n", "", 2, "only one YAML document"},
		"BadListen":                {"server:\n  listen: localhost\n", "server.listen", 2, "must be host:port"},
		"TokenLoginOffWithoutOIDC": {"channels:\n  console: {token_login: false}\n", "channels.console.token_login", 2, "nobody can sign in"},
		"OIDCNeedsPublicURL":       {"channels:\n  console:\n    oidc: {issuer: \"https://idp.example.com\", client_id: opsgate}\n", "server.public_url", 0, "<public_url>/auth/callback"},
		"OIDCIssuerPlainHTTP":      {"server: {public_url: \"https://ops.example.com\"}\nchannels:\n  console:\n    oidc: {issuer: \"http://idp.example.com\", client_id: opsgate}\n", "channels.console.oidc.issuer", 4, "use https"},
		"OIDCMissingClientID":      {"server: {public_url: \"https://ops.example.com\"}\nchannels:\n  console:\n    oidc: {issuer: \"https://idp.example.com\"}\n", "channels.console.oidc.client_id", 4, "missing required value"},
		"OIDCMissingIssuer":        {"server: {public_url: \"https://ops.example.com\"}\nchannels:\n  console:\n    oidc: {client_id: opsgate}\n", "channels.console.oidc.issuer", 4, "missing required value"},
		"AuditSinkBadAddr":         {"audit:\n  sinks:\n    - {type: syslog, addr: \"127.0.0.1:514\"}\n", "audit.sinks[0].addr", 3, "udp://host:port"},
		"AuditSinkBadType":         {"audit:\n  sinks:\n    - {type: kafka, url: \"https://x\"}\n", "audit.sinks[0].type", 3, "must be one of syslog, http"},
		"AuditSinkHTTPNoURL":       {"audit:\n  sinks:\n    - {type: http}\n", "audit.sinks[0].url", 3, "absolute http(s) URL"},
		"AuditSinkDuplicateName":   {"audit:\n  sinks:\n    - {type: http, url: \"https://a\"}\n    - {type: http, url: \"https://a\"}\n", "audit.sinks[1].name", 4, "also the name of audit.sinks[0]"},
		"BadPublicURL":             {"server:\n  public_url: ops.example.com\n", "server.public_url", 2, "absolute http(s) URL"},
		"PostgresNeedsDSN":         {"store:\n  driver: postgres\n", "store.dsn", 1, "missing required value for driver postgres"},
		"ConcurrencyZero":          {"engine:\n  concurrency: 0\n", "engine.concurrency", 2, "must be at least 1"},
		"DuplicateTokenName": {"api:\n  tokens:\n    - {name: a, token: x}\n    - {name: a, token: y}\n",
			"api.tokens[1].name", 4, `duplicate token name "a"`},
		"DuplicateTokenValue": {"api:\n  tokens:\n    - {name: a, token: x}\n    - {name: b, token: x}\n",
			"api.tokens[1].token", 4, "same token as api.tokens[0]"},
		"EmptyToken":       {"api:\n  tokens:\n    - {name: a, token: \"${T:-}\"}\n", "api.tokens[0].token", 3, "must not be empty"},
		"BadTokenActor":    {"api:\n  tokens:\n    - {name: a, token: x, actor: admin}\n", "api.tokens[0].actor", 3, "must be an identity"},
		"SlackNeedsSecret": {"channels:\n  slack:\n    enabled: true\n    bot_token: xoxb\n", "channels.slack.signing_secret", 2, "slack mode is http"},
		"SlackSocketNeedsAppToken": {"channels:\n  slack:\n    enabled: true\n    mode: socket\n    bot_token: xoxb\n",
			"channels.slack.app_token", 2, "slack mode is socket"},
		// The case that once passed check and failed serve: the adapter's own
		// Validate now judges it.
		"SlackSocketMalformedAppToken": {"channels:\n  slack:\n    enabled: true\n    mode: socket\n    bot_token: xoxb-1\n    app_token: xoxb-not-an-app-token\n",
			"channels.slack.app_token", 6, "app-level token (xapp-…)"},
		"TelegramMalformedToken": {"channels:\n  telegram: {enabled: true, mode: polling, bot_token: nope}\n", "channels.telegram.bot_token", 2, "@BotFather"},
		"DiscordAppIDNotNumeric": {"channels:\n  discord: {enabled: true, bot_token: x, application_id: abc, public_key: " + strings.Repeat("ab", 32) + "}\n",
			"channels.discord.application_id", 2, "numeric application id"},
		"EmailPlaintextRemote": {"channels:\n  email: {enabled: true, address: a@b.c, token_key: 0123456789abcdef, imap: {addr: \"imap.example.com:143\", username: u}, smtp: {addr: \"smtp.example.com:587\", starttls: true}}\n",
			"channels.email.imap.tls", 2, "plaintext is only allowed to a loopback address"},
		"MatrixBadUserID": {"channels:\n  matrix: {enabled: true, homeserver_url: \"https://m.example.org\", user_id: opsgate, access_token: t, rooms: [\"!a:m.example.org\"]}\n",
			"channels.matrix.user_id", 2, "@opsgate:example.org"},
		"MatrixNoRooms": {"channels:\n  matrix: {enabled: true, homeserver_url: \"https://m.example.org\", user_id: \"@o:m.example.org\", access_token: t}\n",
			"channels.matrix.rooms", 2, "direct_messages"},
		"MatrixBadRoom": {"channels:\n  matrix:\n    enabled: true\n    homeserver_url: \"https://m.example.org\"\n    user_id: \"@o:m.example.org\"\n    access_token: t\n    rooms: [ops]\n",
			"channels.matrix.rooms[0]", 7, "room id"},
		"SignalBadAccount": {"channels:\n  signal: {enabled: true, daemon_url: \"http://127.0.0.1:8085\", account: \"5550009999\"}\n",
			"channels.signal.account", 2, "E.164"},
		"SignalNoDaemon":        {"channels:\n  signal: {enabled: true, account: \"+15550009999\"}\n", "channels.signal.daemon_url", 2, "signal is enabled"},
		"MatrixIdentity":        {"approvers:\n  groups:\n    sre: [\"matrix:ops-lead\"]\n", "approvers.groups.sre[0]", 3, "matrix:@ops-lead:example.org"},
		"SignalIdentity":        {"approvers:\n  groups:\n    sre: [\"signal:5551234567\"]\n", "approvers.groups.sre[0]", 3, "signal:+15551234567"},
		"MatrixRequesters":      {"channels:\n  matrix:\n    requesters: [\"matrix:bob\"]\n", "channels.matrix.requesters[0]", 3, "matrix:<user id>"},
		"WebhookEmptySecret":    {"channels:\n  webhooks:\n    - {name: a, secret: \"${S:-}\"}\n", "channels.webhooks[0].secret", 3, "must not be empty"},
		"TelegramWebhookSecret": {"channels:\n  telegram: {enabled: true, bot_token: x}\n", "channels.telegram.webhook_secret", 2, "telegram mode is webhook"},
		"DiscordPublicKeyHex":   {"channels:\n  discord: {public_key: xyz}\n", "channels.discord.public_key", 2, "64 hex characters"},
		"DiscordNeedsAppID": {"channels:\n  discord: {enabled: true, bot_token: x, public_key: " + strings.Repeat("ab", 32) + "}\n",
			"channels.discord.application_id", 2, "discord is enabled"},
		"EmailNeedsIMAP":      {"channels:\n  email: {enabled: true, address: a@b.c, smtp: {addr: \"h:25\"}}\n", "channels.email.imap.addr", 2, "email is enabled"},
		"EmailDMARC":          {"channels:\n  email:\n    require_dmarc: true\n", "channels.email.authserv_id", 2, "require_dmarc is true"},
		"EmailBadAddr":        {"channels:\n  email:\n    smtp: {addr: smtp.example.com}\n", "channels.email.smtp.addr", 3, "must be host:port"},
		"NegativeAttempts":    {"channels:\n  slack:\n    max_attempts: -1\n", "channels.slack.max_attempts", 3, "must not be negative"},
		"DuplicateWebhook":    {"channels:\n  webhooks:\n    - {name: a, secret: s}\n    - {name: a, secret: t}\n", "channels.webhooks[1].name", 4, "duplicate webhook name"},
		"WebhookNameSafe":     {"channels:\n  webhooks:\n    - {name: a/b, secret: s}\n", "channels.webhooks[0].name", 3, "URL path segment"},
		"BadIdentity":         {"approvers:\n  groups:\n    sre: [alice]\n", "approvers.groups.sre[0]", 3, "must be an identity"},
		"DuplicateTool":       {validTools + "  - name: t\n    risk: read\n    exec: {command: [x]}\n", "tools[1].name", 5, `duplicate tool name "t"`},
		"ToolNeedsExecOrHTTP": {"tools:\n  - name: t\n    risk: read\n", "tools[0]", 2, "needs exactly one of exec or http"},
		"ToolBothExecAndHTTP": {"tools:\n  - name: t\n    risk: read\n    exec: {command: [x]}\n    http: {url: \"http://x\"}\n", "tools[0]", 2, "has both exec and http"},
		"BadToolName":         {"tools:\n  - name: \"a b\"\n    risk: read\n    exec: {command: [x]}\n", "tools[0].name", 2, "letters, digits"},
		"BadTemplate":         {"tools:\n  - name: t\n    risk: read\n    exec: {command: [x, \"{{.a\"]}\n", "tools[0].exec.command[1]", 4, "invalid template"},
		"HTTPURLScheme":       {"tools:\n  - name: t\n    risk: read\n    http: {url: \"ftp://x\"}\n", "tools[0].http.url", 4, "must start with http"},
		"HTTPBadMethod":       {"tools:\n  - name: t\n    risk: read\n    http: {url: \"http://x\", method: FETCH}\n", "tools[0].http.method", 4, "must be one of GET"},
		"SchemaNotObject":     {validTools + "    input_schema: {type: string}\n", "tools[0].input_schema", 5, "type: object"},
		"SchemaInvalid":       {validTools + "    input_schema: {type: object, properties: {a: {type: 12}}}\n", "tools[0].input_schema", 5, "invalid JSON Schema"},
		"SchemaBadPattern":    {validTools + "    input_schema: {type: object, properties: {a: {type: string, pattern: \"([\"}}}\n", "tools[0].input_schema", 5, "invalid JSON Schema"},
		"SchemaRemoteRef":     {validTools + "    input_schema: {type: object, $ref: \"file:///etc/passwd\"}\n", "tools[0].input_schema", 5, "invalid JSON Schema"},
		"ZeroTimeout":         {validTools + "    dry_run_timeout: 0s\n", "tools[0].dry_run_timeout", 5, "must be greater than 0"},
		"FlowUnknownTool":     {validTools + "flows:\n  - name: f\n    command: go\n    steps: [{tool: tt}]\n", "flows[0].steps[0].tool", 8, `no tool named "tt" (did you mean "t"?)`},
		"FlowBadPattern":      {validTools + "flows:\n  - name: f\n    command: \"go {a=1} {b}\"\n    steps: [{tool: t}]\n", "flows[0].command", 7, "required placeholder {b} after an optional"},
		"FlowDuplicate": {validTools + "flows:\n  - {name: f, command: a, steps: [{tool: t}]}\n  - {name: f, command: b, steps: [{tool: t}]}\n",
			"flows[1].name", 7, `duplicate flow name "f"`},
		"FlowSameCommand": {validTools + "flows:\n  - {name: f, command: \"a {x}\", steps: [{tool: t}]}\n  - {name: g, command: \"a  {x}\", steps: [{tool: t}]}\n",
			"flows[1].command", 7, "same command as flows[0]"},
		"FlowNeedsSteps":     {"flows:\n  - {name: f, command: a}\n", "flows[0].steps", 2, "missing required value"},
		"FlowUnknownArg":     {validTools + "flows:\n  - name: f\n    command: go {svc}\n    steps: [{tool: t, args: {s: \"{{.service}}\"}}]\n", "flows[0].steps[0].args.s", 8, "no {service}"},
		"RuleBadAction":      {validTools + "policy:\n  rules:\n    - {match: {tool: t}, action: maybe}\n", "policy.rules[0].action", 7, "must be one of allow, ask, deny"},
		"RuleMissingAction":  {validTools + "policy:\n  rules:\n    - {match: {tool: t}}\n", "policy.rules[0].action", 7, "missing required value"},
		"RuleUnknownGroup":   {validTools + "policy:\n  rules:\n    - {match: {tool: t}, action: ask, approvers: [\"group:sre\"]}\n", "policy.rules[0].approvers[0]", 7, `unknown approver group "sre"`},
		"RuleBadApprover":    {validTools + "policy:\n  rules:\n    - {match: {tool: t}, action: ask, approvers: [bob]}\n", "policy.rules[0].approvers[0]", 7, "must be group:<name>"},
		"RuleQuorumZero":     {validTools + "policy:\n  rules:\n    - {match: {tool: t}, action: ask, approvers: [\"slack:U1\"], quorum: 0}\n", "policy.rules[0].quorum", 7, "must be at least 1"},
		"RuleQuorumTooLarge": {validTools + "policy:\n  rules:\n    - {match: {tool: t}, action: ask, approvers: [\"slack:U1\"], quorum: 2}\n", "policy.rules[0].quorum", 7, "exceeds the 1 eligible"},
		"RuleWhenUndeclared": {validTools + "policy:\n  rules:\n    - {match: {tool: t}, action: ask, when: 'envv == \"prod\"'}\n",
			"policy.rules[0].when", 7, "CEL at 1:1 of the expression: undeclared reference to 'envv'"},
		"RuleWhenUnknownField": {validTools + "policy:\n  rules:\n    - match: {tool: t}\n      action: ask\n      when: 'tool == \"t\" && requester.persn == \"a\"'\n",
			"policy.rules[0].when", 9, "at 1:25 of the expression: undefined field 'persn'"},
		"RuleWhenNotBool": {validTools + "policy:\n  rules:\n    - {match: {tool: t}, action: deny, when: 'args'}\n",
			"policy.rules[0].when", 7, "must give a bool"},
		"RuleQuorumExprNotInt": {validTools + "policy:\n  rules:\n    - {match: {tool: t}, action: ask, quorum: 'tool'}\n",
			"policy.rules[0].quorum", 7, "must give an integer"},
		"RuleQuorumExprOnAllow": {validTools + "policy:\n  rules:\n    - {match: {tool: t}, action: allow, quorum: 'args.n'}\n",
			"policy.rules[0].quorum", 7, "only applies to action ask"},
		"RuleUnknownTool":      {validTools + "policy:\n  rules:\n    - {match: {tool: nope}, action: deny}\n", "policy.rules[0].match.tool", 7, `no tool named "nope"`},
		"RuleBadGlob":          {validTools + "policy:\n  rules:\n    - {match: {tool: \"[\"}, action: deny}\n", "policy.rules[0].match.tool", 7, "invalid glob"},
		"RuleApproversOnAllow": {validTools + "policy:\n  rules:\n    - {match: {tool: t}, action: allow, approvers: [\"slack:U1\"]}\n", "policy.rules[0].approvers", 7, "only apply to action ask"},
		"FlowDashArgToExec": {"tools:\n  - name: t\n    risk: read\n    exec: {command: [echo, \"{{.f}}\"]}\nflows:\n  - name: f\n    command: go\n    steps: [{tool: t, args: {f: \"--force\"}}]\n",
			"flows[0].steps[0].args.f", 8, "exec.allow_dash_args"},
		"MergeKeyNeedsMapping": {"server:\n  <<: 5\n", "server", 2, "merge key"},
		"NonStringKey":         {"server:\n  [a]: 1\n", "server", 2, "keys must be strings"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wantProblem(t, tc.src, tc.path, tc.line, tc.msg)
		})
	}
}

// TestDashArgsOptIn: a literal option passed to a tool that opts in, or
// written into exec.command, is no problem.
func TestDashArgsOptIn(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"OptedIn":       "tools:\n  - name: t\n    risk: read\n    exec: {command: [echo, \"{{.f}}\"], allow_dash_args: true}\nflows:\n  - name: f\n    command: go\n    steps: [{tool: t, args: {f: \"--force\"}}]\n",
		"InTheCommand":  "tools:\n  - name: t\n    risk: read\n    exec: {command: [echo, \"--mode={{.f}}\"]}\nflows:\n  - name: f\n    command: go\n    steps: [{tool: t, args: {f: \"-x\"}}]\n",
		"FromTemplates": "tools:\n  - name: t\n    risk: read\n    exec: {command: [echo, \"{{.f}}\"]}\nflows:\n  - name: f\n    command: go {v}\n    steps: [{tool: t, args: {f: \"{{.v}}\"}}]\n",
	} {
		if _, err := (Loader{LookupEnv: envOf(nil)}).Parse("test.yaml", []byte(src)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestEveryProblemReportedAtOnce(t *testing.T) {
	t.Parallel()
	src := `server:
  listn: 127.0.0.1:8080
store:
  driver: postgres
tools:
  - name: deploy
    risk: high_impact
    exec:
      command: [./deploy.sh]
      timeout: soon
  - name: deploy
    risk: read
flows:
  - name: d
    command: "deploy {service}"
    steps:
      - tool: deplyo
policy:
  rules:
    - match: {tool: deploy}
      action: ask
      approvers: ["group:sre"]
approvals:
  ttl: ${TTL}
`
	_, err := Loader{LookupEnv: envOf(nil)}.Parse("ops.yaml", []byte(src))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v", err)
	}
	want := []Problem{
		{Path: "server.listn", Line: 2, Message: `unknown key (did you mean "listen"?)`},
		{Path: "tools[0].exec.timeout", Line: 10, Message: `invalid duration "soon" (want e.g. 30s, 10m, 1h)`},
		{Path: "approvals.ttl", Line: 24, Message: "environment variable TTL is not set (use ${TTL:-default} for an optional value)"},
		{Path: "store.dsn", Line: 3, Message: "missing required value for driver postgres"},
		{Path: "tools[1].name", Line: 11, Message: `duplicate tool name "deploy" (also tools[0])`},
		{Path: "tools[1]", Line: 11, Message: "needs exactly one of exec or http"},
		{Path: "flows[0].steps[0].tool", Line: 17, Message: `no tool named "deplyo" (did you mean "deploy"?)`},
		{Path: "policy.rules[0].approvers[0]", Line: 22, Message: `unknown approver group "sre" (define it under approvers.groups)`},
	}
	got := map[string]Problem{}
	for _, p := range ce.Problems {
		got[p.Path+"|"+p.Message] = p
	}
	for _, w := range want {
		g, ok := got[w.Path+"|"+w.Message]
		if !ok {
			t.Errorf("missing problem %+v", w)
			continue
		}
		if g.Line != w.Line {
			t.Errorf("%s: line %d, want %d", w.Path, g.Line, w.Line)
		}
	}
	if len(ce.Problems) != len(want) {
		t.Errorf("got %d problems, want %d:\n%v", len(ce.Problems), len(want), err)
	}
	first := strings.SplitN(err.Error(), "\n", 2)[0]
	if first != `ops.yaml:2: server.listn: unknown key (did you mean "listen"?)` {
		t.Errorf("first line of Error() = %q", first)
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != len(ce.Problems) {
		t.Errorf("Error() has %d lines for %d problems", n, len(ce.Problems))
	}
}

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	e := &Error{File: "f.yaml", Problems: []Problem{{Path: "a.b", Line: 3, Message: "bad"}, {Message: "no position"}}}
	if got, want := e.Error(), "f.yaml:3: a.b: bad\nf.yaml: no position"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestEnvExpansionInParse(t *testing.T) {
	t.Parallel()
	src := `server:
  listen: "${HOST:-127.0.0.1}:${PORT}"
channels:
  console: {enabled: "${CONSOLE}"}
engine:
  concurrency: ${WORKERS}
tools:
  - name: t
    risk: read
    input_schema: {type: object, properties: {a: {type: string, pattern: "^[a-z]+$"}}}
    exec: {command: [x, "${BIN_ARG}", "{{.a}}"], env: {TOKEN: "${SECRET}"}}
`
	cfg, err := Loader{LookupEnv: envOf(map[string]string{"PORT": "9090", "CONSOLE": "true", "WORKERS": "4", "BIN_ARG": "--v", "SECRET": "s3"})}.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.Listen != "127.0.0.1:9090" || !cfg.Channels.Console.Enabled || cfg.Engine.Concurrency != 4 {
		t.Errorf("expanded config = %+v %+v %+v", cfg.Server, cfg.Channels.Console, cfg.Engine)
	}
	tool := cfg.Tool("t")
	if tool.Exec.Command[1] != "--v" || tool.Exec.Env["TOKEN"] != "s3" {
		t.Errorf("exec = %+v", tool.Exec)
	}
	props := tool.InputSchema["properties"].(map[string]any)
	if got := props["a"].(map[string]any)["pattern"]; got != "^[a-z]+$" {
		t.Errorf("pattern mangled by expansion: %q", got)
	}
	if err := tool.Schema().Validate(map[string]any{"a": "abc"}); err != nil {
		t.Errorf("valid args rejected: %v", err)
	}
	if err := tool.Schema().Validate(map[string]any{"a": "ABC"}); err == nil {
		t.Error("invalid args accepted")
	}
}

func TestDefaultsApplied(t *testing.T) {
	t.Parallel()
	cfg, err := Loader{LookupEnv: envOf(nil)}.Parse("d.yaml", []byte(validTools+`    http: null
  - name: h
    risk: external
    http: {url: "https://x/{{.a}}"}
api:
  tokens: [{name: ci, token: abc}]
policy:
  rules: [{match: {tool: h}, action: ask, approvers: ["slack:U1"]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen", cfg.Server.Listen, DefaultListen},
		{"data_dir", cfg.Server.DataDir, DefaultDataDir},
		{"driver", cfg.Store.Driver, "sqlite"},
		{"dsn", cfg.Store.DSN, "data/opsgate.db"},
		{"concurrency", cfg.Engine.Concurrency, 16},
		{"lease", cfg.Engine.Lease.D(), 30 * time.Second},
		{"poll", cfg.Engine.PollInterval.D(), time.Second},
		{"actor", cfg.API.Tokens[0].Actor, "api:ci"},
		{"slack mode", cfg.Channels.Slack.Mode, "http"},
		{"telegram mode", cfg.Channels.Telegram.Mode, "webhook"},
		{"mailbox", cfg.Channels.Email.IMAP.Mailbox, "INBOX"},
		{"max_output", cfg.Tools[0].MaxOutput, ByteSize(64 << 10)},
		{"exec timeout", cfg.Tools[0].Exec.Timeout.D(), time.Minute},
		{"dry run timeout", cfg.Tools[0].DryRunTimeout.D(), 30 * time.Second},
		{"schema", fmt.Sprint(cfg.Tools[0].InputSchema), "map[type:object]"},
		{"method", cfg.Tools[1].HTTP.Method, "GET"},
		{"http timeout", cfg.Tools[1].HTTP.Timeout.D(), time.Minute},
		{"policy default", cfg.Policy.Default, "auto"},
		{"quorum", cfg.Policy.Rules[0].Quorum.N, 1},
		{"ttl", cfg.Approvals.TTL.D(), time.Hour},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if cfg.Tools[0].Schema() == nil {
		t.Error("default schema not compiled")
	}
}

func TestEmptyAndCommentOnlyDocuments(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"", "# nothing\n", "---\n"} {
		cfg, err := Loader{LookupEnv: envOf(nil)}.Parse("e.yaml", []byte(src))
		if err != nil {
			t.Errorf("Parse(%q): %v", src, err)
			continue
		}
		if cfg.Server.Listen != DefaultListen {
			t.Errorf("Parse(%q): defaults not applied", src)
		}
	}
}

func TestAnchorsAndMergeKeys(t *testing.T) {
	t.Parallel()
	src := `x-common: &common
  risk: read
  exec: {command: [echo]}
`
	// Unknown top-level keys are reported even when used only as anchors.
	if p := parseProblems(t, src+"tools: []\n"); len(p) != 1 || p[0].Path != "x-common" {
		t.Fatalf("problems = %+v", p)
	}
	cfg, err := Loader{LookupEnv: envOf(nil)}.Parse("a.yaml", []byte(`tools:
  - &base
    name: a
    risk: read
    exec: {command: [echo]}
  - <<: *base
    name: b
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tools[1].Name != "b" || cfg.Tools[1].Risk != "read" || cfg.Tools[1].Exec.Command[0] != "echo" {
		t.Errorf("merged tool = %+v", cfg.Tools[1])
	}
}

func TestAliasBombIsBounded(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	b.WriteString("tools:\n  - name: t\n    risk: read\n    exec: {command: [x]}\n    input_schema: {type: object, x: *a8}\n")
	problems := parseProblems(t, b.String())
	found := false
	for _, p := range problems {
		found = found || strings.Contains(p.Message, "too large")
	}
	if !found {
		t.Fatalf("alias bomb not reported: %d problems", len(problems))
	}
}

func TestPolicyDefaultApprovers(t *testing.T) {
	t.Parallel()
	src := `
approvers:
  groups:
    sre: ["console:admin"]
policy:
  default_approvers: ["group:sre", "group:nope", "not an id"]
`
	_, err := Parse("p.yaml", []byte(src))
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("want *Error, got %v", err)
	}
	got := map[string]bool{}
	for _, p := range cerr.Problems {
		got[p.Path] = true
	}
	for _, want := range []string{"policy.default_approvers[1]", "policy.default_approvers[2]"} {
		if !got[want] {
			t.Errorf("missing problem at %s in %v", want, cerr.Problems)
		}
	}
	if got["policy.default_approvers[0]"] {
		t.Errorf("a known group must be accepted")
	}
}

func TestEmailIdentitiesAreLowercased(t *testing.T) {
	t.Parallel()
	src := `
approvers:
  groups:
    sre: ["email:Alice@Example.COM", "slack:U0ABC"]
api:
  tokens:
    - {name: bob, token: "t0k3n-long-enough", actor: "email:Bob@Example.com"}
policy:
  default_approvers: ["email:Carol@EXAMPLE.com"]
`
	cfg, err := Parse("ids.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Approvers.Groups["sre"]; got[0] != "email:alice@example.com" || got[1] != "slack:U0ABC" {
		t.Errorf("group = %v: email identities lowercased, others untouched", got)
	}
	if got := cfg.API.Tokens[0].Actor; got != "email:bob@example.com" {
		t.Errorf("token actor = %q", got)
	}
	if got := cfg.Policy.DefaultApprovers[0]; got != "email:carol@example.com" {
		t.Errorf("default approver = %q", got)
	}
}

func TestTelegramWebhookNeedsHTTPSPublicURL(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ publicURL, want string }{
		"Missing":  {"", "missing required value"},
		"NotHTTPS": {"http://ops.example.com", "https"},
	} {
		t.Run(name, func(t *testing.T) {
			src := "server: {public_url: \"" + tc.publicURL + "\"}\n" +
				"channels:\n  telegram: {enabled: true, bot_token: \"1:x\", webhook_secret: s3cret}\n"
			_, err := Parse("tg.yaml", []byte(src))
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("want *Error, got %v", err)
			}
			found := false
			for _, p := range cerr.Problems {
				if p.Path == "server.public_url" && strings.Contains(p.Message, tc.want) {
					found = true
				}
			}
			if !found {
				t.Fatalf("no server.public_url problem mentioning %q in %v", tc.want, cerr.Problems)
			}
		})
	}
}
