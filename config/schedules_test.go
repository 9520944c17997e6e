package config

import (
	"testing"

	"github.com/opsgate/opsgate/core/schedule"
)

// withConsole is a valid config a schedule can use: the console enabled
// (with requesters, when given), a flow "go {x}" and an agent "ops" that
// is not the default.
func withConsole(requesters string) string {
	src := validTools + `flows:
  - {name: f, command: "go {x}", steps: [{tool: t}]}
models:
  - {name: m, provider: openai, base_url: "http://127.0.0.1:1/v1", model: x}
agents:
  - {name: ops, model: m}
channels:
  console:
    enabled: true
`
	if requesters != "" {
		src += "    requesters: " + requesters + "\n"
	}
	return src
}

var scheduleBase = withConsole("")

func TestScheduleConfig(t *testing.T) {
	t.Parallel()
	src := scheduleBase + `schedules:
  - name: nightly
    cron: "0 3 * * *"
    timezone: Europe/Berlin
    thread: "console:nightly"
    text: "go tmp"
  - name: disks
    cron: "@every 6h"
    thread: "console:disks"
    agent: ops
    prompt: check the disks
    missed: run_once
    overlap: queue
`
	cfg, err := Loader{LookupEnv: envOf(nil)}.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	got := cfg.ScheduleList()
	want := []schedule.Schedule{
		{Name: "nightly", Cron: "0 3 * * *", Timezone: "Europe/Berlin", Thread: "console:nightly", Text: "go tmp",
			Missed: schedule.MissedSkip, Overlap: schedule.OverlapSkip},
		{Name: "disks", Cron: "@every 6h", Thread: "console:disks", Agent: "ops", Prompt: "check the disks",
			Missed: schedule.MissedRunOnce, Overlap: schedule.OverlapQueue},
	}
	if len(got) != len(want) {
		t.Fatalf("ScheduleList = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("schedule %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	// A gated channel that names the schedule, and one that lets anyone.
	named := withConsole(`["console:alice", "schedule:nightly"]`) + `schedules:
  - {name: nightly, cron: "@daily", thread: "console:nightly", text: "go tmp"}
`
	if _, err := (Loader{LookupEnv: envOf(nil)}).Parse("test.yaml", []byte(named)); err != nil {
		t.Errorf("a schedule named among the requesters: %v", err)
	}
}

func TestScheduleProblems(t *testing.T) {
	t.Parallel()
	one := func(fields string) string { return scheduleBase + "schedules:\n  - " + fields + "\n" }
	const line = 15 // the schedule's line in one(...)
	cases := map[string]struct {
		src, path, msg string
		line           int
	}{
		"BadCron":         {one(`{name: n, cron: "0 25 * * *", thread: "console:x", text: "go a"}`), "schedules[0].cron", "above maximum", line},
		"CronFourFields":  {one(`{name: n, cron: "0 3 * *", thread: "console:x", text: "go a"}`), "schedules[0].cron", "exactly 5 fields", line},
		"EverySubSecond":  {one(`{name: n, cron: "@every 10ms", thread: "console:x", text: "go a"}`), "schedules[0].cron", "whole number of seconds", line},
		"NeverFires":      {one(`{name: n, cron: "0 0 30 2 *", thread: "console:x", text: "go a"}`), "schedules[0].cron", "never fires", line},
		"UnknownTimezone": {one(`{name: n, cron: "@daily", timezone: Europe/Atlantis, thread: "console:x", text: "go a"}`), "schedules[0].timezone", "unknown timezone", line},
		"LocalTimezone":   {one(`{name: n, cron: "@daily", timezone: Local, thread: "console:x", text: "go a"}`), "schedules[0].timezone", "differs between machines", line},
		"UnknownAgent":    {one(`{name: n, cron: "@daily", thread: "console:x", agent: opz, prompt: p}`), "schedules[0].agent", `no agent named "opz" (define it under agents) (did you mean "ops"?)`, line},
		"ThreadNoChannel": {one(`{name: n, cron: "@daily", thread: nightly, text: "go a"}`), "schedules[0].thread", "must be <channel>:<key>", line},
		"ThreadNotChat":   {one(`{name: n, cron: "@daily", thread: "webhook:x", text: "go a"}`), "schedules[0].thread", "not a chat channel", line},
		"ThreadDisabled":  {one(`{name: n, cron: "@daily", thread: "slack:T/C/1.2", text: "go a"}`), "schedules[0].thread", "channel slack is not enabled", line},
		"TextAndAgent":    {one(`{name: n, cron: "@daily", thread: "console:x", text: "go a", agent: ops, prompt: p}`), "schedules[0].text", "not both", line},
		"Neither":         {one(`{name: n, cron: "@daily", thread: "console:x"}`), "schedules[0].text", "missing", line},
		"AgentNoPrompt":   {one(`{name: n, cron: "@daily", thread: "console:x", agent: ops}`), "schedules[0].prompt", "missing", line},
		"BadName":         {one(`{name: "n n", cron: "@daily", thread: "console:x", text: "go a"}`), "schedules[0].name", "letters, digits", line},
		"MissingCron":     {one(`{name: n, thread: "console:x", text: "go a"}`), "schedules[0].cron", "missing required value", line},
		"BadMissed":       {one(`{name: n, cron: "@daily", thread: "console:x", text: "go a", missed: catch_up}`), "schedules[0].missed", "must be one of skip, run_once", line},
		"BadOverlap":      {one(`{name: n, cron: "@daily", thread: "console:x", text: "go a", overlap: replace}`), "schedules[0].overlap", "must be one of skip, queue", line},
		"TextRoutesNowhere": {one(`{name: n, cron: "@daily", thread: "console:x", text: "frobnicate"}`), "schedules[0].text",
			"matches no flow command and no agent is the default", line},
		"DuplicateName": {scheduleBase + "schedules:\n  - {name: n, cron: \"@daily\", thread: \"console:x\", text: \"go a\"}\n  - {name: n, cron: \"@hourly\", thread: \"console:y\", text: \"go b\"}\n",
			"schedules[1].name", `duplicate schedule name "n" (also schedules[0])`, line + 1},
		"NotARequester": {withConsole(`["console:alice"]`) + "schedules:\n  - {name: n, cron: \"@daily\", thread: \"console:x\", text: \"go a\"}\n",
			"schedules[0].thread", `schedule:n may not start runs in channel console, so every tick would be refused: add "schedule:n" to channels.console.requesters`, line + 1},
		"RequesterUnknownSchedule": {withConsole(`["schedule:nope"]`),
			"channels.console.requesters[0]", `unknown schedule "nope"`, 14},
		"ScheduleAsApprover": {scheduleBase + "approvers:\n  groups:\n    sre: [\"schedule:n\"]\n",
			"approvers.groups.sre[0]", "a schedule requests runs but never decides", 16},
		"ScheduleAsPerson": {scheduleBase + "people:\n  bot: [\"schedule:n\"]\n", "people.bot[0]", "never decides", 15},
		"TokenActsAsSchedule": {scheduleBase + "api:\n  tokens:\n    - {name: a, token: x, actor: \"schedule:n\"}\n",
			"api.tokens[0].actor", "a token may not act as a schedule", 16},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wantProblem(t, tc.src, tc.path, tc.line, tc.msg)
		})
	}
}
