package authority

import (
	"context"
	"errors"
	"fmt"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// Action is what an actor asks to do. Every route of every surface names
// the one action it performs (Route), and every action has one rule here.
type Action string

// The actions.
const (
	// SeeRun reads a run: its steps, events, artifacts, agent tasks.
	SeeRun Action = "see_run"
	// ListRuns lists runs (each one as SeeRun would answer).
	ListRuns Action = "list_runs"
	// SeeApproval reads an approval.
	SeeApproval Action = "see_approval"
	// ListApprovals lists approvals, and watches runs and approvals change.
	ListApprovals Action = "list_approvals"
	// Decide approves, rejects or edits an approval.
	Decide Action = "decide"
	// Cancel stops a run.
	Cancel Action = "cancel"
	// Answer answers a run's question to people.
	Answer Action = "answer"
	// Claim claims and works an agent task (an agent_task step).
	Claim Action = "claim"
	// Request starts runs (messages, flows).
	Request Action = "request"
	// SeeThread reads a thread's messages.
	SeeThread Action = "see_thread"
	// ReadAudit reads the audit log.
	ReadAudit Action = "read_audit"
	// ReadGrants lists session and forever grants.
	ReadGrants Action = "read_grants"
	// RevokeGrant revokes a grant.
	RevokeGrant Action = "revoke_grant"
	// ListSchedules lists the configured schedules with their next and
	// last fire (docs/schedules.md): a thread name and the last run's id
	// each, so, like the audit log, only for a token that reads every run.
	ListSchedules Action = "list_schedules"
	// UseSession drives an Agent API session: turns, replies, answers.
	UseSession Action = "use_session"
	// SeeSession reads an Agent API session and its turns.
	SeeSession Action = "see_session"
	// Catalog reads what the server offers: flows, agents, models.
	Catalog Action = "catalog"
	// Self reads who the token is (GET /api/v1/me, MCP status).
	Self Action = "self"
	// Administer handles dead letters, and runs, pauses or resumes a
	// schedule: its runs act as "schedule:<name>", not as the caller, and
	// a pause stops work others rely on.
	Administer Action = "administer"
	// UseTask polls, answers or cancels a task handle of the MCP Tasks
	// extension (tasks/get, tasks/update, tasks/cancel): only the identity
	// that created it. A task id works like a bearer token bound to that
	// identity, so not even admin uses another's (admin reads the run
	// through get_run).
	UseTask Action = "use_task"
	// Public needs no actor: sign-in, static files.
	Public Action = "public"
)

// Actions lists every action, in the order the docs give them.
var Actions = []Action{SeeRun, ListRuns, SeeApproval, ListApprovals, Decide, Cancel, Answer, Claim, Request,
	SeeThread, ReadAudit, ReadGrants, RevokeGrant, ListSchedules, UseSession, SeeSession, Catalog, Self, Administer, UseTask, Public}

// needs is the scopes an action needs, any one of them: the gate every
// route passes before its object is judged. An action missing here needs
// none (Self, Public; Decide is judged with its object, so a refused
// attempt reaches the engine and is audited).
var needs = map[Action][]core.Scope{
	SeeRun:        {core.ScopeRead, core.ScopeRequest, core.ScopeSessionRun, core.ScopeAdmin},
	ListRuns:      {core.ScopeRead, core.ScopeRequest, core.ScopeSessionRun, core.ScopeAdmin},
	SeeApproval:   {core.ScopeRead, core.ScopeRequest, core.ScopeSessionRun, core.ScopeAdmin},
	ListApprovals: {core.ScopeRead, core.ScopeRequest, core.ScopeSessionRun, core.ScopeAdmin},
	Cancel:        {core.ScopeRequest, core.ScopeDecide, core.ScopeAdmin, core.ScopeSessionRun},
	Answer:        {core.ScopeRequest, core.ScopeDecide, core.ScopeAdmin, core.ScopeSessionRun},
	Claim:         {core.ScopeRequest},
	Request:       {core.ScopeRequest},
	SeeThread:     {core.ScopeRead, core.ScopeAdmin},
	ReadAudit:     {core.ScopeRead, core.ScopeAdmin},
	ReadGrants:    {core.ScopeRead, core.ScopeAdmin},
	RevokeGrant:   {core.ScopeDecide, core.ScopeAdmin},
	ListSchedules: {core.ScopeRead, core.ScopeAdmin},
	UseSession:    {core.ScopeSessionRun},
	SeeSession:    {core.ScopeSessionRun},
	Catalog:       {core.ScopeRead, core.ScopeRequest, core.ScopeSessionRun},
	Administer:    {core.ScopeAdmin},
	UseTask:       {core.ScopeRequest},
}

// Check is the gate of an action before any object: the token holds one
// of the scopes it needs, and, for the audit log, grants and schedules,
// reads every run (a token confined to its own runs reads none of them).
func (a *Authority) Check(actor Actor, act Action) error {
	if scs := needs[act]; len(scs) > 0 && !actor.Scopes.Any(scs...) {
		return refuse(CodeMissingScope, "it needs scope %s", scopeNames(scs))
	}
	switch act {
	case ReadAudit, ReadGrants, ListSchedules:
		if !actor.ReadsAll() {
			return refuse(CodeForbidden, "this token reads only its own runs and their approvals: not the audit log, grants or schedules (give it scopes: [read, …] to read everything)")
		}
	case RevokeGrant:
		if !actor.decides() && !actor.Scopes.Has(core.ScopeAdmin) {
			return refuse(CodeMissingScope, "it needs scope decide or admin")
		}
	}
	return nil
}

// owner is who a run (or an approval, through its run) belongs to.
type owner struct {
	requester string
	thread    core.Thread
}

// runOwner and approvalOwner: a sub-agent's run and approvals belong to
// its root thread (core.HomeThread), whose owner sees and acts on them.
func runOwner(r *core.Run) owner {
	return owner{requester: r.Requester, thread: core.HomeThread(r.Thread)}
}

func approvalOwner(ap *approvals.Approval) owner {
	th, _ := core.ParseThread(ap.Thread)
	return owner{requester: ap.Requester, thread: core.HomeThread(th)}
}

// Viewer judges what one actor sees, remembering the session owners it
// looked up, for a list or a page that asks about many objects.
type Viewer struct {
	a      *Authority
	actor  Actor
	live   Live
	owners map[string]string // session id → owning token ("" when unknown)
}

// Viewer returns a Viewer for actor under the live configuration.
func (a *Authority) Viewer(actor Actor) *Viewer {
	return &Viewer{a: a, actor: actor, live: a.live(), owners: map[string]string{}}
}

// sessionOwner is the token that owns session id ("" for none).
func (v *Viewer) sessionOwner(ctx context.Context, id string) (string, error) {
	if tok, ok := v.owners[id]; ok {
		return tok, nil
	}
	tok := ""
	if v.a.o.Sessions != nil {
		s, err := v.a.o.Sessions.AgentSessionGet(ctx, id)
		switch {
		case err == nil:
			tok = s.Token
		case !errors.Is(err, core.ErrNotFound):
			return "", fmt.Errorf("authority: session %s: %w", id, err)
		}
	}
	v.owners[id] = tok
	return tok, nil
}

// sees is the one visibility rule of runs: admin sees every run; a run of
// an Agent API session only the token that owns the session; a token that
// reads all every other run; anyone else the runs they (any identity of
// theirs) requested.
func (v *Viewer) sees(ctx context.Context, o owner) (bool, error) {
	if v.actor.Scopes.Has(core.ScopeAdmin) {
		return true, nil
	}
	if o.thread.Channel == core.AgentSessionChannel {
		tok, err := v.sessionOwner(ctx, o.thread.Key)
		return err == nil && tok != "" && tok == v.actor.Token, err
	}
	if v.actor.readAll {
		return true, nil
	}
	return v.requested(o), nil
}

// requested reports whether the actor (any identity of the same person)
// requested what o owns.
func (v *Viewer) requested(o owner) bool {
	return o.requester != "" && v.live.People.SamePerson(v.actor.ID, o.requester)
}

// asRequester reports whether the actor acts on what o owns as its
// requester: it requested it and may request (scope request; for a
// session's run, session.run does too: the app started it).
func (v *Viewer) asRequester(o owner) bool {
	if !v.requested(o) {
		return false
	}
	return v.actor.Scopes.Has(core.ScopeRequest) ||
		(o.thread.Channel == core.AgentSessionChannel && v.actor.Scopes.Has(core.ScopeSessionRun))
}

// SeesRun reports whether the actor may see r (SeeRun).
func (v *Viewer) SeesRun(ctx context.Context, r *core.Run) (bool, error) {
	return v.sees(ctx, runOwner(r))
}

// SeesApproval reports whether the actor may see ap: one it may see the
// run of, one it may decide now, or one it handed on to someone else
// (approvals.Delegate) while it could decide it.
func (v *Viewer) SeesApproval(ctx context.Context, ap *approvals.Approval) (bool, error) {
	ok, err := v.sees(ctx, approvalOwner(ap))
	if ok || err != nil {
		return ok, err
	}
	return v.mayDecide(ap) == nil || v.handedOn(ap), nil
}

// handedOn reports whether the actor (any identity of the same person)
// handed ap on by a delegation that stands under the live configuration.
func (v *Viewer) handedOn(ap *approvals.Approval) bool {
	if !v.actor.decides() {
		return false
	}
	for _, d := range approvals.StandingDelegations(ap.Approvers, ap, v.live.People) {
		if v.live.People.SamePerson(d.Actor, v.actor.ID) {
			return true
		}
	}
	return false
}

// Runs keeps the runs the actor may see, in order: a list answers with
// exactly these (a page may then be shorter than its limit).
func (v *Viewer) Runs(ctx context.Context, runs []*core.Run) ([]*core.Run, error) {
	return keep(ctx, runs, v.SeesRun)
}

// Approvals keeps the approvals the actor may see, in order.
func (v *Viewer) Approvals(ctx context.Context, as []*approvals.Approval) ([]*approvals.Approval, error) {
	return keep(ctx, as, v.SeesApproval)
}

func keep[T any](ctx context.Context, items []T, sees func(context.Context, T) (bool, error)) ([]T, error) {
	out := items[:0:0]
	for _, it := range items {
		ok, err := sees(ctx, it)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, it)
		}
	}
	return out, nil
}

