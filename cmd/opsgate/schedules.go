package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/schedule"
)

// buildScheduler makes the scheduler of cfg's schedules over the engine
// (which routes each tick like a chat message) and the store (which makes
// each tick fire once across replicas).
func buildScheduler(cfg *config.Config, st schedule.Store, inbox schedule.Inbox, owner string, log *slog.Logger) (*schedule.Scheduler, error) {
	s, err := schedule.New(schedule.Options{Store: st, Inbox: inbox, Owner: owner, Logger: log}, cfg.ScheduleList())
	if err != nil {
		return nil, fmt.Errorf("schedules: %w", err)
	}
	if n := len(cfg.Schedules); n > 0 {
		log.Info("schedules loaded", "schedules", n)
	}
	return s, nil
}

// cmdSchedules is `opsgate schedules list|run|pause|resume`, over the
// server's API (docs/schedules.md).
func cmdSchedules(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	change := func(verb, summary, about string) adminSub {
		return adminSub{name: verb, args: "NAME", summary: summary, about: about,
			flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
				return func(ctx context.Context, a *adminCall, pos []string) error {
					var v api.ScheduleView
					if done, err := a.call(ctx, "schedules "+verb+" "+pos[0], "POST",
						"/api/v1/schedules/"+url.PathEscape(pos[0])+"/"+verb, nil, map[string]any{}, &v); done {
						return err
					}
					printSchedules(a.stdout, []api.ScheduleView{v})
					return nil
				}
			}}
	}
	subs := []adminSub{
		{name: "list", summary: "schedules with their next and last fire time", about: "Lists the configured schedules: cron, timezone, thread, next and last fire time, paused.",
			flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
				return func(ctx context.Context, a *adminCall, _ []string) error {
					var page struct {
						Items []api.ScheduleView `json:"items"`
					}
					if done, err := a.call(ctx, "schedules list", "GET", "/api/v1/schedules", nil, nil, &page); done {
						return err
					}
					printSchedules(a.stdout, page.Items)
					return nil
				}
			}},
		{name: "run", args: "NAME", summary: "fire a schedule once, now (scope admin)",
			about: "Fires the schedule once, now, as schedule:NAME, even while paused; its cron's next tick stays.\nThe overlap policy applies: a run it holds back is refused (exit 1). Audited.",
			flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
				return func(ctx context.Context, a *adminCall, pos []string) error {
					var v api.ScheduleRunView
					if done, err := a.call(ctx, "schedules run "+pos[0], "POST", "/api/v1/schedules/"+url.PathEscape(pos[0])+"/run",
						nil, map[string]any{}, &v); done {
						return err
					}
					switch {
					case v.Run != nil:
						fmt.Fprintf(a.stdout, "schedule %s fired at %s: run %s (%s)\n", v.Name, v.TickAt, v.Run.ID, v.Run.Status)
					case v.Reason != "":
						fmt.Fprintf(a.stdout, "schedule %s %s at %s, no run: %s\n", v.Name, v.Status, v.TickAt, v.Reason)
					default:
						fmt.Fprintf(a.stdout, "schedule %s %s at %s; it started no run (see its thread)\n", v.Name, v.Status, v.TickAt)
					}
					return nil
				}
			}},
		change("pause", "stop a schedule's ticks until resumed (scope admin)",
			"Pauses the schedule on every replica, across restarts, until resumed. Audited."),
		change("resume", "start a paused schedule's ticks again (scope admin)",
			"Resumes the schedule from its next tick; ticks that passed while paused are not run. Audited."),
	}
	return runAdmin(ctx, "schedules", "List, run, pause and resume schedules, over the server's API.", subs, args, stdout, stderr)
}

func printSchedules(w io.Writer, items []api.ScheduleView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCRON\tTIMEZONE\tTHREAD\tNEXT\tLAST\tLAST RUN\tSTATE")
	for _, s := range items {
		state := "active"
		if s.Paused {
			state = "paused by " + s.PausedBy
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Cron, s.Timezone, s.Thread, fmtTimeStr(s.NextAt),
			fmtTimeStr(s.LastAt), orDash(s.LastRunID), state)
	}
	_ = tw.Flush()
}

// fmtTimeStr shows an API time (RFC 3339) to the second, "-" for none.
func fmtTimeStr(s *string) string {
	if s == nil {
		return "-"
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return *s
	}
	return fmtTime(t)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
