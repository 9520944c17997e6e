package core

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// TestDecisionCodeHTTPStatus pins the one refusal → status mapping every
// HTTP surface (API, console, MCP's error bodies) uses; docs/architecture.md names
// 409, 403, 410 and 422. An unverified decider is a 403 everywhere.
func TestDecisionCodeHTTPStatus(t *testing.T) {
	t.Parallel()
	for code, want := range map[DecisionCode]int{
		DecisionNotFound:       http.StatusNotFound,
		DecisionAlreadyDecided: http.StatusConflict,
		DecisionAlreadyVoted:   http.StatusConflict,
		DecisionNotApprover:    http.StatusForbidden,
		DecisionSelfApproval:   http.StatusForbidden,
		DecisionExpired:        http.StatusGone,
		DecisionInvalidArgs:    http.StatusUnprocessableEntity,
		DecisionDenied:         http.StatusForbidden,
		DecisionBadRequest:     http.StatusBadRequest,
		DecisionUnverified:     http.StatusForbidden,
		DecisionHumanRequired:  http.StatusForbidden,
		"something_new":        http.StatusBadRequest,
	} {
		if got := code.HTTPStatus(); got != want {
			t.Errorf("%s.HTTPStatus() = %d, want %d", code, got, want)
		}
	}
}

// TestRefusalConvertsApprovalsSentinels: each approvals refusal becomes its
// code, wrapped or not; other errors (a bare not-found included) are not
// refusals.
func TestRefusalConvertsApprovalsSentinels(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC)
	for reason, want := range map[error]DecisionCode{
		approvals.ErrNotFound:                                    DecisionNotFound,
		approvals.ErrAlreadyDecided:                              DecisionAlreadyDecided,
		approvals.ErrDuplicateApproval:                           DecisionAlreadyVoted,
		approvals.ErrExpired:                                     DecisionExpired,
		approvals.ErrNotApprover:                                 DecisionNotApprover,
		approvals.ErrSelfApproval:                                DecisionSelfApproval,
		approvals.ErrDeniedByPolicy:                              DecisionDenied,
		approvals.ErrUnverified:                                  DecisionUnverified,
		approvals.ErrInvalidDecision:                             DecisionBadRequest,
		&approvals.ValidationError{Field: "env", Message: "bad"}: DecisionInvalidArgs,
	} {
		err := fmt.Errorf("store: decide: %w", &approvals.RefusedError{Reason: reason, By: []string{"slack:U1"}, At: at})
		de, ok := Refusal(err)
		if !ok || de.Code != want {
			t.Errorf("Refusal(%v) = %+v, %v; want code %s", reason, de, ok, want)
		}
	}
	de, _ := Refusal(&approvals.RefusedError{Reason: approvals.ErrAlreadyDecided, By: []string{"slack:U1"}, At: at})
	if de.By != "slack:U1" || !de.At.Equal(at) || de.Message != "already decided by slack:U1 at 2026-11-29 15:00:00 UTC" {
		t.Errorf("already decided = %+v", de)
	}
	own := &DecisionError{Code: DecisionExpired, Message: "x"}
	if de, ok := Refusal(fmt.Errorf("wrapped: %w", own)); !ok || de != own {
		t.Errorf("Refusal(*DecisionError) = %v, %v; want it unchanged", de, ok)
	}
	for _, err := range []error{nil, errors.New("boom"), ErrNotFound, fmt.Errorf("run x: %w", ErrNotFound)} {
		if de, ok := Refusal(err); ok {
			t.Errorf("Refusal(%v) = %+v, want no refusal", err, de)
		}
	}
}

// TestOneNotFoundSentinel: core's and approvals' not-found are one value.
func TestOneNotFoundSentinel(t *testing.T) {
	t.Parallel()
	if ErrNotFound != approvals.ErrNotFound {
		t.Fatal("core.ErrNotFound and approvals.ErrNotFound differ; callers would have to check both")
	}
}
