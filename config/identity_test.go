package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestIdentityProblem(t *testing.T) {
	t.Parallel()
	good := []string{"console:admin", "slack:U012AB3CD", "telegram:123456", "discord:80351110224678912",
		"email:alice@example.com", "email:a.b+ops@mail.example.co.uk", "webhook:alertmanager", "api:ci", "mcp:agent"}
	for _, id := range good {
		if msg := identityProblem(id); msg != "" {
			t.Errorf("identityProblem(%q) = %q, want accepted", id, msg)
		}
	}
	bad := map[string]string{
		"consol:admin":            `did you mean "console"?`,
		"slak:U1":                 `did you mean "slack"?`,
		"irc:bob":                 "known: agent, api, console",
		"admin":                   "must be an identity like",
		":U1":                     "must be an identity like",
		"slack:":                  "no spaces",
		"slack:U1 U2":             "no spaces",
		"email:not-an-address":    "must be email:<address>",
		"email:alice@":            "must be email:<address>",
		"email:@example.com":      "must be email:<address>",
		"email:alice@localhost.":  "must be email:<address>",
		"email:<a@b.com>":         "must be email:<address>",
		"email:alice@example":     "must be email:<address>",
		"email:a@b.com,c@d.com":   "must be email:<address>",
		"email:alice@.example.io": "must be email:<address>",
	}
	for id, want := range bad {
		if msg := identityProblem(id); !strings.Contains(msg, want) {
			t.Errorf("identityProblem(%q) = %q, want it to contain %q", id, msg, want)
		}
	}
}

// TestIdentitiesCheckedEverywhere checks every place config names an
// identity reports a misspelt channel prefix at its own path and line.
func TestIdentitiesCheckedEverywhere(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		src, path string
		line      int
	}{
		"Group":           {"approvers:\n  groups:\n    sre: [\"slack:U1\", \"consol:admin\"]\n", "approvers.groups.sre[1]", 3},
		"DefaultApprover": {"policy:\n  default_approvers: [\"slak:U1\"]\n", "policy.default_approvers[0]", 2},
		"RuleApprover":    {validTools + "policy:\n  rules:\n    - {match: {tool: t}, action: ask, approvers: [\"consol:admin\"]}\n", "policy.rules[0].approvers[0]", 7},
		"TokenActor":      {"api:\n  tokens:\n    - {name: a, token: x, actor: \"consol:admin\"}\n", "api.tokens[0].actor", 3},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wantProblem(t, tc.src, tc.path, tc.line, "unknown channel")
		})
	}
	t.Run("EmailInGroup", func(t *testing.T) {
		t.Parallel()
		wantProblem(t, "approvers:\n  groups:\n    sre:\n      - email:not-an-address\n", "approvers.groups.sre[0]", 4, "must be email:<address>")
	})
	t.Run("ValidAccepted", func(t *testing.T) {
		t.Parallel()
		src := fmt.Sprintf("approvers:\n  groups:\n    sre: [%s]\n", `"console:admin", "slack:U1", "email:Bob@Example.com", "telegram:42"`)
		cfg := parseOK(t, src)
		if got := cfg.Approvers.Groups["sre"][2]; got != "email:bob@example.com" {
			t.Errorf("email identity = %q, want lowercased", got)
		}
	})
}
