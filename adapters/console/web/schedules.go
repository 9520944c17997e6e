package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/authority"
	"github.com/opsgate/opsgate/core/schedule"
)

// Schedules is what the schedules page lists and drives: the API's seam,
// so the console and the API cannot disagree (core/schedule's Scheduler).
type Schedules = api.Schedules

// scheduleRow is one schedule on the schedules page.
type scheduleRow struct {
	Name, Cron, Timezone, Thread, Agent, Missed, Overlap string
	// NextAt and LastAt are RFC 3339, "" for none (paused, never fired).
	NextAt, LastAt string
	LastRunID      string
	Paused         bool
	PausedBy       string
	// ChatKey links a console thread to its chat page.
	ChatKey string
}

func newScheduleRow(st schedule.Status) scheduleRow {
	row := scheduleRow{Name: st.Name, Cron: st.Cron, Timezone: st.Timezone, Thread: st.Thread.String(), Agent: st.Agent,
		Missed: string(st.Missed), Overlap: string(st.Overlap), LastRunID: st.LastRunID, Paused: st.Paused, PausedBy: st.PausedBy}
	if st.Thread.Channel == Channel {
		row.ChatKey = st.Thread.Key
	}
	if !st.NextAt.IsZero() {
		row.NextAt = st.NextAt.UTC().Format(time.RFC3339)
	}
	if !st.LastAt.IsZero() {
		row.LastAt = st.LastAt.UTC().Format(time.RFC3339)
	}
	return row
}

// schedulesPage lists the schedules with their next and last fire time;
// a session whose token may administer (authority.Administer) also gets
// run, pause and resume.
func (s *server) schedulesPage(w http.ResponseWriter, r *http.Request) {
	var rows []scheduleRow
	if s.o.Schedules != nil {
		list, err := s.o.Schedules.List(r.Context())
		if err != nil {
			s.fail(w, r, fmt.Errorf("web: list schedules: %w", err))
			return
		}
		for _, st := range list {
			rows = append(rows, newScheduleRow(st))
		}
	}
	q := r.URL.Query()
	s.render(w, r, http.StatusOK, "schedules", map[string]any{"Title": "Schedules", "Rows": rows,
		"Admin": s.auth.Check(infoFrom(r.Context()).auth, authority.Administer) == nil, "Done": q.Get("done"), "What": q.Get("what"), "Run": q.Get("run")})
}

// scheduleAction runs, pauses or resumes one schedule (audited by the
// scheduler) and goes back to the list, saying what happened.
func (s *server) scheduleAction(w http.ResponseWriter, r *http.Request) {
	name, action := r.PathValue("name"), r.PathValue("action")
	if s.o.Schedules == nil {
		s.plainError(w, http.StatusNotFound, "Not found.")
		return
	}
	actor := infoFrom(r.Context()).actor
	back := url.Values{"done": {name}, "what": {action}}
	var err error
	switch action {
	case "run":
		var tk schedule.Tick
		tk, err = s.o.Schedules.RunNow(r.Context(), name, actor)
		back.Set("what", string(tk.Status))
		back.Set("run", tk.RunID)
	case "pause":
		_, err = s.o.Schedules.Pause(r.Context(), name, actor)
		back.Set("what", "paused")
	case "resume":
		_, err = s.o.Schedules.Resume(r.Context(), name, actor)
		back.Set("what", "resumed")
	default:
		s.plainError(w, http.StatusNotFound, "Not found.")
		return
	}
	switch {
	case errors.Is(err, schedule.ErrOverlap):
		s.plainError(w, http.StatusConflict, "Not run: "+err.Error()+".")
		return
	case err != nil:
		s.fail(w, r, fmt.Errorf("web: schedule %s %s: %w", name, action, err))
		return
	}
	http.Redirect(w, r, "/schedules?"+back.Encode(), http.StatusSeeOther)
}
