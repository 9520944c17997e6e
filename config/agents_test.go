package config

import (
	"strings"
	"testing"
	"time"
)

func TestQuickstartAgentNeedsOpenAIBaseURL(t *testing.T) {
	t.Parallel()
	cfg, err := Loader{LookupEnv: envOf(nil)}.Default()
	if err != nil {
		t.Fatal(err)
	}
	ops := cfg.Agent("ops")
	if ops == nil || ops.Enabled() || cfg.Model("default").Enabled() || cfg.DefaultAgent() != nil {
		t.Fatalf("without OPENAI_BASE_URL: ops %+v, default %+v", ops, cfg.DefaultAgent())
	}
	notes := strings.Join(cfg.AgentNotices(), "\n")
	if !strings.Contains(notes, "model default is off: its base_url is empty") || !strings.Contains(notes, "agent ops is off: its model default is off") {
		t.Errorf("notices = %q", notes)
	}

	cfg, err = Loader{LookupEnv: envOf(map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "OPENAI_MODEL": "qwen3:8b"})}.Default()
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.DefaultAgent()
	if a == nil || a.Name != "ops" || len(cfg.AgentNotices()) != 0 {
		t.Fatalf("with OPENAI_BASE_URL: default %+v, notices %v", a, cfg.AgentNotices())
	}
	spec := cfg.Model(a.Model).Spec()
	if spec.Provider != "openai" || spec.BaseURL != "http://127.0.0.1:11434/v1" || spec.APIKey != "" || spec.Model != "qwen3:8b" ||
		spec.MaxTokens != DefaultModelMaxTokens || spec.Timeout != 2*time.Minute || spec.Name != "default" {
		t.Errorf("spec = %+v", spec)
	}
	if !a.Allows("deploy") || !a.Allows("service_status") || !a.Allows("ask_user") || a.Allows("rm") || a.MaxSteps != 10 {
		t.Errorf("agent = %+v", a)
	}
}

