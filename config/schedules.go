package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/authority"
	"github.com/opsgate/opsgate/core/router"
	"github.com/opsgate/opsgate/core/schedule"
)

// Schedule is one schedules[] entry (CONTRACT.md "Schedules",
// docs/schedules.md): at each tick of cron, in timezone, text (or prompt
// to agent) goes into thread as the requester "schedule:<name>".
type Schedule struct {
	// Name is unique; the runs' requester is "schedule:<name>".
	Name string `yaml:"name" cfg:"required"`
	// Cron is five fields, "@every <duration>" or @hourly, @daily, …
	Cron string `yaml:"cron" cfg:"required"`
	// Timezone is an IANA zone the five fields are read in; default UTC.
	Timezone string `yaml:"timezone"`
	// Thread is where it posts and asks: "<channel>:<key>".
	Thread string `yaml:"thread" cfg:"required"`
	// Text is handled like a chat message (a flow command, or a prompt
	// for the default agent); or Agent and Prompt.
	Text   string `yaml:"text"`
	Agent  string `yaml:"agent"`
	Prompt string `yaml:"prompt"`
	// Missed is skip (default) or run_once: ticks that passed while no
	// replica was up.
	Missed string `yaml:"missed" enum:"skip|run_once"`
	// Overlap is skip (default) or queue: a tick while the previous run
	// is not final.
	Overlap string `yaml:"overlap" enum:"skip|queue"`
}

// Schedule maps the entry onto what core/schedule takes.
func (s Schedule) Schedule() schedule.Schedule {
	return schedule.Schedule{Name: s.Name, Cron: s.Cron, Timezone: s.Timezone, Thread: s.Thread, Text: s.Text,
		Agent: s.Agent, Prompt: s.Prompt, Missed: schedule.Missed(s.Missed), Overlap: schedule.Overlap(s.Overlap)}
}

// ScheduleList is schedules: as core/schedule takes it.
func (c *Config) ScheduleList() []schedule.Schedule {
	out := make([]schedule.Schedule, len(c.Schedules))
	for i, s := range c.Schedules {
		out[i] = s.Schedule()
	}
	return out
}

func schedulePath(i int, rest string) string { return fmt.Sprintf("schedules[%d].%s", i, rest) }

func applyScheduleDefaults(c *Config) {
	for i := range c.Schedules {
		s := &c.Schedules[i]
		if s.Missed == "" {
			s.Missed = string(schedule.MissedSkip)
		}
		if s.Overlap == "" {
			s.Overlap = string(schedule.OverlapSkip)
		}
	}
}

// schedules checks schedules[]: each entry as core/schedule validates it,
// then what only the whole file knows — unique names, a known agent, an
// enabled channel the schedule may start runs on, and text that does
// something.
func (c *checker) schedules() {
	seen := map[string]int{}
	agents := make([]string, 0, len(c.cfg.Agents))
	defaultAgent := false
	for _, a := range c.cfg.Agents {
		agents = append(agents, a.Name)
		defaultAgent = defaultAgent || a.Default
	}
	rt := c.flowRouter()
	for i, s := range c.cfg.Schedules {
		c.adapterProblems(fmt.Sprintf("schedules[%d]", i), s.Schedule().Validate())
		if first, dup := seen[s.Name]; dup && s.Name != "" {
			c.problem(schedulePath(i, "name"), "duplicate schedule name %q (also schedules[%d])", s.Name, first)
		} else {
			seen[s.Name] = i
		}
		if s.Agent != "" && !slices.Contains(agents, s.Agent) {
			msg := fmt.Sprintf("no agent named %q (define it under agents)", s.Agent)
			if near := suggest(s.Agent, agents); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			c.problem(schedulePath(i, "agent"), "%s", msg)
		}
		if s.Text != "" && !defaultAgent && rt != nil {
			var nm *router.NoMatchError
			if _, err := rt.Route(s.Text); errors.As(err, &nm) {
				c.problem(schedulePath(i, "text"), "matches no flow command and no agent is the default, so every tick would only get the help reply: %s", nm.Error())
			}
		}
		c.scheduleThread(i, s)
	}
}

// scheduleThread checks that a schedule's thread is on an enabled chat
// channel whose requesters let the schedule start runs: otherwise every
// tick would be refused.
func (c *checker) scheduleThread(i int, s Schedule) {
	ch, _, ok := strings.Cut(s.Thread, ":")
	if !ok {
		return // Validate reported the form
	}
	_, chat := c.cfg.Channels.ChatRequesters()[ch]
	enabled := map[string]bool{"console": c.cfg.Channels.Console.Enabled, "local": c.cfg.Channels.Local.Enabled,
		"slack": c.cfg.Channels.Slack.Enabled, "telegram": c.cfg.Channels.Telegram.Enabled, "discord": c.cfg.Channels.Discord.Enabled,
		"email": c.cfg.Channels.Email.Enabled, "matrix": c.cfg.Channels.Matrix.Enabled, "signal": c.cfg.Channels.Signal.Enabled}
	switch {
	case !chat:
		names := make([]string, 0, len(enabled))
		for name := range enabled {
			names = append(names, name)
		}
		slices.Sort(names)
		c.problem(schedulePath(i, "thread"), "channel %q is not a chat channel a schedule can post in; one of: %s", ch, strings.Join(names, ", "))
	case !enabled[ch]:
		c.problem(schedulePath(i, "thread"), "channel %s is not enabled (channels.%s.enabled)", ch, ch)
	case c.scheduleGate().MayRequest(ch, schedule.Identity(s.Name)) == "":
	default:
		c.problem(schedulePath(i, "thread"), "%s may not start runs in channel %s, so every tick would be refused: add %q to channels.%s.requesters",
			schedule.Identity(s.Name), ch, schedule.Identity(s.Name), ch)
	}
}

// scheduleGate is the requesters gate as serve's engine will judge it
// (core/authority), so config check refuses exactly the schedules whose
// ticks would be refused.
func (c *checker) scheduleGate() authority.Live {
	return authority.Live{People: approvals.NewDirectory(c.cfg.People, c.cfg.Approvers.Groups), Requesters: c.cfg.RequesterGates()}
}

// flowRouter routes texts as the engine will, or nil when a flow's
// command is malformed (flows() reported it).
func (c *checker) flowRouter() *router.Router {
	flows := make([]router.Flow, 0, len(c.cfg.Flows))
	for _, f := range c.cfg.Flows {
		flows = append(flows, router.Flow{Name: f.Name, Description: f.Description, Command: f.Command})
	}
	rt, err := router.New(flows)
	if err != nil {
		return nil
	}
	return rt
}

// scheduleEntryProblem checks a "schedule:<name>" requester entry: it must
// name a configured schedule.
func (c *checker) scheduleEntryProblem(e string) string {
	name := strings.TrimPrefix(e, approvals.SchedulePrefix)
	for _, s := range c.cfg.Schedules {
		if s.Name == name {
			return ""
		}
	}
	return fmt.Sprintf("unknown schedule %q (define it under schedules)", name)
}
