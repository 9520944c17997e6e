// Package schedule fires the configured schedules' ticks (CONTRACT.md
// "Schedules"): at each tick of a cron expression, in its timezone, a
// schedule sends its text (or its prompt to its agent) into its thread as
// the requester "schedule:<name>", handled exactly like a chat message.
//
// Exactly once per tick, across restarts and replicas: a tick is claimed
// like a run, by a guarded write in the one transaction that also records
// its event and the run it starts (Store.ScheduleTick). The guard is the
// schedule's stored next tick (a compare-and-set, so two replicas that see
// the same tick serialize and the second finds it handled) and the tick's
// row, unique on (schedule, tick time); the event id
// "schedule:<name>:<tick RFC 3339>" makes the inbox's own deduplication
// hold too. A process killed before that transaction commits has written
// nothing, and whichever replica looks next fires the tick; killed after,
// the tick is handled and nobody fires it again.
//
// docs/schedules.md is the operator's reference.
package schedule

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// Missed says what happens to ticks that passed while no replica was up.
type Missed string

// The missed-tick policies.
const (
	// MissedSkip fires only a tick found on time (within MissedAfter);
	// ticks found later are recorded as missed and never run.
	MissedSkip Missed = "skip"
	// MissedRunOnce fires once for all the ticks that passed: the latest.
	MissedRunOnce Missed = "run_once"
)

// Overlap says what a tick does while the schedule's previous run is not
// final (still queued, running or waiting on an approval or a question).
type Overlap string

// The overlap policies.
const (
	// OverlapSkip records the tick as skipped and starts nothing.
	OverlapSkip Overlap = "skip"
	// OverlapQueue starts the run queued: it begins when the runs before
	// it in the thread are done (a thread runs one run at a time). At
	// most one run of a schedule waits so; a tick finding its previous
	// run still queued is skipped, so a long wait never piles up runs.
	OverlapQueue Overlap = "queue"
)

// Schedule is one configured schedule (the schedules: section).
type Schedule struct {
	// Name is unique; the runs' requester is "schedule:<Name>".
	Name string
	// Cron is five fields ("0 3 * * *"), "@every <duration>", or a
	// descriptor (@hourly, @daily, @weekly, @monthly, @yearly).
	Cron string
	// Timezone is an IANA zone the five fields are read in; "" is UTC.
	Timezone string
	// Thread is where it posts and asks: "<channel>:<key>".
	Thread string
	// Text is handled like a chat message: a flow command, or a prompt
	// for the default agent. Exclusive with Agent and Prompt.
	Text string
	// Agent and Prompt make each tick a turn of that agent.
	Agent, Prompt string
	// Missed and Overlap are the policies; "" means skip.
	Missed  Missed
	Overlap Overlap
}

// ErrConfig is the sentinel of a schedule's configuration problems
// (Validate); errors.Is matches it.
var ErrConfig = errors.New("schedule: invalid configuration")

// Bounds of a schedule's values.
const (
	// MaxText caps a schedule's text or prompt, like a console message.
	MaxText = 16 << 10
	// MaxThread caps the thread address.
	MaxThread = 512
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Identity is the requester of a schedule's runs: "schedule:<name>". It is
// a requester policy and channels.<name>.requesters can name, and never an
// approver (approvals.NeverDecides).
func Identity(name string) string { return approvals.SchedulePrefix + name }

// EventID is the inbox event id of a schedule's tick at at:
// "schedule:<name>:<at in RFC 3339, UTC>" (fractions only for a manual
// run's tick, which is not on a whole second).
func EventID(name string, at time.Time) string {
	return Identity(name) + ":" + at.UTC().Format(time.RFC3339Nano)
}

// Validate reports every problem of s as a *core.ConfigError whose fields
// are the YAML keys under schedules[i]; config check and New run it.
func (s Schedule) Validate() error {
	var ps []core.ConfigProblem
	add := func(field, format string, args ...any) {
		ps = append(ps, core.ConfigProblem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if !nameRE.MatchString(s.Name) {
		add("name", "must be 1-64 letters, digits, '_' or '-', not %q", s.Name)
	}
	loc, err := LoadLocation(s.Timezone)
	if err != nil {
		add("timezone", "%v", err)
		loc = time.UTC
	}
	if _, err := ParseCron(s.Cron, loc); err != nil {
		add("cron", "%v", err)
	}
	if msg := threadProblem(s.Thread); msg != "" {
		add("thread", "%s", msg)
	}
	switch {
	case s.Text != "" && (s.Agent != "" || s.Prompt != ""):
		add("text", "set text, or agent and prompt, not both")
	case s.Text == "" && s.Agent == "" && s.Prompt == "":
		add("text", "missing: set text (handled like a chat message), or agent and prompt")
	case s.Agent != "" && s.Prompt == "":
		add("prompt", "missing: an agent's schedule needs the prompt it sends")
	case s.Prompt != "" && s.Agent == "":
		add("agent", "missing: a prompt goes to the agent named here (or write it as text for the default agent)")
	}
	for field, v := range map[string]string{"text": s.Text, "prompt": s.Prompt} {
		if len(v) > MaxText {
			add(field, "is %d bytes; the limit is %d", len(v), MaxText)
		}
	}
	switch s.Missed {
	case "", MissedSkip, MissedRunOnce:
	default:
		add("missed", "must be skip or run_once, not %q", s.Missed)
	}
	switch s.Overlap {
	case "", OverlapSkip, OverlapQueue:
	default:
		add("overlap", "must be skip or queue, not %q", s.Overlap)
	}
	return core.ConfigErrorOf(ErrConfig, ps)
}

// threadProblem explains why s is not a thread address, or "".
func threadProblem(s string) string {
	th, err := core.ParseThread(s)
	switch {
	case err != nil:
		return fmt.Sprintf("must be <channel>:<key> like console:nightly or slack:T0123/C0123ABCD/1712345678.000100, not %q", s)
	case len(s) > MaxThread:
		return fmt.Sprintf("is %d bytes; the limit is %d", len(s), MaxThread)
	case strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f || r == ' ' }):
		return fmt.Sprintf("must not contain spaces or control characters: %q", s)
	case !nameRE.MatchString(th.Channel):
		return fmt.Sprintf("channel %q must be a channel name like console or slack", th.Channel)
	}
	return ""
}
