package mcp

import (
	"context"
	"errors"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
)

type runOut struct {
	Run *runView `json:"run"`
}

// flowTool starts flowName with intent: a console message in a thread of
// its own (so an agent's runs do not queue behind each other), exactly as
// a person would type it, routed by the same router.
func (s *Server) flowTool(ctx context.Context, x *call) (any, *toolErr) {
	name := x.str("flowName")
	f := s.byName[name]
	if f == nil {
		return nil, errf("not_found", "no flow %q (list_workflows lists them)", name)
	}
	intent := strings.TrimSpace(x.str("intent"))
	text := intent
	if _, ok := f.pattern.Match(text); !ok {
		text = strings.TrimSpace(leadingLiterals(f) + " " + intent)
	}
	if _, ok := f.pattern.Match(text); !ok {
		return nil, errf("invalid_intent", "%q does not fit %s: usage %s", intent, f.Name, f.Usage)
	}
	id := randomID()
	rc, err := s.o.Engine.HandleEvent(ctx, core.ChannelEvent{
		Channel: core.ConsoleChannel, EventID: "mcp-" + id, Actor: x.c.actor,
		Thread: core.Thread{Channel: core.ConsoleChannel, Key: "mcp-" + id[:12]}, Text: text, ReceivedAt: s.o.Now().UTC(),
	})
	if err != nil {
		return nil, s.internalError("flow", err)
	}
	if rc.Refused {
		return nil, errf("not_allowed", "this token's actor may not start runs (channels.console.requesters)")
	}
	if rc.RunID == "" {
		return nil, errf("invalid_intent", "%q started no run of %s: usage %s", intent, f.Name, f.Usage)
	}
	x.runID = rc.RunID
	r, err := s.settle(ctx, rc.RunID)
	if err != nil {
		return nil, s.internalError("flow", err)
	}
	if r.Flow != f.Name {
		// Another flow's command matched first; the run it started is
		// still the caller's.
		v, verr := s.runView(ctx, x.c, r)
		if verr != nil {
			return nil, s.internalError("flow", verr)
		}
		return runOut{Run: v}, errf("invalid_intent", "the text %q started flow %s, not %s", text, r.Flow, f.Name)
	}
	if tp := x.traceparent(); tp != "" {
		if ts, ok := s.o.Store.(core.RunTraceStore); ok {
			if err := ts.RunTraceSet(ctx, r.ID, tp); err != nil {
				return nil, s.internalError("flow", err)
			}
		}
	}
	v, err := s.runView(ctx, x.c, r)
	if err != nil {
		return nil, s.internalError("flow", err)
	}
	if !r.Status.Final() && v.PendingAgentCall == nil && s.wantsTask(x) {
		// A person (or the rest of the run) is awaited: a task client
		// follows it with tasks/get instead of polling get_run.
		return nil, s.createTask(ctx, x, &core.MCPTask{Tool: "flow", RunID: r.ID})
	}
	return runOut{Run: v}, nil
}

// settled reports whether a run stopped moving on its own: it ended, or
// it waits for someone (an approval, a question, an agent's work).
func settled(r *core.Run) bool {
	return r.Status.Final() || r.Status == core.RunWaitingApproval || r.Status == core.RunWaitingInput
}

// runEventSubscriber and topicSubscriber are the optional wake-ups of a
// Store (store/sqlstore has both): a commit of the run's events, or of
// any run's.
type runEventSubscriber interface {
	SubscribeRunEvents(runID string) (<-chan struct{}, func())
}

type topicSubscriber interface {
	Subscribe(topic string) (<-chan struct{}, func())
}

// subscribe wakes on commits of id's events, as narrowly as the store can;
// the poll of the callers covers a store without wake-ups.
func (s *Server) subscribe(id string) (<-chan struct{}, func()) {
	switch st := s.o.Store.(type) {
	case runEventSubscriber:
		return st.SubscribeRunEvents(id)
	case topicSubscriber:
		return st.Subscribe(core.TopicEvents)
	}
	return nil, func() {}
}

