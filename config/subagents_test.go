package config

import (
	"slices"
	"strings"
	"testing"
)

const subagentModels = `models:
  - {name: default, provider: openai, base_url: "http://127.0.0.1:8000/v1", model: m}
`

func TestSubagentReferencesAccepted(t *testing.T) {
	t.Parallel()
	src := validTools + subagentModels + `agents:
  - {name: ops, model: default, tools: [t, "agent:reviewer", "agent:checker"], default: true}
  - {name: reviewer, model: default, description: Reviews a change, tools: ["agent:checker"]}
  - {name: checker, model: default, tools: [t]}
`
	cfg, err := Loader{LookupEnv: envOf(nil)}.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Agent("reviewer"); r.Description != "Reviews a change" || !cfg.Agent("ops").Allows("agent:reviewer") {
		t.Errorf("reviewer = %+v", r)
	}
	// A glob is never a delegation.
	if cfg.Agent("reviewer").Allows("agent:ops") {
		t.Error("reviewer may delegate to an agent it does not name")
	}
}

func TestSubagentReferencesRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, agents string
		want         []string
	}{
		{"Unknown", `  - {name: ops, model: default, tools: ["agent:reviewr"]}
  - {name: reviewer, model: default}
`, []string{`agents[0].tools[0]: no agent named "reviewr" (did you mean "reviewer"?)`}},
		{"NoName", `  - {name: ops, model: default, tools: ["agent:"]}
`, []string{`agents[0].tools[0]: "agent:" names no agent: write agent:<name> with a configured agent's name`}},
		{"Glob", `  - {name: ops, model: default, tools: ["agent:*"]}
`, []string{`agents[0].tools[0]: "agent:*": sub-agents are named one by one, never matched by a glob`}},
		{"Self", `  - {name: ops, model: default, tools: [t, "agent:ops"]}
`, []string{`agents[0].tools[1]: agent:ops makes a cycle of sub-agents (ops → ops); an agent may not reach itself through its sub-agents`}},
		{"Cycle", `  - {name: ops, model: default, tools: ["agent:a"]}
  - {name: a, model: default, tools: ["agent:b"]}
  - {name: b, model: default, tools: [t, "agent:ops"]}
`, []string{`agents[2].tools[1]: agent:ops makes a cycle of sub-agents (ops → a → b → ops); an agent may not reach itself through its sub-agents`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := problemsOf(t, validTools+subagentModels+"agents:\n"+tc.agents)
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("missing problem %q; got:\n%s", w, strings.Join(got, "\n"))
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("got %d problems, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
		})
	}
}
