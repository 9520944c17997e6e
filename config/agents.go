package config

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core/agent"
)

// Model is one LLM endpoint agents talk to (docs/agents.md, "Configuration").
type Model struct {
	// Name is what agents[].model refers to; unique.
	Name string `yaml:"name" cfg:"required"`
	// Provider is openai (Chat Completions: OpenAI, vLLM, Ollama, LM
	// Studio, LiteLLM) or anthropic (the Messages API).
	Provider string `yaml:"provider" cfg:"required" enum:"openai|anthropic"`
	// BaseURL is the server. Left out, it is the provider's public API.
	// Written but empty — `base_url: "${OPENAI_BASE_URL:-}"` with the
	// variable unset — turns the model off, and every agent on it, so one
	// config serves machines with and without a model (see Off).
	BaseURL string `yaml:"base_url"`
	// APIKey may be empty for a local server; required for a public API.
	APIKey string `yaml:"api_key"`
	// Model is the provider's model id ("gpt-4.1-mini", "qwen3:8b").
	Model string `yaml:"model" cfg:"required"`
	// MaxTokens bounds one turn's output; default 4096.
	MaxTokens int `yaml:"max_tokens"`
	// Timeout bounds one model turn, retries included; default 2m.
	Timeout Duration `yaml:"timeout"`
	// MaxHistory bounds the conversation sent with each turn (oldest
	// messages are left out first); default 256KiB (about 64k tokens).
	// Lower it for small local models: Ollama silently cuts a prompt past
	// its context length.
	MaxHistory ByteSize `yaml:"max_history"`

	// Off says why the model is off ("" when it is on); not a key.
	Off string `yaml:"-"`
}

// Agent is an LLM that works in a thread, every tool call behind the gate.
type Agent struct {
	// Name is unique; runs and the Agent API name it.
	Name string `yaml:"name" cfg:"required"`
	// Model names a models[] entry.
	Model string `yaml:"model" cfg:"required"`
	// Description says what the agent is for; an agent that may delegate
	// to this one ("agent:<name>" in its tools) sees it as the tool's
	// description.
	Description string `yaml:"description"`
	// Instructions follow opsgate's own preamble in the system prompt.
	Instructions string `yaml:"instructions"`
	// Tools are globs (path.Match syntax) over tool names, upstream MCP
	// tools included as "<server>.<tool>": ["service_status", "github.*"].
	// "agent:<name>" (never a glob) delegates to another configured agent
	// (docs/agents.md, "Sub-agents"). ask_user is always available.
	Tools []string `yaml:"tools"`
	// MaxSteps bounds the tool calls of one run; default 20.
	MaxSteps int `yaml:"max_steps"`
	// Default makes free text that matches no flow go to this agent; at
	// most one agent may be the default.
	Default bool `yaml:"default"`
	// Attachments bound the files of a message the agent reads (CONTRACT
	// "Added for turn 3"); defaults {max_bytes: 5MiB, kinds: [image, file]}.
	Attachments AgentAttachments `yaml:"attachments"`

	// Off says why the agent is off ("" when it is on); not a key.
	Off string `yaml:"-"`
}

// AgentAttachments is agents[].attachments: which files the agent gets
// the content of, and how large. Other files reach it by reference.
type AgentAttachments struct {
	// MaxBytes bounds one file; a larger one is never downloaded.
	MaxBytes ByteSize `yaml:"max_bytes"`
	// Kinds are image, file and audio; [] reads no content at all.
	Kinds []string `yaml:"kinds"`
}

// Defaults of models[] and agents[].
const (
	DefaultModelMaxTokens = 4096
	DefaultModelTimeout   = 2 * time.Minute
	DefaultMaxHistory     = 256 << 10
	DefaultAgentMaxSteps  = agent.DefaultMaxSteps
	MaxAgentSteps         = 1000
	// DefaultAttachmentBytes and MaxAttachmentBytes bound
	// agents[].attachments.max_bytes: each file fetched is held in memory.
	DefaultAttachmentBytes = 5 << 20
	MaxAttachmentBytes     = 64 << 20
)

// DefaultAttachmentKinds are read when attachments.kinds is not given.
var DefaultAttachmentKinds = []string{"image", "file"}

// attachmentKinds are the kinds CONTRACT.md names.
var attachmentKinds = []string{"image", "file", "audio"}

