package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAgentTaskProblems(t *testing.T) {
	t.Parallel()
	flow := func(step string) string {
		return validTools + "flows:\n  - name: f\n    command: \"f {svc}\"\n    steps:\n" + step
	}
	cases := map[string]struct{ step, path, msg string }{
		"NeitherToolNorTask": {"      - args: {a: 1}\n", "flows[0].steps[0].tool", "needs tool or agent_task"},
		"Both":               {"      - tool: t\n        agent_task: {instructions: x}\n", "flows[0].steps[0]", "not both"},
		"ArgsOnTask":         {"      - agent_task: {instructions: x}\n        args: {a: 1}\n", "flows[0].steps[0].args", "takes no args"},
		"NoInstructions":     {"      - agent_task: {tools: [t]}\n", "flows[0].steps[0].agent_task.instructions", "missing required value"},
		"BadTemplate":        {"      - agent_task: {instructions: \"{{.nope}}\"}\n", "flows[0].steps[0].agent_task.instructions", "nope"},
		"UnknownTool":        {"      - agent_task: {instructions: x, tools: [tt]}\n", "flows[0].steps[0].agent_task.tools[0]", `no tool named "tt" (did you mean "t"?)`},
		"ToolTwice":          {"      - agent_task: {instructions: x, tools: [t, t]}\n", "flows[0].steps[0].agent_task.tools[1]", "listed twice"},
		"UpstreamUnknown":    {"      - agent_task: {instructions: x, tools: [gh.search]}\n", "flows[0].steps[0].agent_task.tools[0]", "gh"},
		"AssetBadID":         {"      - agent_task: {instructions: x, assets: [{id: ../x, text: a}]}\n", "flows[0].steps[0].agent_task.assets[0].id", "asset id"},
		"AssetTwice":         {"      - agent_task: {instructions: x, assets: [{id: a, text: a}, {id: a, text: b}]}\n", "flows[0].steps[0].agent_task.assets[1].id", "used twice"},
		"AssetTextAndPath":   {"      - agent_task: {instructions: x, assets: [{id: a, text: a, path: b}]}\n", "flows[0].steps[0].agent_task.assets[0]", "one of the two"},
		"AssetMissingFile":   {"      - agent_task: {instructions: x, assets: [{id: a, path: nowhere.md}]}\n", "flows[0].steps[0].agent_task.assets[0].path", "no such file"},
		"AssetTextTemplate":  {"      - agent_task: {instructions: x, assets: [{id: a, text: \"{{.zz}}\"}]}\n", "flows[0].steps[0].agent_task.assets[0].text", "zz"},
		"BadOutputSchema":    {"      - agent_task: {instructions: x, output_schema: {type: 7}}\n", "flows[0].steps[0].agent_task.output_schema", "output_schema"},
		"BadStageName":       {"      - name: \"a b\"\n        tool: t\n", "flows[0].steps[0].name", "step name"},
		"DuplicateStageName": {"      - tool: t\n      - name: t\n        agent_task: {instructions: x}\n", "flows[0].steps[1].name", "unique"},
		"EmptySkill":         {"      - agent_task: {instructions: x, skills: [\"\"]}\n", "flows[0].steps[0].agent_task.skills[0]", "non-empty"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ps := parseProblems(t, flow(c.step))
			for _, p := range ps {
				if p.Path == c.path && strings.Contains(p.Message, c.msg) {
					return
				}
			}
			t.Errorf("want %s: …%s…; got %+v", c.path, c.msg, ps)
		})
	}
}

func TestAgentTaskValidAndAssetPathRelativeToConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := validTools + `flows:
  - name: f
    command: "f {svc}"
    steps:
      - name: look
        agent_task:
          instructions: "look at {{.svc}}"
          skills: [triage]
          tools: [t]
          assets: [{id: notes, path: notes.md}, {id: ctx, text: "svc={{.svc}}"}]
          output_schema: {type: object, required: [summary], properties: {summary: {type: string}}}
      - tool: t
`
	path := filepath.Join(dir, "opsgate.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Loader{LookupEnv: envOf(nil)}.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Flows[0].Steps[0]
	if s.Stage() != "look" || cfg.Flows[0].Steps[1].Stage() != "t" || s.AgentTask.Tools[0] != "t" {
		t.Errorf("steps = %+v", cfg.Flows[0].Steps)
	}
	if got := cfg.AssetPath("notes.md"); got != filepath.Join(dir, "notes.md") {
		t.Errorf("AssetPath = %s", got)
	}
	if got := cfg.AssetPath("/abs/x"); got != "/abs/x" {
		t.Errorf("AssetPath(abs) = %s", got)
	}
}
