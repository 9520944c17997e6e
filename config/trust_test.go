package config

import (
	"path/filepath"
	"testing"
	"time"
)

// The trust model's configuration: people, scopes, requesters, grants,
// the audit key, and email authentication by default.

func TestTrustProblems(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		src, path, msg string
	}{
		"UnknownScope": {"api:\n  tokens:\n    - {name: ci, token: t, scopes: [read, deploy]}\n",
			"api.tokens[0].scopes[1]", `unknown scope "deploy"`},
		"ScopeTypo": {"api:\n  tokens:\n    - {name: ci, token: t, scopes: [reed]}\n",
			"api.tokens[0].scopes[0]", `did you mean "read"?`},
		"EmptyScopes": {"api:\n  tokens:\n    - {name: ci, token: t, scopes: []}\n",
			"api.tokens[0].scopes", "at least one scope"},
		"AgentDecides": {"api:\n  tokens:\n    - {name: claude, token: t, actor: \"agent:claude\", scopes: [read, decide]}\n",
			"api.tokens[0].scopes[1]", "never decides"},
		"IdentityOfTwoPersons": {"people:\n  alice: [\"slack:U1\"]\n  bob: [\"slack:U1\"]\n",
			"people.", "an identity belongs to one person"},
		"AgentIsNoPerson": {"people:\n  alice: [\"agent:x\"]\n", "people.alice[0]", "never decide"},
		"AgentIsNoApprover": {"approvers:\n  groups:\n    sre: [\"agent:claude\"]\n",
			"approvers.groups.sre[0]", "never decide"},
		"UnknownPersonInGroup": {"approvers:\n  groups:\n    sre: [\"person:zed\"]\n",
			"approvers.groups.sre[0]", `unknown person "zed"`},
		"NestedGroup": {"approvers:\n  groups:\n    sre: [\"group:ops\"]\n", "approvers.groups.sre[0]", "groups do not nest"},
		"UnknownRequesterGroup": {"channels:\n  telegram:\n    requesters: [\"group:nobody\"]\n",
			"channels.telegram.requesters[0]", `unknown approver group "nobody"`},
		"AnyoneStandsAlone": {"channels:\n  slack:\n    requesters: [anyone, \"slack:U1\"]\n",
			"channels.slack.requesters[0]", "stands alone"},
		"EmptyRequesters":   {"channels:\n  email:\n    requesters: []\n", "channels.email.requesters", "leave it out"},
		"BadRequesterIdent": {"channels:\n  discord:\n    requesters: [\"irc:bob\"]\n", "channels.discord.requesters[0]", "unknown channel"},
		"EmailNeedsAuthservByDefault": {"channels:\n  email:\n    enabled: true\n    address: ops@example.com\n    token_key: 0123456789abcdef\n" +
			"    imap: {addr: \"imap:993\", username: u}\n    smtp: {addr: \"smtp:587\"}\n",
			"channels.email.authserv_id", "require_dmarc defaults to true"},
		"SelfApprovalOnAllow": {validTools + "policy:\n  rules:\n    - {match: {tool: t}, action: allow, allow_self_approval: true}\n",
			"policy.rules[0].allow_self_approval", "only applies to action ask"},
		"QuorumCountsPersons": {"people:\n  alice: [\"slack:U1\", \"console:alice\"]\napprovers:\n  groups:\n    sre: [\"slack:U1\", \"console:alice\"]\n" +
			validTools + "policy:\n  rules:\n    - {match: {tool: t}, action: ask, approvers: [\"group:sre\"], quorum: 2}\n",
			"policy.rules[0].quorum", "exceeds the 1 eligible approvers"},
		"AgentConcurrencyZero": {"api:\n  tokens:\n    - {name: app, token: t, scopes: [session.run], agent_concurrency: 0}\n",
			"api.tokens[0].agent_concurrency", "between 1 and 32"},
		"AgentConcurrencyTooHigh": {"api:\n  tokens:\n    - {name: app, token: t, scopes: [session.run], agent_concurrency: 33}\n",
			"api.tokens[0].agent_concurrency", "got 33"},
		"SessionRunTypo": {"api:\n  tokens:\n    - {name: app, token: t, scopes: [session.runs]}\n",
			"api.tokens[0].scopes[0]", `did you mean "session.run"?`},
		"SessionTTL": {"approvals:\n  session_ttl: 0s\n", "approvals.session_ttl", "greater than 0"},
		"QuestionAnswerers": {"approvals:\n  question_answerers: anyone\n", "approvals.question_answerers",
			`must be "requester_or_approvers" or "requester"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, p := range parseProblems(t, c.src) {
				if (p.Path == c.path || (c.path == "people." && len(p.Path) > 7 && p.Path[:7] == "people.")) && containsStr(p.Message, c.msg) {
					return
				}
			}
			t.Fatalf("no problem at %s containing %q in %+v", c.path, c.msg, parseProblems(t, c.src))
		})
	}
}

func TestTrustDefaults(t *testing.T) {
	t.Parallel()
	src := "server:\n  data_dir: /srv/og\npeople:\n  alice: [\"email:Alice@Example.com\", \"slack:U1\"]\n" +
		"approvers:\n  groups:\n    sre: [\"person:alice\"]\n" +
		"channels:\n  email:\n    enabled: true\n    address: ops@example.com\n    token_key: 0123456789abcdef\n" +
		"    authserv_id: mx.example.com\n    imap: {addr: \"imap:993\", username: u, tls: true}\n    smtp: {addr: \"smtp:587\", starttls: true}\n" +
		"    requesters: [\"person:alice\", \"email:Bob@Example.com\"]\n" +
		"api:\n  tokens:\n    - {name: claude, token: t, actor: \"agent:claude\", scopes: [read, request, session.run]}\n"
	cfg, err := Loader{LookupEnv: envOf(nil)}.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Channels.Email.RequireDMARC {
		t.Error("require_dmarc does not default to true")
	}
	if got := cfg.API.Tokens[0].AgentConcurrency; got != DefaultAgentConcurrency {
		t.Errorf("agent_concurrency = %d, want the default %d", got, DefaultAgentConcurrency)
	}
	if cfg.Approvals.SessionTTL.D() != time.Hour {
		t.Errorf("session_ttl = %s", cfg.Approvals.SessionTTL.D())
	}
	if cfg.Approvals.QuestionAnswerers != QuestionAnswerersRequesterOrApprovers {
		t.Errorf("question_answerers = %q, want the default %q", cfg.Approvals.QuestionAnswerers, QuestionAnswerersRequesterOrApprovers)
	}
	if want := filepath.Join("/srv/og", "audit.key"); cfg.Audit.KeyFile != want {
		t.Errorf("audit.key_file = %q, want %q", cfg.Audit.KeyFile, want)
	}
	if cfg.People["alice"][0] != "email:alice@example.com" || cfg.Channels.Email.Requesters[1] != "email:bob@example.com" {
		t.Errorf("email identities not lowercased: %v %v", cfg.People, cfg.Channels.Email.Requesters)
	}
	// Explicitly off, it needs no authserv_id.
	off := "channels:\n  email:\n    enabled: true\n    address: ops@example.com\n    token_key: 0123456789abcdef\n" +
		"    require_dmarc: false\n    imap: {addr: \"imap:993\", username: u, tls: true}\n    smtp: {addr: \"smtp:587\", starttls: true}\n"
	if cfg, err := (Loader{LookupEnv: envOf(nil)}).Parse("t.yaml", []byte(off)); err != nil || cfg.Channels.Email.RequireDMARC {
		t.Errorf("require_dmarc: false: %v, %v", err, cfg)
	}
}