// settle waits, at most Options.FlowWait, for run id to settle, woken by
// its events; it returns the run as it is then.
func (s *Server) settle(ctx context.Context, id string) (*core.Run, error) {
	wake, cancel := s.subscribe(id)
	defer cancel()
	limit := time.NewTimer(max(s.o.FlowWait, 0))
	defer limit.Stop()
	poll := time.NewTicker(s.o.PollInterval)
	defer poll.Stop()
	for {
		r, err := s.o.Store.RunGet(ctx, id)
		if err != nil || settled(r) {
			return r, err
		}
		select {
		case <-ctx.Done():
			return r, nil
		case <-limit.C:
			return r, nil
		case <-wake:
		case <-poll.C:
		}
	}
}

// leadingLiterals is the command words before the first placeholder.
func leadingLiterals(f *flowView) string {
	var words []string
	for _, w := range strings.Fields(f.Usage) {
		if strings.HasPrefix(w, "<") || strings.HasPrefix(w, "[") {
			break
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}

func (s *Server) listWorkflows(_ context.Context, x *call) (any, *toolErr) {
	out := make([]flowView, len(s.flows))
	copy(out, s.flows)
	return struct {
		Workflows []flowView `json:"workflows"`
	}{out}, nil
}

func (s *Server) getRun(ctx context.Context, x *call) (any, *toolErr) {
	r, te := s.visibleRun(ctx, x, x.str("runId"))
	if te != nil {
		return nil, te
	}
	v, err := s.runView(ctx, x.c, r)
	if err != nil {
		return nil, s.internalError("get_run", err)
	}
	return runOut{Run: v}, nil
}

func (s *Server) listRuns(ctx context.Context, x *call) (any, *toolErr) {
	p := core.RunListParams{Flow: x.str("flowName"), Limit: maxRuns, Requester: s.auth.RunFilter(x.c.auth)}
	runs, _, err := s.o.Store.RunList(ctx, p)
	if err == nil {
		runs, err = s.auth.Viewer(x.c.auth).Runs(ctx, runs)
	}
	if err != nil {
		return nil, s.internalError("list_runs", err)
	}
	out := make([]runMeta, 0, len(runs))
	for _, r := range runs {
		n := 0
		if !r.Status.Final() {
			acts, _, err := s.pendingActions(ctx, x.c, r)
			if err != nil {
				return nil, s.internalError("list_runs", err)
			}
			n = len(acts)
		}
		out = append(out, newRunMeta(r, n))
	}
	return struct {
		Runs []runMeta `json:"runs"`
	}{out}, nil
}

func (s *Server) cancelRun(ctx context.Context, x *call) (any, *toolErr) {
	r, te := s.authorizedRun(ctx, x, authority.Cancel, x.str("runId"))
	if te != nil {
		return nil, te
	}
	got, err := s.o.Engine.Cancel(ctx, r.ID, x.c.actor)
	if errors.Is(err, core.ErrConflict) {
		v, verr := s.runView(ctx, x.c, got)
		if verr != nil || got == nil {
			return nil, errf("conflict", "run %s has already ended", r.ID)
		}
		return runOut{Run: v}, errf("conflict", "run %s has already ended (%s)", r.ID, got.Status)
	}
	if err != nil {
		return nil, s.internalError("cancel_run", err)
	}
	v, err := s.runView(ctx, x.c, got)
	if err != nil {
		return nil, s.internalError("cancel_run", err)
	}
	return runOut{Run: v}, nil
}

type serviceView struct {
	Name             string   `json:"name"`
	Version          string   `json:"version"`
	Endpoint         string   `json:"endpoint"`
	ProtocolVersions []string `json:"protocolVersions"`
	Actor            string   `json:"actor"`
	Scopes           []string `json:"scopes"`
	ReadsAll         bool     `json:"readsAll"`
	Store            string   `json:"store"`
	Flows            int      `json:"flows"`
	Time             string   `json:"time"`
}

func (s *Server) status(ctx context.Context, x *call) (any, *toolErr) {
	v := serviceView{Name: "opsgate", Version: s.o.Version, Endpoint: x.ep.path, ProtocolVersions: sdk.SupportedProtocolVersions(),
		Actor: x.c.actor.ID, Scopes: []string{}, ReadsAll: x.c.auth.ReadsAll(), Store: "ok", Flows: len(s.flows), Time: rfc3339(s.o.Now())}
	if v.Version == "" {
		v.Version = "dev"
	}
	for _, sc := range x.c.scopes {
		v.Scopes = append(v.Scopes, string(sc))
	}
	if err := s.o.Store.Ping(ctx); err != nil {
		v.Store = "unreachable"
	}
	return struct {
		Service serviceView `json:"service"`
	}{v}, nil
}
