package agent

import "strings"

// SubagentPrefix marks a sub-agent in an agent's tools: "agent:reviewer"
// lets the agent delegate a task to the configured agent "reviewer"
// (docs/agents.md, "Sub-agents"). Globs never match it; it is named.
const SubagentPrefix = "agent:"

// SubagentTask is the one argument of a sub-agent tool: what the child
// agent is asked to do, in its own words.
const SubagentTask = "task"

// SubagentOf returns the agent a sub-agent tool name delegates to; ok is
// false for every other tool.
func SubagentOf(tool string) (name string, ok bool) {
	name, ok = strings.CutPrefix(tool, SubagentPrefix)
	return name, ok && name != ""
}

// SubagentSchema is the argument schema of every sub-agent tool.
func SubagentSchema() map[string]any {
	return map[string]any{
		"type":     "object",
		"required": []any{SubagentTask},
		"properties": map[string]any{
			SubagentTask: map[string]any{"type": "string", "description": "The task for this agent: everything it needs to know, since it sees nothing else of this conversation."},
		},
	}
}