// mayDecide judges the actor's standing as an approver of ap under the
// live configuration, as approvals.Decide does.
func (v *Viewer) mayDecide(ap *approvals.Approval) error {
	if !v.actor.decides() {
		return refuse(CodeHumanRequired, "this token may not decide approvals: a person decides, with a token that has scope decide")
	}
	env := approvals.Env{People: v.live.People, Eligible: approvals.LiveEligible(ap.Entries(), ap, v.live.People)}
	if err := approvals.MayDecide(ap, v.actor.ID, env, v.actor.Groups...); err != nil {
		if errors.Is(err, approvals.ErrHumanRequired) {
			return refuse(CodeHumanRequired, "%v", err)
		}
		return refuse(CodeNotApprover, "%v", err)
	}
	return nil
}

// RunFilter is the requester a run list may be narrowed to in the store
// for actor: its identity when it sees only its own runs and no other
// identity is the same person; "" otherwise (filter each item with a
// Viewer; the list is then exact either way).
func (a *Authority) RunFilter(actor Actor) string {
	if actor.ReadsAll() {
		return ""
	}
	if a.live().People.Person(actor.ID) == actor.ID {
		return actor.ID
	}
	return ""
}

// Run loads run id and judges act on it for actor: SeeRun, Cancel, Answer
// or Claim. It returns the run when allowed, a *Refusal when not (not
// found for a run the actor may not see and has no standing on), or the
// store's error.
func (a *Authority) Run(ctx context.Context, actor Actor, act Action, id string) (*core.Run, error) {
	if err := a.Check(actor, act); err != nil {
		return nil, err
	}
	r, err := a.o.Store.RunGet(ctx, id)
	if errors.Is(err, core.ErrNotFound) {
		return nil, refuse(CodeNotFound, "run %q not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("authority: run %s: %w", id, err)
	}
	if err := a.Viewer(actor).run(ctx, act, r); err != nil {
		return nil, err
	}
	return r, nil
}

// run judges act on r.
func (v *Viewer) run(ctx context.Context, act Action, r *core.Run) error {
	sees, err := v.SeesRun(ctx, r)
	if err != nil {
		return err
	}
	hidden := refuse(CodeNotFound, "run %q not found", r.ID)
	switch act {
	case SeeRun, Claim:
		if sees {
			return nil
		}
		return hidden
	case Cancel:
		if v.actor.Scopes.Has(core.ScopeAdmin) || (sees && v.asRequester(runOwner(r))) {
			return nil
		}
		ok, err := v.approverOf(ctx, r.ID)
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		case !sees:
			return hidden
		}
		return refuse(CodeForbidden, "only the run's requester (%s), its eligible approvers or an admin may cancel run %q", r.Requester, r.ID)
	case Answer:
		if sees && v.asRequester(runOwner(r)) {
			return nil
		}
		if v.a.o.QuestionAnswerers != AnswerRequester && v.actor.decides() && v.inApproverGroup() {
			return nil
		}
		if !sees {
			return hidden
		}
		if v.a.o.QuestionAnswerers == AnswerRequester {
			return refuse(CodeNotApprover, "only the person who asked (%s) may answer", r.Requester)
		}
		return refuse(CodeNotApprover, "only the person who asked (%s) or an approver may answer", r.Requester)
	}
	return fmt.Errorf("authority: %s is not an action on a run", act)
}

