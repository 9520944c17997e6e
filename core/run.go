package core

import (
	"encoding/json"
	"slices"
	"time"
)

// RunStatus is a run's state, as the API names them (docs/architecture.md).
type RunStatus string

// The run statuses. queued runs wait for a worker (new, or resumed after a
// decision); running runs are held by one replica under a lease.
const (
	RunQueued          RunStatus = "queued"
	RunRunning         RunStatus = "running"
	RunWaitingApproval RunStatus = "waiting_approval"
	RunWaitingInput    RunStatus = "waiting_input"
	RunSucceeded       RunStatus = "succeeded"
	RunFailed          RunStatus = "failed"
	RunRejected        RunStatus = "rejected"
	RunCancelled       RunStatus = "cancelled"
	RunInterrupted     RunStatus = "interrupted"
)

// RunStatuses lists every run status, so filters, schemas and pickers are
// built from one list instead of copies that drift.
var RunStatuses = []RunStatus{RunQueued, RunRunning, RunWaitingApproval, RunWaitingInput,
	RunSucceeded, RunFailed, RunRejected, RunCancelled, RunInterrupted}

// Valid reports whether s is one of the run statuses above.
func (s RunStatus) Valid() bool { return slices.Contains(RunStatuses, s) }

// Final reports whether the run can no longer change.
func (s RunStatus) Final() bool {
	switch s {
	case RunSucceeded, RunFailed, RunRejected, RunCancelled, RunInterrupted:
		return true
	}
	return false
}

// Active reports whether the run holds its thread: one active run per
// thread, later runs in that thread queue behind it.
func (s RunStatus) Active() bool {
	return s == RunRunning || s == RunWaitingApproval || s == RunWaitingInput
}

// Run is one execution of a flow, checkpointed at every step boundary so
// any replica can continue it from the database.
type Run struct {
	ID        string         `json:"id"`
	Flow      string         `json:"flow"`
	Thread    Thread         `json:"thread"`
	Requester string         `json:"requester"`
	Status    RunStatus      `json:"status"`
	Args      map[string]any `json:"args"`
	// Reason is the request text that started the run, shown on cards.
	Reason string `json:"reason"`
	// Attachments are the files of the message that started the run.
	Attachments []Attachment `json:"attachments,omitempty"`
	// StepIndex is the next step to run (len(Steps) when done).
	StepIndex    int       `json:"step_index"`
	ErrorCode    string    `json:"error_code,omitempty"`
	ErrorMessage string    `json:"error_message,omitempty"`
	EventChannel string    `json:"-"`
	EventID      string    `json:"-"`
	Owner        string    `json:"-"`
	LeaseUntil   time.Time `json:"-"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	Steps        []Step    `json:"steps"`
}

// StepStatus is one step's state. dispatching is written before a tool is
// called and replaced after it returns: a step found dispatching after a
// crash has an unknown outcome (invariant 4). cancelled ends a step that
// was waiting or not yet dispatched when its run was cancelled, so no
// cancelled run shows a step still waiting; a step already dispatching
// when the run is cancelled keeps running and records its real outcome.
type StepStatus string

// The step statuses.
const (
	StepWaitingApproval StepStatus = "waiting_approval"
	StepDispatching     StepStatus = "dispatching"
	StepSucceeded       StepStatus = "succeeded"
	StepFailed          StepStatus = "failed"
	StepDenied          StepStatus = "denied"
	StepRejected        StepStatus = "rejected"
	StepInterrupted     StepStatus = "interrupted"
	StepCancelled       StepStatus = "cancelled"
)

// Step is one tool call of a run. Args are the arguments it runs (or ran)
// with; for an approved call these are the approved arguments.
type Step struct {
	Index          int            `json:"index"`
	Tool           string         `json:"tool"`
	Status         StepStatus     `json:"status"`
	Args           map[string]any `json:"args"`
	Output         string         `json:"output"`
	Error          string         `json:"error,omitempty"`
	ApprovalID     string         `json:"approval_id,omitempty"`
	IdempotencyKey string         `json:"idempotency_key,omitempty"`
	Attempts       int            `json:"attempts"`
	StartedAt      *time.Time     `json:"started_at,omitempty"`
	FinishedAt     *time.Time     `json:"finished_at,omitempty"`
}

// RunEvent is one entry of a run's event stream, served over SSE. Events
// are stored with the state change they describe, so the stream can be
// replayed from any point (Last-Event-ID) on any replica.
type RunEvent struct {
	Seq   int64           `json:"seq"`
	RunID string          `json:"run_id"`
	Type  string          `json:"type"`
	Data  json.RawMessage `json:"data"`
	At    time.Time       `json:"at"`
}

// NewRunEvent builds a run event stamped at, data encoded as JSON (null if
// it cannot be).
func NewRunEvent(runID, typ string, data any, at time.Time) RunEvent {
	b, err := json.Marshal(data)
	if err != nil {
		b = []byte("null")
	}
	return RunEvent{RunID: runID, Type: typ, Data: b, At: at}
}

// The run event types streamed by /api/v1/runs/{id}/events.
const (
	EventRunQueued        = "run.queued"
	EventTurnStarted      = "turn.started"
	EventMessageCommitted = "message.committed"
	EventToolStarted      = "tool.started"
	// EventToolOutput is a running tool's progress: its newest output
	// lines (bounded, redacted) and the time it has run.
	EventToolOutput          = "tool.output"
	EventToolFinished        = "tool.finished"
	EventPermissionRequested = "permission.requested"
	EventPermissionDecided   = "permission.decided"
	EventTurnFinished        = "turn.finished"
)

// OutboxMessage is a reply or card queued for a thread. Cards carry only the
// approval id: they are rendered from the approval's state when sent, so a
// card that waited in the outbox never shows a stale status.
type OutboxMessage struct {
	ID         string      `json:"id"`
	Thread     Thread      `json:"thread"`
	Kind       MessageKind `json:"kind"`
	Text       string      `json:"text,omitempty"`
	ApprovalID string      `json:"approval_id,omitempty"`
	RunID      string      `json:"run_id,omitempty"`
	// Replaces is the outbox id of the message this one edits in place
	// (a KindQuestionUpdate names its question).
	Replaces  string    `json:"replaces,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}