func modelPath(i int, rest string) string { return fmt.Sprintf("models[%d].%s", i, rest) }
func agentPath(i int, rest string) string { return fmt.Sprintf("agents[%d].%s", i, rest) }

func applyAgentDefaults(c *Config, given func(string) bool) {
	for i := range c.Models {
		m := &c.Models[i]
		if m.MaxTokens == 0 && !given(modelPath(i, "max_tokens")) {
			m.MaxTokens = DefaultModelMaxTokens
		}
		setDuration(&m.Timeout, DefaultModelTimeout, given(modelPath(i, "timeout")))
		if m.MaxHistory == 0 && !given(modelPath(i, "max_history")) {
			m.MaxHistory = DefaultMaxHistory
		}
		if m.BaseURL == "" && given(modelPath(i, "base_url")) {
			m.Off = "its base_url is empty"
		}
	}
	for i := range c.Agents {
		a := &c.Agents[i]
		if a.MaxSteps == 0 && !given(agentPath(i, "max_steps")) {
			a.MaxSteps = DefaultAgentMaxSteps
		}
		if a.Attachments.MaxBytes == 0 && !given(agentPath(i, "attachments.max_bytes")) {
			a.Attachments.MaxBytes = DefaultAttachmentBytes
		}
		if a.Attachments.Kinds == nil && !given(agentPath(i, "attachments.kinds")) {
			a.Attachments.Kinds = slices.Clone(DefaultAttachmentKinds)
		}
	}
}

func (c *checker) models() {
	seen := map[string]int{}
	for i := range c.cfg.Models {
		m := &c.cfg.Models[i]
		if first, dup := seen[m.Name]; dup && m.Name != "" {
			c.problem(modelPath(i, "name"), "duplicate model name %q (also models[%d])", m.Name, first)
		} else {
			seen[m.Name] = i
		}
		if m.Name != "" && !nameRE.MatchString(m.Name) {
			c.problem(modelPath(i, "name"), "must be 1-64 letters, digits, '_' or '-'")
		}
		c.optionalURL(modelPath(i, "base_url"), m.BaseURL)
		if m.Off == "" && m.APIKey == "" && !c.given[modelPath(i, "base_url")] {
			c.problem(modelPath(i, "api_key"), "missing required value (the provider's public API needs a key; set base_url for a local server that needs none)")
		}
		if m.MaxTokens < 1 {
			c.problem(modelPath(i, "max_tokens"), "must be at least 1")
		}
		if m.Timeout <= 0 {
			c.problem(modelPath(i, "timeout"), "must be greater than 0")
		}
		if m.MaxHistory < 4<<10 {
			c.problem(modelPath(i, "max_history"), "must be at least 4KiB")
		}
	}
}

