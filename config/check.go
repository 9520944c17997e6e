package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/approvals/condition"
	"github.com/opsgate/opsgate/configs"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/router"
	"github.com/opsgate/opsgate/core/tools"
)

// checker runs the semantic checks, reporting with the decoder's lines.
type checker struct {
	*decoder
	cfg *Config
	// cel compiles policy expressions; built at the first one.
	cel *condition.Compiler
}

// problem records a semantic problem unless the decoder already reported
// one at the same path (an unset ${VAR} need not also be "missing"), or it
// only follows from a mistyped key (followsTypo).
func (c *checker) problem(path, format string, args ...any) {
	for _, p := range c.problems {
		if p.Path == path {
			return
		}
	}
	if c.followsTypo(path, fmt.Sprintf(format, args...)) {
		return
	}
	c.add(path, c.lineOf(path), format, args...)
}

func toolPath(i int, rest string) string { return fmt.Sprintf("tools[%d].%s", i, rest) }
func rulePath(i int, rest string) string { return fmt.Sprintf("policy.rules[%d].%s", i, rest) }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func (c *checker) run() {
	if len(c.given) == 0 && c.cfg.Source != configs.QuickstartName {
		c.warn("", "the file sets nothing: the built-in defaults apply (SQLite under ./data, the console channel, listen "+
			"127.0.0.1:8080, no tools); start from configs/quickstart.yaml or configs/production.yaml")
	}
	c.server()
	c.store()
	c.engine()
	c.api()
	c.channels()
	c.consoleSignin()
	c.auditSinks()
	c.people()
	groups := c.approvers()
	c.requesters(groups)
	c.tools()
	c.mcpServers()
	c.mcpServer()
	c.flows()
	c.policy(groups)
	c.escalation(groups)
	if c.given["approvals.ttl"] && c.cfg.Approvals.TTL <= 0 {
		c.problem("approvals.ttl", "must be greater than 0")
	}
	if c.given["approvals.session_ttl"] && c.cfg.Approvals.SessionTTL <= 0 {
		c.problem("approvals.session_ttl", "must be greater than 0")
	}
	switch c.cfg.Approvals.QuestionAnswerers {
	case "", QuestionAnswerersRequesterOrApprovers, QuestionAnswerersRequester:
	default:
		c.problem("approvals.question_answerers", "must be %q or %q, not %q",
			QuestionAnswerersRequesterOrApprovers, QuestionAnswerersRequester, c.cfg.Approvals.QuestionAnswerers)
	}
	if c.given["audit.key_file"] && strings.TrimSpace(c.cfg.Audit.KeyFile) == "" {
		c.problem("audit.key_file", "must not be empty (default <data_dir>/audit.key)")
	}
	if ep := c.cfg.Telemetry.OTLPEndpoint; ep != "" {
		if u, err := url.Parse(ep); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.problem("telemetry.otlp_endpoint", "must be an http(s) URL such as http://127.0.0.1:4318, not %q", ep)
		}
	}
	c.models()
	c.agents()
	c.schedules()
}

func (c *checker) server() {
	s := c.cfg.Server
	if _, port, err := net.SplitHostPort(s.Listen); err != nil {
		c.problem("server.listen", "must be host:port, e.g. 127.0.0.1:8080 (%v)", err)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		c.problem("server.listen", "invalid port %q", port)
	}
	if s.PublicURL != "" {
		c.httpURL("server.public_url", s.PublicURL)
	}
}

func (c *checker) httpURL(p, raw string) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.problem(p, "must be an absolute http(s) URL, not %q", raw)
	}
}

func (c *checker) store() {
	if c.cfg.Store.DSN == "" {
		c.problem("store.dsn", "missing required value for driver %s", c.cfg.Store.Driver)
	}
}

func (c *checker) engine() {
	e := c.cfg.Engine
	if e.Concurrency < 1 {
		c.problem("engine.concurrency", "must be at least 1")
	}
	if e.Lease <= 0 {
		c.problem("engine.lease", "must be greater than 0")
	}
	if e.PollInterval <= 0 {
		c.problem("engine.poll_interval", "must be greater than 0")
	}
}