// approverOf reports whether the actor may decide one of the run's
// approvals under the live configuration.
func (v *Viewer) approverOf(ctx context.Context, runID string) (bool, error) {
	if !v.actor.decides() {
		return false, nil
	}
	as, _, err := v.a.o.Store.ApprovalList(ctx, approvals.ApprovalListParams{RunID: runID, Limit: 100})
	if err != nil {
		return false, fmt.Errorf("authority: approvals of %s: %w", runID, err)
	}
	for _, ap := range as {
		if v.mayDecide(ap) == nil {
			return true, nil
		}
	}
	return false, nil
}

// inApproverGroup reports whether the actor is in any approver group now
// (configured, or vouched for by its surface and configured).
func (v *Viewer) inApproverGroup() bool {
	for _, g := range v.actor.Groups {
		if _, ok := v.live.Groups[g]; ok {
			return true
		}
	}
	for _, members := range v.live.Groups {
		for _, id := range v.live.People.Expand(members) {
			if id == v.actor.ID {
				return true
			}
		}
	}
	return false
}

// Approval loads approval id and judges act (SeeApproval or Decide) on it
// for actor. A Decide refusal says why (CodeHumanRequired, CodeNotApprover);
// surfaces still hand the attempt to the engine so it is audited.
func (a *Authority) Approval(ctx context.Context, actor Actor, act Action, id string) (*approvals.Approval, error) {
	if err := a.Check(actor, act); err != nil {
		return nil, err
	}
	if act == Decide && !actor.decides() {
		return nil, refuse(CodeHumanRequired, "this token may not decide approvals: a person decides, with a token that has scope decide")
	}
	ap, err := a.o.Store.ApprovalGet(ctx, id)
	if errors.Is(err, core.ErrNotFound) {
		return nil, refuse(CodeNotFound, "approval %q not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("authority: approval %s: %w", id, err)
	}
	v := a.Viewer(actor)
	switch act {
	case SeeApproval:
		ok, err := v.SeesApproval(ctx, ap)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, refuse(CodeNotFound, "approval %q not found", id)
		}
	case Decide:
		if err := v.mayDecide(ap); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("authority: %s is not an action on an approval", act)
	}
	return ap, nil
}