func (c *checker) agents() {
	models := map[string]*Model{}
	var modelNames []string
	for i := range c.cfg.Models {
		models[c.cfg.Models[i].Name] = &c.cfg.Models[i]
		modelNames = append(modelNames, c.cfg.Models[i].Name)
	}
	tools := toolNames(c.cfg.Tools)
	seen := map[string]int{}
	def := -1
	for i := range c.cfg.Agents {
		a := &c.cfg.Agents[i]
		if first, dup := seen[a.Name]; dup && a.Name != "" {
			c.problem(agentPath(i, "name"), "duplicate agent name %q (also agents[%d])", a.Name, first)
		} else {
			seen[a.Name] = i
		}
		if a.Name != "" && !nameRE.MatchString(a.Name) {
			c.problem(agentPath(i, "name"), "must be 1-64 letters, digits, '_' or '-'")
		}
		if m, ok := models[a.Model]; !ok && a.Model != "" {
			msg := fmt.Sprintf("no model named %q (define it under models)", a.Model)
			if near := suggest(a.Model, modelNames); near != "" {
				msg = fmt.Sprintf("no model named %q (did you mean %q?)", a.Model, near)
			}
			c.problem(agentPath(i, "model"), "%s", msg)
		} else if ok && m.Off != "" {
			a.Off = fmt.Sprintf("its model %s is off: %s", m.Name, m.Off)
		}
		for j, g := range a.Tools {
			p := fmt.Sprintf("%s[%d]", agentPath(i, "tools"), j)
			switch _, err := path.Match(g, ""); {
			case g == "":
				c.problem(p, "must not be empty")
			case err != nil:
				c.problem(p, "invalid glob %q", g)
			case g == agent.AskUserTool:
				// built in; listing it changes nothing
			case strings.HasPrefix(g, agent.SubagentPrefix):
				c.subagentRef(p, g)
			case !strings.ContainsAny(g, `*?[\`):
				// A plain name is a configured tool or an upstream
				// "<server>.<tool>" its server's tools globs offer.
				if msg := c.toolRefProblem(g, tools); msg != "" {
					if near := suggest(g, tools); near != "" && !strings.Contains(g, ".") {
						msg += fmt.Sprintf(" (did you mean %q?)", near)
					}
					c.problem(p, "%s", msg)
				}
			default:
				// "github.*": the server before the dot must exist.
				if srv, _, dotted := strings.Cut(g, "."); dotted && !strings.ContainsAny(srv, `*?[\`) && !c.hasMCPServer(srv) {
					c.problem(p, "no mcp_servers entry named %q", srv)
				}
			}
		}
		if a.MaxSteps < 1 || a.MaxSteps > MaxAgentSteps {
			c.problem(agentPath(i, "max_steps"), "must be between 1 and %d", MaxAgentSteps)
		}
		if n := a.Attachments.MaxBytes; n < 1 || n > MaxAttachmentBytes {
			c.problem(agentPath(i, "attachments.max_bytes"), "must be between 1 byte and 64MiB")
		}
		for j, k := range a.Attachments.Kinds {
			if !slices.Contains(attachmentKinds, k) {
				c.problem(fmt.Sprintf("%s[%d]", agentPath(i, "attachments.kinds"), j), "must be one of %s, not %q", strings.Join(attachmentKinds, ", "), k)
			}
		}
		if a.Default {
			if def >= 0 {
				c.problem(agentPath(i, "default"), "only one agent may be the default (agents[%d] is too)", def)
			} else {
				def = i
			}
		}
	}
	c.subagentCycles()
}

func (c *checker) hasMCPServer(name string) bool {
	for _, s := range c.cfg.MCPServers {
		if s.Name == name {
			return true
		}
	}
	return false
}

// Enabled reports whether the model is on.
func (m *Model) Enabled() bool { return m.Off == "" }

// Enabled reports whether the agent is on.
func (a *Agent) Enabled() bool { return a.Off == "" }

// Allows reports whether the agent may call the tool named name (a
// configured tool or "<server>.<tool>"); ask_user always.
func (a *Agent) Allows(name string) bool {
	if name == agent.AskUserTool {
		return true
	}
	for _, g := range a.Tools {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// Spec is the model in the shape the providers take (core/agent/providers).
func (m *Model) Spec() agent.ModelSpec {
	return agent.ModelSpec{Name: m.Name, Provider: m.Provider, BaseURL: m.BaseURL, APIKey: m.APIKey,
		Model: m.Model, MaxTokens: m.MaxTokens, Timeout: m.Timeout.D()}
}

// Model returns the model named name, or nil.
func (c *Config) Model(name string) *Model {
	for i := range c.Models {
		if c.Models[i].Name == name {
			return &c.Models[i]
		}
	}
	return nil
}

// Agent returns the agent named name, or nil.
func (c *Config) Agent(name string) *Agent {
	for i := range c.Agents {
		if c.Agents[i].Name == name {
			return &c.Agents[i]
		}
	}
	return nil
}

// DefaultAgent returns the agent free text goes to: the one marked default,
// if it is on; nil otherwise (free text then gets the list of flows, as
// without agents).
func (c *Config) DefaultAgent() *Agent {
	for i := range c.Agents {
		if a := &c.Agents[i]; a.Default && a.Enabled() {
			return a
		}
	}
	return nil
}

// AgentNotices are the info lines to log at startup for models and agents
// that are off, e.g. "agent ops is off: its model default is off: its
// base_url is empty (set the variable it names to turn it on)".
func (c *Config) AgentNotices() []string {
	var out []string
	for _, m := range c.Models {
		if m.Off != "" {
			out = append(out, fmt.Sprintf("model %s is off: %s (set the environment variable its base_url names to turn it on)", m.Name, m.Off))
		}
	}
	for _, a := range c.Agents {
		if a.Off != "" {
			out = append(out, fmt.Sprintf("agent %s is off: %s", a.Name, a.Off))
		}
	}
	return out
}
