package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/opsgate/opsgate/approvals"
)

// AgentTask is a flow step that an external agent performs over MCP
// (docs/mcp.md): the run stops at the step with a pending agent call; an
// agent claims it, may call the declared tools (each through the policy
// gate) and read the declared assets, and completes it with a result that
// must match output_schema. The result is the step's output.
type AgentTask struct {
	// Instructions tell the agent what to do; a template over the flow's
	// arguments.
	Instructions string `yaml:"instructions" cfg:"required"`
	// Skills are names handed to the agent as they are (for example the
	// names of skills the agent has); opsgate does not interpret them.
	Skills []string `yaml:"skills"`
	// Tools are the tools the agent may call for the task: tools[].name
	// or <mcp server>.<tool>.
	Tools []string `yaml:"tools"`
	// Assets the agent may read, by id only.
	Assets []AgentAsset `yaml:"assets"`
	// OutputSchema is the JSON Schema the agent's result must match;
	// default any JSON object.
	OutputSchema map[string]any `yaml:"output_schema"`
}

// AgentAsset is one readable asset of an agent task: inline text (a
// template over the flow's arguments) or a file on the server. The agent
// names it by ID and never sees the path.
type AgentAsset struct {
	ID          string `yaml:"id" cfg:"required"`
	Description string `yaml:"description"`
	// MediaType defaults to text/plain for text, application/octet-stream
	// for a path.
	MediaType string `yaml:"media_type"`
	Text      string `yaml:"text"`
	// Path is a file on the server, relative to the configuration file's
	// directory unless absolute.
	Path string `yaml:"path"`
}

// AssetPath resolves an asset's path: relative paths are relative to the
// directory of the configuration file, as tools' commands are.
func (c *Config) AssetPath(p string) string {
	if p == "" || filepath.IsAbs(p) || c.Source == "" || strings.HasSuffix(c.Source, "(built-in)") {
		return p
	}
	abs, err := filepath.Abs(c.Source)
	if err != nil {
		return p
	}
	return filepath.Join(filepath.Dir(abs), p)
}

// Stage is the step's stage name: Name, else the tool's name, else
// "agent_task".
func (s Step) Stage() string {
	switch {
	case s.Name != "":
		return s.Name
	case s.AgentTask != nil:
		return "agent_task"
	}
	return s.Tool
}

var (
	stageRE   = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	assetIDRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
)

// stepStage checks a step's name and that stage names are unique in
// their flow (artifacts are found by flow and stage name).
func (c *checker) stepStage(sp string, j int, s Step, seen map[string]int) {
	if s.Name != "" && !stageRE.MatchString(s.Name) {
		c.problem(sp+".name", "step name %q: use 1-64 letters, digits, '_', '.' or '-'", s.Name)
		return
	}
	st := s.Stage()
	if st == "" {
		return
	}
	if first, dup := seen[st]; dup {
		if s.Name != "" {
			c.problem(sp+".name", "stage name %q is also steps[%d]'s; names must be unique in a flow", st, first)
		}
		return
	}
	seen[st] = j
}

// agentTaskStep checks a step that has no tool: it must be an agent task,
// and only one of the two.
func (c *checker) agentTaskStep(sp string, s Step, vars map[string]bool) {
	t := s.AgentTask
	switch {
	case t == nil:
		c.problem(sp+".tool", "a step needs tool or agent_task")
		return
	case s.Tool != "":
		c.problem(sp, "a step has tool or agent_task, not both")
		return
	case len(s.Args) > 0:
		c.problem(sp+".args", "an agent_task step takes no args (the agent calls its tools with its own)")
	}
	p := sp + ".agent_task"
	if strings.TrimSpace(t.Instructions) == "" {
		c.problem(p+".instructions", "instructions must not be empty")
	} else {
		c.template(p+".instructions", t.Instructions, nil, vars)
	}
	for j, sk := range t.Skills {
		if strings.TrimSpace(sk) == "" || len(sk) > 200 {
			c.problem(fmt.Sprintf("%s.skills[%d]", p, j), "a skill is a non-empty name of at most 200 bytes")
		}
	}
	tools := map[string]bool{}
	for _, tl := range c.cfg.Tools {
		tools[tl.Name] = true
	}
	seenTool := map[string]bool{}
	for j, name := range t.Tools {
		tp := fmt.Sprintf("%s.tools[%d]", p, j)
		switch {
		case seenTool[name]:
			c.problem(tp, "tool %q is listed twice", name)
		case strings.Contains(name, "."):
			if msg := c.upstreamToolProblem(name); msg != "" {
				c.problem(tp, "%s", msg)
			}
		case !tools[name]:
			msg := fmt.Sprintf("no tool named %q", name)
			if near := suggest(name, toolNames(c.cfg.Tools)); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			c.problem(tp, "%s", msg)
		}
		seenTool[name] = true
	}
	seenAsset := map[string]bool{}
	for j, a := range t.Assets {
		ap := fmt.Sprintf("%s.assets[%d]", p, j)
		switch {
		case !assetIDRE.MatchString(a.ID):
			c.problem(ap+".id", "asset id %q: use 1-64 letters, digits, '_', '.' or '-'", a.ID)
		case seenAsset[a.ID]:
			c.problem(ap+".id", "asset id %q is used twice", a.ID)
		}
		seenAsset[a.ID] = true
		switch {
		case (a.Text == "") == (a.Path == ""):
			c.problem(ap, "an asset has text or path (one of the two)")
		case a.Text != "":
			c.template(ap+".text", a.Text, nil, vars)
		default:
			fi, err := os.Stat(c.cfg.AssetPath(a.Path))
			switch {
			case err != nil:
				c.problem(ap+".path", "asset file: %v", err)
			case !fi.Mode().IsRegular():
				c.problem(ap+".path", "asset %s is not a regular file", a.Path)
			}
		}
	}
	if t.OutputSchema != nil {
		if _, err := approvals.CompileSchema("output_schema", t.OutputSchema); err != nil {
			c.problem(p+".output_schema", "%v", err)
		}
	}
}