func (c *checker) api() {
	names, tokens := map[string]int{}, map[string]int{}
	for i, t := range c.cfg.API.Tokens {
		p := fmt.Sprintf("api.tokens[%d]", i)
		if first, dup := names[t.Name]; dup && t.Name != "" {
			c.problem(p+".name", "duplicate token name %q (also api.tokens[%d])", t.Name, first)
		} else {
			names[t.Name] = i
		}
		if first, dup := tokens[t.Token]; dup && t.Token != "" {
			c.problem(p+".token", "same token as api.tokens[%d]; every token must be distinct", first)
		} else {
			tokens[t.Token] = i
		}
		if n := len(t.Token); n > 0 && n < MinTokenLen {
			c.warn(p+".token", "only %d characters: a short token can be guessed; use at least %d random ones (openssl rand -hex 32)", n, MinTokenLen)
		}
		if t.Actor != "" {
			if msg := identityProblem(t.Actor); msg != "" {
				c.problem(p+".actor", "%s", msg)
			} else if strings.HasPrefix(t.Actor, approvals.SchedulePrefix) {
				c.problem(p+".actor", "%q is a schedule's identity: a token may not act as a schedule", t.Actor)
			}
		}
		if c.given[p+".scopes"] && len(t.Scopes) == 0 {
			c.problem(p+".scopes", "must list at least one scope (read, request, decide, admin, session.run), or be left out for the defaults")
		}
		if t.AgentConcurrency < 1 || t.AgentConcurrency > MaxAgentConcurrency {
			c.problem(p+".agent_concurrency", "must be between 1 and %d (turns at once; default %d), got %d",
				MaxAgentConcurrency, DefaultAgentConcurrency, t.AgentConcurrency)
		}
		for j, sc := range t.Scopes {
			if _, err := core.ParseScope(sc); err != nil {
				msg := err.Error()
				if near := suggest(sc, scopeNames()); near != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", near)
				}
				c.problem(fmt.Sprintf("%s.scopes[%d]", p, j), "%s", msg)
			} else if sc == string(core.ScopeDecide) && strings.HasPrefix(t.Actor, "agent:") {
				c.problem(fmt.Sprintf("%s.scopes[%d]", p, j), "an agent (actor %q) never decides: remove decide", t.Actor)
			}
		}
	}
}

func scopeNames() []string {
	out := make([]string, len(core.AllScopes))
	for i, sc := range core.AllScopes {
		out[i] = string(sc)
	}
	return out
}

// people checks the people map: names, identities (no agents), and that no
// identity belongs to two persons.
func (c *checker) people() {
	owner := map[string]string{}
	for name, ids := range c.cfg.People {
		p := joinKey("people", name)
		if !nameRE.MatchString(name) {
			c.problem(p, "person name must be 1-64 letters, digits, '_' or '-'")
		}
		for i, id := range ids {
			ip := fmt.Sprintf("%s[%d]", p, i)
			if msg := humanIdentityProblem(id); msg != "" {
				c.problem(ip, "%s", msg)
				continue
			}
			if other, dup := owner[id]; dup && other != name {
				c.problem(ip, "%q is also listed under people.%s: an identity belongs to one person", id, other)
			}
			owner[id] = name
		}
	}
}

// entryProblem checks an approver or requester entry: "group:<name>" of a
// defined group, "person:<name>" of a defined person, or an identity of a
// human.
func (c *checker) entryProblem(e string, groups map[string][]string) string {
	if g, ok := strings.CutPrefix(e, "group:"); ok {
		if _, exists := groups[g]; !exists {
			return fmt.Sprintf("unknown approver group %q (define it under approvers.groups)", g)
		}
		return ""
	}
	if name, ok := strings.CutPrefix(e, "person:"); ok {
		if _, exists := c.cfg.People[name]; !exists {
			return fmt.Sprintf("unknown person %q (define it under people)", name)
		}
		return ""
	}
	if msg := humanIdentityProblem(e); msg != "" {
		return "must be group:<name>, person:<name> or an identity: " + msg
	}
	return ""
}

