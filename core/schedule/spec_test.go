package schedule_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/schedule"
)

func TestParseCron(t *testing.T) {
	t.Parallel()
	from := at(3, 0, 0)
	for expr, next := range map[string]time.Time{
		"0 3 * * *":       at(3, 0, 0).Add(24 * time.Hour),
		"*/15 * * * *":    at(3, 15, 0),
		"0 9 * * mon-fri": at(9, 0, 0), // 2030-01-02 is a Wednesday
		"@hourly":         at(4, 0, 0),
		"@daily":          at(0, 0, 0).Add(24 * time.Hour),
		"@midnight":       at(0, 0, 0).Add(24 * time.Hour),
		"@weekly":         time.Date(2030, 1, 6, 0, 0, 0, 0, time.UTC),
		"@monthly":        time.Date(2030, 2, 1, 0, 0, 0, 0, time.UTC),
		"@yearly":         time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC),
		"@every 10m":      at(3, 10, 0),
		" @every 90s ":    at(3, 1, 30),
	} {
		sp, err := schedule.ParseCron(expr, time.UTC)
		if err != nil {
			t.Errorf("ParseCron(%q): %v", expr, err)
			continue
		}
		if got := sp.Next(from); !got.Equal(next) {
			t.Errorf("ParseCron(%q).Next(%s) = %s, want %s", expr, from, got, next)
		}
	}
	for expr, want := range map[string]string{
		"":                 "missing",
		"   ":              "missing",
		"* * * *":          "expected exactly 5 fields",
		"* * * * * *":      "expected exactly 5 fields",
		"61 * * * *":       "above maximum",
		"@every 500ms":     "whole number of seconds",
		"@every 1.5s":      "whole number of seconds",
		"@every -1m":       "whole number of seconds",
		"@every":           "unrecognized descriptor",
		"@every soon":      "whole number of seconds",
		"@fortnightly":     "unrecognized descriptor",
		"TZ=UTC 0 3 * * *": "set timezone",
		"CRON_TZ=UTC":      "set timezone",
		"0 0 30 2 *":       "never fires",
	} {
		_, err := schedule.ParseCron(expr, time.UTC)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseCron(%q) = %v, want an error saying %q", expr, err, want)
		}
	}
}

// TestTimezoneIsTheFieldsZone: "0 3 * * *" in Europe/Berlin is 02:00 UTC
// in winter and 01:00 UTC in summer; "@every" ignores zones.
func TestTimezoneIsTheFieldsZone(t *testing.T) {
	t.Parallel()
	berlin, err := schedule.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := schedule.ParseCron("0 3 * * *", berlin)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sp.Next(at(0, 0, 0)), at(2, 0, 0); !got.Equal(want) {
		t.Errorf("winter: next = %s, want %s", got, want)
	}
	july := time.Date(2030, 7, 1, 0, 0, 0, 0, time.UTC)
	if got, want := sp.Next(july), july.Add(time.Hour); !got.Equal(want) {
		t.Errorf("summer: next = %s, want %s", got, want)
	}
	if got := sp.Next(july); got.Location() != time.UTC {
		t.Errorf("next is in %s, want UTC", got.Location())
	}
	for name, ok := range map[string]bool{"": true, "UTC": true, "America/New_York": true, "Local": false, "Mars/Olympus": false, "europe/berlin": false} {
		if _, err := schedule.LoadLocation(name); (err == nil) != ok {
			t.Errorf("LoadLocation(%q) = %v, want ok %v", name, err, ok)
		}
	}
}