// Thread judges whether actor may read thread th's messages: admin any; a
// session's thread only its owning token; otherwise a token that reads
// every run (a confined one may not: a thread holds others' requests).
func (a *Authority) Thread(ctx context.Context, actor Actor, th core.Thread) error {
	if err := a.Check(actor, SeeThread); err != nil {
		return err
	}
	if th.Channel == core.AgentSessionChannel {
		ok, err := a.Viewer(actor).sees(ctx, owner{thread: th})
		if err != nil {
			return err
		}
		if !ok {
			return refuse(CodeNotFound, "thread %q not found", th.String())
		}
		return nil
	}
	if !actor.ReadsAll() {
		return refuse(CodeForbidden, "this token reads only its own runs, not threads")
	}
	return nil
}

// Session loads Agent API session id and judges act on it: UseSession
// (turns, replies, answers: the owning token only) or SeeSession (the
// owning token, or admin). Any other token's session is not found.
func (a *Authority) Session(ctx context.Context, actor Actor, act Action, id string) (*core.AgentSession, error) {
	if err := a.Check(actor, act); err != nil {
		return nil, err
	}
	hidden := refuse(CodeNotFound, "session %q not found", id)
	if a.o.Sessions == nil {
		return nil, hidden
	}
	s, err := a.o.Sessions.AgentSessionGet(ctx, id)
	if errors.Is(err, core.ErrNotFound) {
		return nil, hidden
	}
	if err != nil {
		return nil, fmt.Errorf("authority: session %s: %w", id, err)
	}
	owned := actor.Token != "" && s.Token == actor.Token
	switch act {
	case UseSession:
	case SeeSession:
		owned = owned || actor.Scopes.Has(core.ScopeAdmin)
	default:
		return nil, fmt.Errorf("authority: %s is not an action on a session", act)
	}
	if !owned {
		return nil, hidden
	}
	return s, nil
}