// requesters checks channels.<name>.requesters: "anyone" alone, or
// entries that resolve.
func (c *checker) requesters(groups map[string][]string) {
	ch := c.cfg.Channels
	for name, rq := range ch.ChatRequesters() {
		p := "channels." + name + ".requesters"
		if c.given[p] && len(rq) == 0 {
			c.problem(p, `must list requesters, or ["anyone"]; leave it out for the default (identities the configuration knows)`)
		}
		for i, e := range rq {
			ep := fmt.Sprintf("%s[%d]", p, i)
			switch {
			case e == "anyone" && len(rq) > 1:
				c.problem(ep, `"anyone" stands alone: with it, every other entry is moot`)
			case e == "anyone":
			case strings.HasPrefix(e, approvals.SchedulePrefix):
				// A schedule is a requester, named as itself (never in a
				// group: it is not a person).
				if msg := c.scheduleEntryProblem(e); msg != "" {
					c.problem(ep, "%s", msg)
				}
			default:
				if msg := c.entryProblem(e, groups); msg != "" {
					c.problem(ep, "%s", msg)
				}
			}
		}
	}
}

func (c *checker) approvers() map[string][]string {
	for name, ids := range c.cfg.Approvers.Groups {
		p := joinKey("approvers.groups", name)
		if !nameRE.MatchString(name) {
			c.problem(p, "group name must be 1-64 letters, digits, '_' or '-'")
		}
		for i, id := range ids {
			ip := fmt.Sprintf("%s[%d]", p, i)
			if person, ok := strings.CutPrefix(id, "person:"); ok {
				if _, exists := c.cfg.People[person]; !exists {
					c.problem(ip, "unknown person %q (define it under people)", person)
				}
				continue
			}
			if strings.HasPrefix(id, "group:") {
				c.problem(ip, "groups do not nest: list the members of %s here, or name both groups in the rule", id)
				continue
			}
			if msg := humanIdentityProblem(id); msg != "" {
				c.problem(ip, "%s", msg)
			}
		}
	}
	return c.cfg.Approvers.Groups
}

func (c *checker) tools() {
	seen := map[string]int{}
	for i := range c.cfg.Tools {
		t := &c.cfg.Tools[i]
		if first, dup := seen[t.Name]; dup && t.Name != "" {
			c.problem(toolPath(i, "name"), "duplicate tool name %q (also tools[%d])", t.Name, first)
		} else {
			seen[t.Name] = i
		}
		if t.Name != "" && !nameRE.MatchString(t.Name) {
			c.problem(toolPath(i, "name"), "must be 1-64 letters, digits, '_' or '-'")
		}
		if t.Name == agent.AskUserTool {
			c.problem(toolPath(i, "name"), "%s is the agents' built-in question tool; choose another name", t.Name)
		}
		switch {
		case t.Exec == nil && t.HTTP == nil:
			c.problem(fmt.Sprintf("tools[%d]", i), "needs exactly one of exec or http")
		case t.Exec != nil && t.HTTP != nil:
			c.problem(fmt.Sprintf("tools[%d]", i), "has both exec and http; choose one")
		}
		funcs := toolFuncs()
		if t.Exec != nil {
			c.templates(toolPath(i, "exec.command"), t.Exec.Command, funcs)
			c.templates(toolPath(i, "exec.dry_run"), t.Exec.DryRun, funcs)
			for k, v := range t.Exec.Env {
				// The runner passes env values literally; a template here
				// would reach the tool as "{{.x}}", not the argument.
				if strings.Contains(v, "{{") {
					c.problem(joinKey(toolPath(i, "exec.env"), k), "env values are passed literally, not rendered; pass arguments in exec.command")
				}
			}
			if len(t.Exec.Command) > 0 && t.Exec.Command[0] == "" {
				c.problem(toolPath(i, "exec.command[0]"), "program must not be empty")
			}
			if t.Exec.Timeout <= 0 {
				c.problem(toolPath(i, "exec.timeout"), "must be greater than 0")
			}
		}
		if h := t.HTTP; h != nil {
			c.template(toolPath(i, "http.url"), h.URL, funcs, nil)
			if h.URL != "" && !strings.HasPrefix(h.URL, "http://") && !strings.HasPrefix(h.URL, "https://") {
				c.problem(toolPath(i, "http.url"), "must start with http:// or https://")
			}
			for k, v := range h.Headers {
				c.template(joinKey(toolPath(i, "http.headers"), k), v, funcs, nil)
			}
			c.template(toolPath(i, "http.body"), h.Body, funcs, nil)
			if h.Timeout <= 0 {
				c.problem(toolPath(i, "http.timeout"), "must be greater than 0")
			}
		}
		if t.MaxOutput <= 0 {
			c.problem(toolPath(i, "max_output"), "must be greater than 0")
		}
		if t.DryRunTimeout <= 0 {
			c.problem(toolPath(i, "dry_run_timeout"), "must be greater than 0")
		}
		schema, err := compileSchema(t.InputSchema)
		if err != nil {
			c.problem(toolPath(i, "input_schema"), "%v", err)
		}
		t.schema = schema
	}
}

