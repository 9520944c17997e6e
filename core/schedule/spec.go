package schedule

import (
	"fmt"
	"strings"
	"time"
	// Timezones mean the same on every replica, whatever zone files the
	// host (or a minimal container image) has.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// parser reads the five standard fields and the descriptors (@every,
// @daily, …): robfig/cron's parser, not one of our own.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Spec is a parsed cron expression in its timezone.
type Spec struct {
	s cron.Schedule
	// every is the period of an "@every" spec, whose ticks are a fixed
	// distance apart from the first one rather than on the calendar.
	every time.Duration
}

// LoadLocation reads a schedule's timezone: "" is UTC; "Local" is refused,
// because it differs between machines and replicas must agree.
func LoadLocation(name string) (*time.Location, error) {
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, fmt.Errorf("name a zone like Europe/Berlin: Local differs between machines")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown timezone %q (want an IANA name like Europe/Berlin or America/New_York)", name)
	}
	return loc, nil
}

// ParseCron parses expr — five fields, "@every <duration>" (whole seconds,
// at least 1s) or a descriptor — with its five fields read in loc. An
// expression that never fires ("0 0 30 2 *") is refused.
func ParseCron(expr string, loc *time.Location) (Spec, error) {
	e := strings.TrimSpace(expr)
	switch {
	case e == "":
		return Spec{}, fmt.Errorf("missing: five fields like \"0 3 * * *\", or @every 10m, @hourly, @daily")
	case strings.HasPrefix(e, "TZ=") || strings.HasPrefix(e, "CRON_TZ="):
		return Spec{}, fmt.Errorf("%q: set timezone instead of a TZ= prefix", expr)
	}
	var sp Spec
	if rest, ok := strings.CutPrefix(e, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil || d < time.Second || d%time.Second != 0 {
			return Spec{}, fmt.Errorf("%q: @every takes a whole number of seconds, at least 1s (e.g. @every 10m)", expr)
		}
		sp.every = d
	}
	s, err := parser.Parse(e)
	if err != nil {
		return Spec{}, fmt.Errorf("%q: %v", expr, err)
	}
	if ss, ok := s.(*cron.SpecSchedule); ok {
		ss.Location = loc
	}
	sp.s = s
	if sp.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return Spec{}, fmt.Errorf("%q never fires", expr)
	}
	return sp, nil
}

// Next returns the first tick after t (zero if there is none within five
// years, which ParseCron refuses).
func (sp Spec) Next(t time.Time) time.Time {
	if sp.every > 0 {
		return t.Truncate(time.Second).Add(sp.every).UTC()
	}
	return sp.s.Next(t).UTC()
}

// maxScan bounds one walk over a five-field schedule's ticks (about a week
// of a per-minute schedule); a day holds at most 1,440 of them, so the
// walk after the jump in due always ends.
const maxScan = 10_000

// due finds, among the ticks from first (itself a tick) up to now, the
// latest and how many earlier ones it passes over. more says the count is
// a lower bound: the schedule was so far behind that the walk jumped to
// the last day.
func (sp Spec) due(first, now time.Time) (latest time.Time, passed int, more bool) {
	if first.After(now) {
		return time.Time{}, 0, false
	}
	if sp.every > 0 {
		k := now.Sub(first) / sp.every
		return first.Add(k * sp.every), int(k), false
	}
	t := first
	scan := func() bool {
		for range maxScan {
			n := sp.Next(t)
			if n.IsZero() || n.After(now) {
				return true
			}
			t = n
			passed++
		}
		return false
	}
	if scan() {
		return t, passed, false
	}
	if j := sp.Next(now.Add(-24 * time.Hour)); !j.IsZero() && j.After(t) && !j.After(now) {
		t = j
		passed++
	}
	scan()
	return t, passed, true
}
