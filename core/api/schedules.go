package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
	"github.com/opsgate/opsgate/core/schedule"
)

// Schedules is what the schedule endpoints drive (core/schedule's
// Scheduler implements it; docs/schedules.md):
//
//	GET  /api/v1/schedules               → {"items":[schedule…],"next_cursor":""}
//	POST /api/v1/schedules/{name}/run    → {"name","tick_at","status","reason","run"}; 409 overlap
//	POST /api/v1/schedules/{name}/pause  → the schedule
//	POST /api/v1/schedules/{name}/resume → the schedule
//
// Unknown names are 404. Pause, resume and run are audited with the
// token's actor.
type Schedules interface {
	List(ctx context.Context) ([]schedule.Status, error)
	RunNow(ctx context.Context, name string, by core.Actor) (schedule.Tick, error)
	Pause(ctx context.Context, name string, by core.Actor) (schedule.Status, error)
	Resume(ctx context.Context, name string, by core.Actor) (schedule.Status, error)
}

// scheduleRoutes registers the schedule endpoints: listing is
// authority.ListSchedules, running, pausing and resuming
// authority.Administer (a schedule's runs act as "schedule:<name>", so
// starting one is acting as someone else).
func (s *server) scheduleRoutes(route func(string, http.HandlerFunc, authority.Action)) {
	route("GET /api/v1/schedules", s.listSchedules, authority.ListSchedules)
	route("POST /api/v1/schedules/{name}/run", s.runSchedule, authority.Administer)
	route("POST /api/v1/schedules/{name}/pause", s.pauseSchedule, authority.Administer)
	route("POST /api/v1/schedules/{name}/resume", s.resumeSchedule, authority.Administer)
}

// ScheduleView is a schedule as the API and the CLI show it. next_at is
// null while paused, last_at before the first fire.
type ScheduleView struct {
	Name      string  `json:"name"`
	Cron      string  `json:"cron"`
	Timezone  string  `json:"timezone"`
	Thread    string  `json:"thread"`
	Agent     string  `json:"agent,omitempty"`
	Missed    string  `json:"missed"`
	Overlap   string  `json:"overlap"`
	NextAt    *string `json:"next_at"`
	LastAt    *string `json:"last_at"`
	LastRunID string  `json:"last_run_id,omitempty"`
	Paused    bool    `json:"paused"`
	PausedBy  string  `json:"paused_by,omitempty"`
}

// NewScheduleView renders a schedule's status.
func NewScheduleView(st schedule.Status) ScheduleView {
	return ScheduleView{Name: st.Name, Cron: st.Cron, Timezone: st.Timezone, Thread: st.Thread.String(), Agent: st.Agent,
		Missed: string(st.Missed), Overlap: string(st.Overlap), NextAt: timePtr(st.NextAt), LastAt: timePtr(st.LastAt),
		LastRunID: st.LastRunID, Paused: st.Paused, PausedBy: st.PausedBy}
}

func timePtr(t time.Time) *string { return rfc3339Ptr(&t) }

// ScheduleRunView is a manual run's answer: the tick and the run it
// started (null when the tick only got a reply or was refused).
type ScheduleRunView struct {
	Name   string   `json:"name"`
	TickAt string   `json:"tick_at"`
	Status string   `json:"status"`
	Reason string   `json:"reason,omitempty"`
	Run    *RunView `json:"run"`
}

func (s *server) schedules(w http.ResponseWriter, r *http.Request) (Schedules, bool) {
	if s.o.Schedules == nil {
		if r.Method == http.MethodGet {
			writeJSON(w, http.StatusOK, listView[ScheduleView]{Items: []ScheduleView{}})
		} else {
			s.fail(w, r, errf(http.StatusNotFound, "not_found", "schedule %q not found (no schedules are configured)", r.PathValue("name")))
		}
		return nil, false
	}
	return s.o.Schedules, true
}

func (s *server) listSchedules(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.schedules(w, r)
	if !ok {
		return
	}
	list, err := sc.List(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	items := make([]ScheduleView, 0, len(list))
	for _, st := range list {
		items = append(items, NewScheduleView(st))
	}
	writeJSON(w, http.StatusOK, listView[ScheduleView]{Items: items})
}

func (s *server) runSchedule(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.schedules(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	tk, err := sc.RunNow(r.Context(), name, actorFrom(r.Context()))
	if err != nil {
		s.scheduleFail(w, r, name, err)
		return
	}
	out := ScheduleRunView{Name: name, TickAt: rfc3339(tk.At), Status: string(tk.Status), Reason: tk.Reason}
	if tk.RunID != "" {
		run, err := s.o.Store.RunGet(r.Context(), tk.RunID)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out.Run = NewRunView(run)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) pauseSchedule(w http.ResponseWriter, r *http.Request) {
	s.changeSchedule(w, r, Schedules.Pause)
}

func (s *server) resumeSchedule(w http.ResponseWriter, r *http.Request) {
	s.changeSchedule(w, r, Schedules.Resume)
}

func (s *server) changeSchedule(w http.ResponseWriter, r *http.Request,
	change func(Schedules, context.Context, string, core.Actor) (schedule.Status, error)) {
	sc, ok := s.schedules(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	st, err := change(sc, r.Context(), name, actorFrom(r.Context()))
	if err != nil {
		s.scheduleFail(w, r, name, err)
		return
	}
	writeJSON(w, http.StatusOK, NewScheduleView(st))
}

// scheduleFail answers a refused schedule operation: 404 for a name no
// configured schedule has, 409 for a run the overlap policy holds back.
func (s *server) scheduleFail(w http.ResponseWriter, r *http.Request, name string, err error) {
	switch {
	case isNotFound(err):
		s.fail(w, r, errf(http.StatusNotFound, "not_found", "schedule %q not found", name))
	case errors.Is(err, schedule.ErrOverlap):
		s.fail(w, r, errf(http.StatusConflict, "overlap", "%v", err))
	case errors.Is(err, core.ErrConflict):
		s.fail(w, r, errf(http.StatusConflict, "conflict", "%v", err))
	default:
		s.fail(w, r, err)
	}
}
