package config

import (
	"errors"
	"strings"
	"testing"
)

// problemsOf parses src and returns its problems as "path: message".
func problemsOf(t *testing.T, src string) []string {
	t.Helper()
	_, err := Loader{LookupEnv: func(string) (string, bool) { return "", false }}.Parse("test.yaml", []byte(src))
	var ce *Error
	if err == nil {
		return nil
	}
	if !errors.As(err, &ce) {
		t.Fatalf("not a config error: %v", err)
	}
	var out []string
	for _, p := range ce.Problems {
		out = append(out, p.Path+": "+p.Message)
	}
	return out
}

// TestTypoReportsOnlyTheTypo: a mistyped key is one problem, not the
// typo plus what its absence causes ("missing required value", "no tool
// named", "approvers only apply to action ask").
func TestTypoReportsOnlyTheTypo(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ src, want string }{
		"RequiredKey": {"tools:\n  - name: deploy\n    risk: read\n    exec: {comand: [/bin/true]}\n",
			`tools[0].exec.comand: unknown key (did you mean "command"?)`},
		"TopLevelSection": {"tols:\n  - name: deploy\n    risk: read\n    exec: {command: [/bin/true]}\nflows:\n  - name: deploy\n    command: deploy\n    steps:\n      - tool: deploy\n",
			`tols: unknown key (did you mean "tools"?)`},
		"RuleAction": {"approvers:\n  groups: {sre: [\"console:admin\"]}\npolicy:\n  rules:\n    - {match: {tool: \"*\"}, acton: ask, approvers: [\"group:sre\"]}\n",
			`policy.rules[0].acton: unknown key (did you mean "action"?)`},
		"GroupsSection": {"approvers:\n  grups: {sre: [\"console:admin\"]}\npolicy:\n  rules:\n    - {match: {tool: \"*\"}, action: ask, approvers: [\"group:sre\"]}\n",
			`approvers.grups: unknown key (did you mean "groups"?)`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := problemsOf(t, tc.src)
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("problems:\n  %s\nwant only:\n  %s", strings.Join(got, "\n  "), tc.want)
			}
		})
	}
	// A real problem beside the typo is still reported.
	got := problemsOf(t, "tols: []\npolicy:\n  rules:\n    - {match: {tool: \"*\"}, action: ask, approvers: [\"group:nobody\"]}\n")
	if len(got) != 2 || !strings.Contains(got[1], `unknown approver group "nobody"`) {
		t.Fatalf("problems %q", got)
	}
}

func TestWarnings(t *testing.T) {
	t.Parallel()
	parse := func(src string) *Config {
		t.Helper()
		cfg, err := Loader{LookupEnv: func(string) (string, bool) { return "", false }}.Parse("test.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	for name, src := range map[string]string{"Empty": "", "OnlyComments": "# nothing yet\n"} {
		if w := parse(src).Warnings(); len(w) != 1 || !strings.Contains(w[0].Message, "the file sets nothing") {
			t.Errorf("%s: warnings %+v", name, w)
		}
	}
	w := parse("api:\n  tokens:\n    - {name: a, token: short-token, actor: \"console:a\"}\n    - {name: b, token: " +
		strings.Repeat("x", MinTokenLen) + ", actor: \"console:b\"}\n").Warnings()
	if len(w) != 1 || w[0].Path != "api.tokens[0].token" || w[0].Line != 3 || !strings.Contains(w[0].Message, "only 11 characters") ||
		strings.Contains(w[0].Message, "short-token") {
		t.Fatalf("token warnings %+v", w)
	}
	if w := parse("server:\n  listen: 127.0.0.1:9090\n").Warnings(); len(w) != 0 {
		t.Fatalf("warnings for a plain file: %+v", w)
	}
	q, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Warnings()) != 0 {
		t.Fatalf("the quickstart warns: %+v", q.Warnings())
	}
}