// TestDue: the latest due tick and how many it passes over, for calendar
// and @every schedules, bounded for a schedule months behind.
func TestDue(t *testing.T) {
	t.Parallel()
	hourly, _ := schedule.ParseCron("0 * * * *", time.UTC)
	latest, passed, more := schedule.Due(hourly, at(3, 0, 0), at(6, 30, 0))
	if !latest.Equal(at(6, 0, 0)) || passed != 3 || more {
		t.Errorf("hourly 03:00..06:30 = %s, %d, %v; want 06:00, 3, false", latest, passed, more)
	}
	if latest, passed, _ := schedule.Due(hourly, at(3, 0, 0), at(3, 0, 0)); !latest.Equal(at(3, 0, 0)) || passed != 0 {
		t.Errorf("tick at its own time = %s, %d", latest, passed)
	}
	if latest, _, _ := schedule.Due(hourly, at(4, 0, 0), at(3, 59, 59)); !latest.IsZero() {
		t.Errorf("a tick not yet due gave %s", latest)
	}
	every, _ := schedule.ParseCron("@every 7m", time.UTC)
	first := at(3, 0, 1) // anchored where it was first stored
	latest, passed, _ = schedule.Due(every, first, at(4, 0, 0))
	if !latest.Equal(at(3, 56, 1)) || passed != 8 {
		t.Errorf("@every 7m from 03:00:01 to 04:00 = %s, %d; want 03:56:01, 8", latest, passed)
	}
	if next := every.Next(latest); !next.Equal(at(4, 3, 1)) {
		t.Errorf("@every keeps its anchor: next = %s, want 04:03:01", next)
	}
	minutely, _ := schedule.ParseCron("* * * * *", time.UTC)
	now := at(3, 0, 30).Add(200 * 24 * time.Hour)
	latest, passed, more = schedule.Due(minutely, at(3, 0, 0), now)
	if !latest.Equal(now.Truncate(time.Minute)) || !more || passed < 10_000 {
		t.Errorf("minutely 200 days behind = %s, %d, %v; want %s, at least 10000, more", latest, passed, more, now.Truncate(time.Minute))
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	good := schedule.Schedule{Name: "nightly-cleanup", Cron: "0 3 * * *", Timezone: "Europe/Berlin", Thread: "console:nightly",
		Text: "cleanup tmp", Missed: schedule.MissedSkip, Overlap: schedule.OverlapQueue}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid schedule: %v", err)
	}
	agent := good
	agent.Text, agent.Agent, agent.Prompt = "", "ops", "check disks"
	if err := agent.Validate(); err != nil {
		t.Fatalf("valid agent schedule: %v", err)
	}
	for name, c := range map[string]struct {
		edit  func(*schedule.Schedule)
		field string
	}{
		"BadName":          {func(s *schedule.Schedule) { s.Name = "night ly" }, "name"},
		"BadCron":          {func(s *schedule.Schedule) { s.Cron = "0 25 * * *" }, "cron"},
		"UnknownTimezone":  {func(s *schedule.Schedule) { s.Timezone = "Europe/Atlantis" }, "timezone"},
		"ThreadNoChannel":  {func(s *schedule.Schedule) { s.Thread = "nightly" }, "thread"},
		"ThreadSpace":      {func(s *schedule.Schedule) { s.Thread = "console:night ly" }, "thread"},
		"ThreadBadChannel": {func(s *schedule.Schedule) { s.Thread = "con sole:x" }, "thread"},
		"TextAndAgent":     {func(s *schedule.Schedule) { s.Agent, s.Prompt = "ops", "x" }, "text"},
		"Nothing":          {func(s *schedule.Schedule) { s.Text = "" }, "text"},
		"AgentNoPrompt":    {func(s *schedule.Schedule) { s.Text, s.Agent = "", "ops" }, "prompt"},
		"PromptNoAgent":    {func(s *schedule.Schedule) { s.Text, s.Prompt = "", "x" }, "agent"},
		"TextTooLong":      {func(s *schedule.Schedule) { s.Text = strings.Repeat("x", schedule.MaxText+1) }, "text"},
		"BadMissed":        {func(s *schedule.Schedule) { s.Missed = "catch_up" }, "missed"},
		"BadOverlap":       {func(s *schedule.Schedule) { s.Overlap = "replace" }, "overlap"},
	} {
		t.Run(name, func(t *testing.T) {
			s := good
			c.edit(&s)
			err := s.Validate()
			var ce *core.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, schedule.ErrConfig) {
				t.Fatalf("Validate = %v, want a *core.ConfigError of ErrConfig", err)
			}
			if len(ce.Problems) != 1 || ce.Problems[0].Field != c.field {
				t.Errorf("problems = %+v, want one at %q", ce.Problems, c.field)
			}
		})
	}
}

func TestEventIDAndIdentity(t *testing.T) {
	t.Parallel()
	if got := schedule.EventID("nightly", at(3, 0, 0)); got != "schedule:nightly:2030-01-02T03:00:00Z" {
		t.Errorf("EventID = %q", got)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	if got := schedule.EventID("nightly", at(3, 0, 0).In(berlin)); got != "schedule:nightly:2030-01-02T03:00:00Z" {
		t.Errorf("EventID of a zoned time = %q, want it in UTC", got)
	}
	if got := schedule.Identity("nightly"); got != "schedule:nightly" {
		t.Errorf("Identity = %q", got)
	}
}

// FuzzParseCron: no expression crashes the parser, and one it accepts
// gives ticks after the time asked, in UTC.
func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"0 3 * * *", "*/5 1-3 * jan-mar mon", "@every 1h30m", "@daily", "TZ=", "CRON_TZ=X", "@every 0s",
		"0 0 31 2,4 *", "*/0 * * * *", "5-2 * * * *", "? ? ? ? ?", "L W * * *", "0 0 1 1 7"} {
		f.Add(s, "Europe/Berlin")
	}
	f.Fuzz(func(t *testing.T, expr, tz string) {
		loc, err := schedule.LoadLocation(tz)
		if err != nil {
			loc = time.UTC
		}
		sp, err := schedule.ParseCron(expr, loc)
		if err != nil {
			return
		}
		from := at(3, 4, 5)
		if next := sp.Next(from); !next.IsZero() && (!next.After(from) || next.Location() != time.UTC) {
			t.Errorf("ParseCron(%q).Next(%s) = %s", expr, from, next)
		}
	})
}