func TestProductionAgents(t *testing.T) {
	t.Parallel()
	cfg, err := Loader{LookupEnv: envOf(productionEnv)}.Load("../configs/production.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Model("default")
	if m.BaseURL != "https://api.openai.com/v1" || m.APIKey != "sk-test" || m.MaxHistory != 256<<10 || !m.Enabled() {
		t.Errorf("default model = %+v", m)
	}
	if c := cfg.Model("claude"); c.BaseURL != "" || c.Timeout != Duration(DefaultModelTimeout) || c.MaxTokens != DefaultModelMaxTokens {
		t.Errorf("claude = %+v", c)
	}
	ops := cfg.DefaultAgent()
	if ops == nil || ops.Name != "ops" || !ops.Allows("github.search") || ops.Allows("gitlab.search") || ops.Allows("delete_db") {
		t.Errorf("ops = %+v", ops)
	}
	if ops != nil && (ops.Attachments.MaxBytes != 5<<20 || strings.Join(ops.Attachments.Kinds, ",") != "image,file") {
		t.Errorf("ops attachments = %+v", ops.Attachments)
	}
	if r := cfg.Agent("reviewer"); r.Default || r.MaxSteps != 5 || r.Attachments.MaxBytes != DefaultAttachmentBytes || len(r.Attachments.Kinds) != 2 {
		t.Errorf("reviewer = %+v", r)
	}
}

func TestAgentProblems(t *testing.T) {
	t.Parallel()
	model := "models:\n  - {name: default, provider: openai, base_url: \"http://127.0.0.1:8000/v1\", model: m}\n"
	cases := map[string]struct {
		src, path, msg string
	}{
		"BadProvider":     {"models:\n  - {name: m, provider: gemini, base_url: \"http://x/v1\", model: m}\n", "models[0].provider", `must be one of openai, anthropic, not "gemini"`},
		"NoModelID":       {"models:\n  - {name: m, provider: openai, base_url: \"http://x/v1\"}\n", "models[0].model", "missing required value"},
		"BadBaseURL":      {"models:\n  - {name: m, provider: openai, base_url: \"localhost:11434\", model: m}\n", "models[0].base_url", "absolute http(s) URL"},
		"PublicNeedsKey":  {"models:\n  - {name: m, provider: anthropic, model: claude}\n", "models[0].api_key", "public API needs a key"},
		"DupModel":        {model + "  - {name: default, provider: openai, base_url: \"http://x/v1\", model: m}\n", "models[1].name", `duplicate model name "default"`},
		"ZeroMaxTokens":   {"models:\n  - {name: m, provider: openai, base_url: \"http://x/v1\", model: m, max_tokens: 0}\n", "models[0].max_tokens", "at least 1"},
		"ZeroTimeout":     {"models:\n  - {name: m, provider: openai, base_url: \"http://x/v1\", model: m, timeout: 0s}\n", "models[0].timeout", "greater than 0"},
		"TinyHistory":     {"models:\n  - {name: m, provider: openai, base_url: \"http://x/v1\", model: m, max_history: 1KiB}\n", "models[0].max_history", "at least 4KiB"},
		"UnknownModel":    {model + "agents:\n  - {name: ops, model: defualt}\n", "agents[0].model", `no model named "defualt" (did you mean "default"?)`},
		"NoAgentModel":    {model + "agents:\n  - {name: ops}\n", "agents[0].model", "missing required value"},
		"TwoDefaults":     {model + "agents:\n  - {name: a, model: default, default: true}\n  - {name: b, model: default, default: true}\n", "agents[1].default", "only one agent may be the default (agents[0] is too)"},
		"BadGlob":         {validTools + model + "agents:\n  - {name: a, model: default, tools: [\"t[\"]}\n", "agents[0].tools[0]", `invalid glob "t["`},
		"UnknownTool":     {validTools + model + "agents:\n  - {name: a, model: default, tools: [tt]}\n", "agents[0].tools[0]", `no tool named "tt" (did you mean "t"?)`},
		"EmptyGlob":       {validTools + model + "agents:\n  - {name: a, model: default, tools: [\"\"]}\n", "agents[0].tools[0]", "must not be empty"},
		"UnknownServer":   {model + "agents:\n  - {name: a, model: default, tools: [\"gihub.*\"]}\n", "agents[0].tools[0]", `no mcp_servers entry named "gihub"`},
		"UnknownMCPTool":  {model + "agents:\n  - {name: a, model: default, tools: [gh.search]}\n", "agents[0].tools[0]", `no tool named "gh.search" and no mcp_servers entry named "gh"`},
		"ZeroSteps":       {model + "agents:\n  - {name: a, model: default, max_steps: 0}\n", "agents[0].max_steps", "between 1 and 1000"},
		"TooManySteps":    {model + "agents:\n  - {name: a, model: default, max_steps: 1001}\n", "agents[0].max_steps", "between 1 and 1000"},
		"DupAgent":        {model + "agents:\n  - {name: a, model: default}\n  - {name: a, model: default}\n", "agents[1].name", `duplicate agent name "a"`},
		"BadAgentName":    {model + "agents:\n  - {name: \"a b\", model: default}\n", "agents[0].name", "letters, digits"},
		"AskUserReserved": {"tools:\n  - name: ask_user\n    risk: read\n    exec: {command: [x]}\n", "tools[0].name", "built-in question tool"},
		"UnknownAgentKey": {model + "agents:\n  - {name: a, model: default, max_step: 3}\n", "agents[0].max_step", `did you mean "max_steps"?`},
		"AttachmentsZero": {model + "agents:\n  - {name: a, model: default, attachments: {max_bytes: 0}}\n", "agents[0].attachments.max_bytes", "between 1 byte and 64MiB"},
		"AttachmentsHuge": {model + "agents:\n  - {name: a, model: default, attachments: {max_bytes: 1GiB}}\n", "agents[0].attachments.max_bytes", "between 1 byte and 64MiB"},
		"AttachmentsKind": {model + "agents:\n  - {name: a, model: default, attachments: {kinds: [image, video]}}\n", "agents[0].attachments.kinds[1]", `must be one of image, file, audio, not "video"`},
		"AttachmentsKey":  {model + "agents:\n  - {name: a, model: default, attachments: {max_byte: 1MiB}}\n", "agents[0].attachments.max_byte", `did you mean "max_bytes"?`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, p := range parseProblems(t, tc.src) {
				if p.Path == tc.path && strings.Contains(p.Message, tc.msg) {
					return
				}
				got = append(got, p.Path+": "+p.Message)
			}
			t.Errorf("no problem %s: %s; got %q", tc.path, tc.msg, got)
		})
	}
}

func TestAgentToolsAccepted(t *testing.T) {
	t.Parallel()
	src := validTools + `models:
  - {name: default, provider: openai, base_url: "http://127.0.0.1:8000/v1", model: m}
agents:
  - {name: a, model: default, tools: [t, "github.*", fs.read_file, ask_user, "*", "*.read_*"]}
mcp_servers:
  - {name: github, url: "https://mcp.example.com/mcp"}
  - {name: fs, command: [mcp-fs]}
`
	cfg, err := Loader{LookupEnv: envOf(nil)}.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Agent("a")
	if a.MaxSteps != DefaultAgentMaxSteps || a.Default || !a.Enabled() || !a.Allows("anything") {
		t.Errorf("agent = %+v", a)
	}
	if cfg.DefaultAgent() != nil {
		t.Error("an agent not marked default became the default")
	}
}

func TestEmptyBaseURLTurnsOff(t *testing.T) {
	t.Parallel()
	src := `models:
  - {name: off, provider: anthropic, base_url: "", model: claude}
  - {name: on, provider: openai, base_url: "http://127.0.0.1:1/v1", model: m}
agents:
  - {name: a, model: off, default: true}
  - {name: b, model: on}
`
	cfg, err := Loader{LookupEnv: envOf(nil)}.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err) // an off public model needs no api_key
	}
	if cfg.Agent("a").Enabled() || !cfg.Agent("b").Enabled() || cfg.DefaultAgent() != nil {
		t.Errorf("agents = %+v", cfg.Agents)
	}
}
