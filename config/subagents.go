package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/opsgate/opsgate/core/agent"
)

// Sub-agents (docs/agents.md, "Sub-agents"): "agent:<name>" in an agent's
// tools lets it delegate a task to the configured agent <name>. The name
// must be a configured agent, never a glob, and delegation must not come
// back around: an agent that reaches itself through its sub-agents is
// refused here, before anything runs (the engine also caps the depth).

// subagentRef checks one "agent:<name>" entry at YAML path p.
func (c *checker) subagentRef(p, g string) {
	name, _ := agent.SubagentOf(g)
	var names []string
	for i := range c.cfg.Agents {
		names = append(names, c.cfg.Agents[i].Name)
	}
	switch {
	case name == "":
		c.problem(p, "%q names no agent: write agent:<name> with a configured agent's name", g)
	case strings.ContainsAny(name, `*?[\`):
		c.problem(p, "%q: sub-agents are named one by one, never matched by a glob", g)
	case !slices.Contains(names, name):
		msg := fmt.Sprintf("no agent named %q (define it under agents)", name)
		if near := suggest(name, names); near != "" {
			msg = fmt.Sprintf("no agent named %q (did you mean %q?)", name, near)
		}
		c.problem(p, "%s", msg)
	}
}

// subEdge is one delegation: to the agent named, by tools entry `entry`.
type subEdge struct {
	to    string
	entry int
}

// subagentGraph is, per agent, the agents its tools delegate to.
func subagentGraph(as []Agent) map[string][]subEdge {
	g := map[string][]subEdge{}
	for i := range as {
		for j, t := range as[i].Tools {
			if name, ok := agent.SubagentOf(t); ok {
				g[as[i].Name] = append(g[as[i].Name], subEdge{to: name, entry: j})
			}
		}
	}
	return g
}

// subagentCycles reports every agents[i].tools entry that closes a cycle
// of delegation (an agent that reaches itself), once per cycle.
func (c *checker) subagentCycles() {
	as := c.cfg.Agents
	graph := subagentGraph(as)
	index := map[string]int{}
	for i := range as {
		if _, dup := index[as[i].Name]; !dup {
			index[as[i].Name] = i
		}
	}
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	reported := map[string]bool{}
	var path []string
	var visit func(name string)
	visit = func(name string) {
		state[name] = onPath
		path = append(path, name)
		for _, edge := range graph[name] {
			next, j := edge.to, edge.entry
			switch state[next] {
			case onPath:
				start := slices.Index(path, next)
				cycle := append(slices.Clone(path[start:]), next)
				key := canonicalCycle(cycle[:len(cycle)-1])
				if !reported[key] {
					reported[key] = true
					c.problem(fmt.Sprintf("%s[%d]", agentPath(index[name], "tools"), j),
						"agent:%s makes a cycle of sub-agents (%s); an agent may not reach itself through its sub-agents",
						next, strings.Join(cycle, " → "))
				}
			case unseen:
				if _, ok := index[next]; ok {
					visit(next)
				}
			}
		}
		path = path[:len(path)-1]
		state[name] = done
	}
	for i := range as {
		if state[as[i].Name] == unseen {
			visit(as[i].Name)
		}
	}
}

// canonicalCycle names a cycle the same from whichever agent it was
// entered: rotated to start at its least name.
func canonicalCycle(names []string) string {
	least := 0
	for i, n := range names {
		if n < names[least] {
			least = i
		}
	}
	return strings.Join(append(slices.Clone(names[least:]), names[:least]...), ",")
}