// AnswerStanding is the identity part of Answer, for the engine, which
// knows only who answers (the surface it came through judged the token
// first): the run's requester (any identity of theirs), or — unless only
// requesters answer — a person in an approver group. Chat answers are
// judged by it alone.
func (a *Authority) AnswerStanding(r *core.Run, identity string) error {
	v := a.Viewer(ChatActor(identity))
	if v.requested(runOwner(r)) {
		return nil
	}
	if a.o.QuestionAnswerers == AnswerRequester {
		return refuse(CodeNotApprover, "only the person who asked (%s) may answer", r.Requester)
	}
	if approvals.NeverDecides(identity) {
		return refuse(CodeNotApprover, "an agent or a schedule may not answer a question put to people")
	}
	if v.inApproverGroup() {
		return nil
	}
	return refuse(CodeNotApprover, "only the person who asked (%s) or an approver may answer", r.Requester)
}

// Task loads MCP task handle id and judges UseTask on it: only the
// identity that created the task uses it; anyone else, and any id without
// a task store, is told it is not found (a task id is as good as a bearer
// token, so nobody learns of another's).
func (a *Authority) Task(ctx context.Context, actor Actor, act Action, id string) (*core.MCPTask, error) {
	if act != UseTask {
		return nil, fmt.Errorf("authority: %s is not an action on a task", act)
	}
	if err := a.Check(actor, act); err != nil {
		return nil, err
	}
	hidden := refuse(CodeNotFound, "task %q not found", id)
	if a.o.Tasks == nil || id == "" {
		return nil, hidden
	}
	t, err := a.o.Tasks.MCPTaskGet(ctx, id)
	if errors.Is(err, core.ErrNotFound) {
		return nil, hidden
	}
	if err != nil {
		return nil, fmt.Errorf("authority: task %s: %w", id, err)
	}
	if actor.ID == "" || t.Actor != actor.ID {
		return nil, hidden
	}
	return t, nil
}
