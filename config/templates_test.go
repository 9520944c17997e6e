package config

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core/tools"
)

// parseOK parses src and fails the test with every problem if it is refused.
func parseOK(t *testing.T, src string) *Config {
	t.Helper()
	cfg, err := Loader{LookupEnv: envOf(nil)}.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse refused a valid config: %v\n%s", err, src)
	}
	return cfg
}

// wantProblem fails unless src yields a problem at path and line whose
// message contains msg.
func wantProblem(t *testing.T, src, path string, line int, msg string) {
	t.Helper()
	problems := parseProblems(t, src)
	for _, p := range problems {
		if p.Path == path && strings.Contains(p.Message, msg) {
			if p.Line != line {
				t.Errorf("problem %q at line %d, want line %d", p.Message, p.Line, line)
			}
			return
		}
	}
	t.Fatalf("no problem at %q containing %q; got %+v", path, msg, problems)
}

// TestToolTemplatesUseRunnerFuncs checks that config check parses tool
// templates with the runner's functions: what it accepts, the runner's own
// Validate accepts too, and an unknown function is refused in both.
func TestToolTemplatesUseRunnerFuncs(t *testing.T) {
	t.Parallel()
	for name, tmpl := range map[string]string{
		"JSON":  `{"m":{{json .b}}}`,
		"Raw":   `{{raw .b}}`,
		"Query": `q={{query .b}}`,
		"Pipe":  `{{.b | json}}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src := fmt.Sprintf("tools:\n  - name: h\n    risk: read\n    http: {url: %q, method: POST, body: %q, headers: {X-A: %q}}\n"+
				"  - name: e\n    risk: read\n    exec: {command: [echo, %q], dry_run: [echo, %q]}\n",
				"https://x.example/"+tmpl, tmpl, tmpl, tmpl, tmpl)
			cfg := parseOK(t, src)
			h := cfg.Tool("h").HTTP
			if err := (&tools.HTTP{URL: h.URL, Method: h.Method, Headers: h.Headers, Body: h.Body, Timeout: time.Second}).Validate(); err != nil {
				t.Errorf("runner refuses what config check accepted: %v", err)
			}
			if err := (&tools.Exec{Command: cfg.Tool("e").Exec.Command}).Validate(); err != nil {
				t.Errorf("exec runner refuses what config check accepted: %v", err)
			}
		})
	}
	unknown := `{{shout .b}}`
	if err := (&tools.HTTP{URL: "https://x.example/", Body: unknown}).Validate(); err == nil {
		t.Fatal("runner accepts an unknown function; this test's premise is wrong")
	}
	cases := map[string]struct{ src, path string }{
		"HTTPBody":   {"    http: {url: \"https://x\", body: \"" + unknown + "\"}\n", "tools[0].http.body"},
		"HTTPURL":    {"    http: {url: \"https://x/" + unknown + "\"}\n", "tools[0].http.url"},
		"HTTPHeader": {"    http: {url: \"https://x\", headers: {X-A: \"" + unknown + "\"}}\n", "tools[0].http.headers.X-A"},
		"ExecArg":    {"    exec: {command: [echo, \"" + unknown + "\"]}\n", "tools[0].exec.command[1]"},
		"DryRunArg":  {"    exec: {command: [echo], dry_run: [echo, \"" + unknown + "\"]}\n", "tools[0].exec.dry_run[1]"},
	}
	for name, tc := range cases {
		t.Run("Refuses"+name, func(t *testing.T) {
			t.Parallel()
			wantProblem(t, "tools:\n  - name: t\n    risk: read\n"+tc.src, tc.path, 4, `function "shout" not defined`)
		})
	}
}

// TestFlowArgsHaveNoToolFuncs checks that flow step args, which the engine
// renders without the tool functions, do not get them in config check.
func TestFlowArgsHaveNoToolFuncs(t *testing.T) {
	t.Parallel()
	src := validTools + "flows:\n  - name: f\n    command: go {svc}\n    steps: [{tool: t, args: {s: \"{{json .svc}}\"}}]\n"
	wantProblem(t, src, "flows[0].steps[0].args.s", 8, `function "json" not defined`)
}

// TestExecEnvIsLiteral checks that a template in exec.env, which the runner
// would pass through unrendered, is refused instead of silently misleading.
func TestExecEnvIsLiteral(t *testing.T) {
	t.Parallel()
	src := "tools:\n  - name: t\n    risk: read\n    exec:\n      command: [echo]\n      env: {SVC: \"{{.svc}}\"}\n"
	wantProblem(t, src, "tools[0].exec.env.SVC", 6, "passed literally")
	parseOK(t, "tools:\n  - name: t\n    risk: read\n    exec:\n      command: [echo]\n      env: {KUBECONFIG: /etc/k}\n")
}

// TestWebhookTemplates checks channels.webhooks[].text and .thread the way
// adapters/webhook parses them (the builtins plus quote and verbatim), so serve never
// refuses what config check passed.
func TestWebhookTemplates(t *testing.T) {
	t.Parallel()
	hook := func(extra string) string {
		return "channels:\n  webhooks:\n    - name: am\n      secret: s\n" + extra
	}
	cfg := parseOK(t, hook("      text: \"restart {{(index .alerts 0).labels.service}}\"\n      thread: \"{{.groupKey}}\"\n"))
	if w := cfg.Channels.Webhooks[0]; w.Text == "" || w.Thread != "{{.groupKey}}" {
		t.Errorf("webhook = %+v", w)
	}
	wantProblem(t, hook("      text: \"restart {{.alerts\"\n"), "channels.webhooks[0].text", 5, "invalid template")
	wantProblem(t, hook("      thread: \"{{json .groupKey}}\"\n"), "channels.webhooks[0].thread", 5, `function "json" not defined`)
	parseOK(t, hook("      text: \"restart {{quote (index .alerts 0).labels.service}}\"\n      thread: \"{{quote .groupKey}}\"\n"))
	parseOK(t, hook("      text: \"{{verbatim .text}}\"\n"))
}
