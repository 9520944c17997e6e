package agenttask

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// How an agent task ends: completed with a result its output schema
// accepts, or failed with the agent's message.

// Complete ends the claimed call with result, the agent's raw
// final JSON, after validating it against the task's output schema. No
// tool call may still be in flight. The run is requeued: the step's output
// is the result, and the run continues with the next step. The returned
// run is what the agent follows.
func (t *Tasks) Complete(ctx context.Context, actor core.Actor, ref core.AgentRef, claimID string, result json.RawMessage) (*core.Run, error) {
	if len(result) > MaxAgentResult {
		return nil, agentErr(core.AgentInvalidResult, "the result is %d bytes; the limit is %d", len(result), MaxAgentResult)
	}
	c, err := t.loadCall(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := validateResult(c.Task.OutputSchema, result); err != nil {
		return nil, err
	}
	return t.finishAgentCall(ctx, actor, ref, c, claimID, core.AgentCallCompleted, result, "")
}

// Fail ends the claimed call as failed with the agent's message;
// the run then fails. Pending approvals of its tool calls are withdrawn.
func (t *Tasks) Fail(ctx context.Context, actor core.Actor, ref core.AgentRef, claimID, message string) (*core.Run, error) {
	message = strings.TrimSpace(message)
	if message == "" || len(message) > maxAgentMessage || !utf8.ValidString(message) {
		return nil, agentErr(core.AgentBadRequest, "message is required: text of at most %d bytes", maxAgentMessage)
	}
	c, err := t.loadCall(ctx, ref)
	if err != nil {
		return nil, err
	}
	return t.finishAgentCall(ctx, actor, ref, c, claimID, core.AgentCallFailed, nil, message)
}

func (t *Tasks) finishAgentCall(ctx context.Context, actor core.Actor, ref core.AgentRef, c *core.AgentCall, claimID string, status core.AgentCallStatus, result json.RawMessage, message string) (*core.Run, error) {
	if err := t.stillServed(ctx, c); err != nil {
		return nil, err
	}
	var withdraw []core.AgentReceipt
	_, err := t.store.AgentCallChange(ctx, core.AgentCallChangeParams{ID: c.ID, Change: func(cur *core.AgentCall, rs []core.AgentReceipt) (core.AgentCallChange, error) {
		if ae := owned(cur, actor, claimID); ae != nil {
			return core.AgentCallChange{}, ae
		}
		withdraw = withdraw[:0]
		for _, r := range rs {
			switch {
			case r.Status == core.ReceiptDispatching || (r.Status == core.ReceiptPendingApproval && status == core.AgentCallCompleted):
				return core.AgentCallChange{}, agentErr(core.AgentToolInFlight, "tool call %s (%s) is %s; it must end before the task does: poll it with its toolCallId", r.ToolCallID, r.ToolID, r.Status)
			case r.Status == core.ReceiptPendingApproval:
				withdraw = append(withdraw, r)
			}
		}
		now := t.now()
		next := *cur
		next.Status, next.UpdatedAt, next.FinishedAt = status, now, &now
		kind := approvals.AuditAgentCallCompleted
		detail := map[string]any{"call_id": cur.ID, "stage": cur.Task.Stage}
		if status == core.AgentCallCompleted {
			next.Result = append(json.RawMessage{}, result...)
		} else {
			next.ErrorCode, next.Error = "agent_failed", message
			kind, detail["message"] = approvals.AuditAgentCallFailed, message
		}
		ch := core.AgentCallChange{Call: &next, Checkpoint: &core.Checkpoint{
			RunID: cur.RunID, Now: now, ExpectStatus: []core.RunStatus{core.RunWaitingInput}, Status: core.RunQueued,
			Audit:  []approvals.AuditEntry{t.audit(kind, actor.ID, cur.RunID, "", core.AgentTaskStep, detail)},
			Events: []core.RunEvent{t.event(cur.RunID, EventAgentCallFinished, map[string]any{"call_id": cur.ID, "status": status, "by": actor.ID})},
		}}
		if len(withdraw) > 0 {
			r := withdraw[0]
			r.Status, r.Error, r.FinishedAt = core.ReceiptExpired, "withdrawn: the agent failed the task", &now
			ch.Receipt = &r
		}
		return ch, nil
	}})
	if err != nil {
		return nil, t.mapAgentErr(err, c)
	}
	for _, r := range withdraw {
		if err := t.o.Host.ExpireApproval(ctx, r.ApprovalID, t.now().Add(t.o.ApprovalTTL+time.Hour)); err != nil {
			t.log.Warn("withdraw approval of a failed agent task", "approval", r.ApprovalID, "err", err)
		}
	}
	return t.store.RunGet(ctx, ref.RunID)
}

// validateResult checks the raw final JSON against the task's output
// schema.
func validateResult(schema, result json.RawMessage) error {
	if len(bytes.TrimSpace(result)) == 0 {
		return agentErr(core.AgentInvalidResult, "result is required: JSON matching the task's output schema")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(result))
	if err != nil {
		return agentErr(core.AgentInvalidResult, "result is not JSON: %v", err)
	}
	sdoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return fmt.Errorf("agenttask: output schema: %w", err)
	}
	comp := jsonschema.NewCompiler()
	if err := comp.AddResource("mem://agent/output.json", sdoc); err != nil {
		return fmt.Errorf("agenttask: output schema: %w", err)
	}
	s, err := comp.Compile("mem://agent/output.json")
	if err != nil {
		return fmt.Errorf("agenttask: output schema: %w", err)
	}
	if err := s.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		msg := err.Error()
		if errors.As(err, &ve) {
			msg = flattenValidation(ve)
		}
		return agentErr(core.AgentInvalidResult, "the result does not match the task's output schema: %s", msg)
	}
	return nil
}

// flattenValidation is the innermost causes of a validation error, one
// line each.
func flattenValidation(ve *jsonschema.ValidationError) string {
	var out []string
	var walk func(v *jsonschema.ValidationError)
	walk = func(v *jsonschema.ValidationError) {
		if len(v.Causes) == 0 {
			loc := "/" + strings.Join(v.InstanceLocation, "/")
			out = append(out, fmt.Sprintf("at %s: %s", loc, v.ErrorKind.LocalizedString(message.NewPrinter(language.English))))
			return
		}
		for _, c := range v.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("and %d more", len(out)-5))
	}
	return strings.Join(out, "; ")
}