func (c *checker) flows() {
	tools := map[string]bool{}
	for _, t := range c.cfg.Tools {
		tools[t.Name] = true
	}
	seen := map[string]int{}
	commands := map[string]int{}
	for i := range c.cfg.Flows {
		f := &c.cfg.Flows[i]
		p := fmt.Sprintf("flows[%d]", i)
		if strings.HasPrefix(f.Name, "agent:") {
			c.problem(p+".name", "flow names may not start with \"agent:\" (agent runs are named so)")
		}
		if first, dup := seen[f.Name]; dup && f.Name != "" {
			c.problem(p+".name", "duplicate flow name %q (also flows[%d])", f.Name, first)
		} else {
			seen[f.Name] = i
		}
		var vars map[string]bool
		if f.Command != "" {
			pat, err := router.ParsePattern(f.Command)
			if err != nil {
				c.problem(p+".command", "%v", err)
			} else {
				f.pattern = pat
				vars = map[string]bool{}
				for _, ph := range pat.Placeholders() {
					vars[ph.Name] = true
				}
				if first, dup := commands[pat.String()]; dup {
					c.problem(p+".command", "same command as flows[%d]", first)
				} else {
					commands[pat.String()] = i
				}
			}
		}
		stages := map[string]int{}
		for j, s := range f.Steps {
			sp := fmt.Sprintf("%s.steps[%d]", p, j)
			c.stepStage(sp, j, s, stages)
			if s.AgentTask != nil || s.Tool == "" {
				c.agentTaskStep(sp, s, vars)
				continue
			}
			if strings.Contains(s.Tool, ".") {
				if msg := c.upstreamToolProblem(s.Tool); msg != "" {
					c.problem(sp+".tool", "%s", msg)
				}
			} else if s.Tool != "" && !tools[s.Tool] {
				msg := fmt.Sprintf("no tool named %q", s.Tool)
				if near := suggest(s.Tool, toolNames(c.cfg.Tools)); near != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", near)
				}
				c.problem(sp+".tool", "%s", msg)
			}
			for k, v := range s.Args {
				if str, ok := v.(string); ok {
					c.template(joinKey(sp+".args", k), str, nil, vars)
				}
			}
			c.stepDashArgs(sp, s)
		}
	}
}

// stepDashArgs reports a step whose literal argument would start an exec
// argv element with "-": the runner refuses such a value (it would read as
// an option), so the step could never run. Templated arguments are tried
// with a harmless value; what they bring at run time is checked then.
func (c *checker) stepDashArgs(sp string, s Step) {
	var x *Exec
	for _, t := range c.cfg.Tools {
		if t.Name == s.Tool {
			x = t.Exec
		}
	}
	if x == nil || x.AllowDashArgs {
		return
	}
	args := map[string]any{}
	for k, v := range s.Args {
		if str, ok := v.(string); ok && strings.Contains(str, "{{") {
			v = "x"
		}
		args[k] = v
	}
	err := (&tools.Exec{Command: x.Command, DryRun: x.DryRun}).CheckArgs(args)
	var ae *tools.ArgError
	if errors.As(err, &ae) {
		p := sp + ".args"
		if ae.Arg != "" {
			p = joinKey(p, ae.Arg)
		}
		c.problem(p, "starts with \"-\" where the tool takes an argument, and the tool refuses values that read as options; write the option into exec.command, or set exec.allow_dash_args: true on tool %q", s.Tool)
	}
}

func toolNames(tools []Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name
	}
	return out
}
