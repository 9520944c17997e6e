package core

import (
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// TestRefusalText pins the one sentence per refusal code every chat
// surface answers with: who decided and when, when it expired, the detail
// beyond the code's own words, a question's wording, an "Approve all"'s
// account as it is.
func TestRefusalText(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 4, 14, 2, 9, 0, time.UTC)
	refusal := func(err error) *DecisionError {
		de, ok := Refusal(err)
		if !ok {
			t.Fatalf("not a refusal: %v", err)
		}
		return de
	}
	for _, c := range []struct {
		de   *DecisionError
		want string
	}{
		{refusal(&approvals.RefusedError{Reason: approvals.ErrAlreadyDecided, By: []string{"slack:U1"}, At: at}),
			"ℹ️ Already decided by slack:U1 at 2026-03-04 14:02 UTC."},
		{&DecisionError{Code: DecisionAlreadyDecided, Message: "this question is no longer waiting", By: "telegram:7", At: at, Question: true},
			"ℹ️ Already answered by telegram:7 at 2026-03-04 14:02 UTC."},
		{&DecisionError{Code: DecisionAlreadyDecided, Message: "this question is no longer waiting", Question: true}, "ℹ️ Already answered."},
		{refusal(&approvals.RefusedError{Reason: approvals.ErrExpired, At: at}), "⌛ This approval expired at 2026-03-04 14:02 UTC."},
		{&DecisionError{Code: DecisionExpired, Question: true}, "⌛ This question has expired."},
		{refusal(&approvals.RefusedError{Reason: approvals.ErrNotApprover}), "⛔ You may not decide this approval."},
		{refusal(&approvals.RefusedError{Reason: approvals.ErrNotApprover, Detail: "the edited call needs approval from [group:leads]"}),
			"⛔ You may not decide this approval: the edited call needs approval from [group:leads]."},
		{&DecisionError{Code: DecisionNotApprover, Message: "only the requester may answer", Question: true},
			"⛔ You may not answer this question: only the requester may answer."},
		{refusal(&approvals.RefusedError{Reason: approvals.ErrSelfApproval}), "⛔ You asked for this call, so you cannot approve it yourself."},
		{refusal(&approvals.RefusedError{Reason: approvals.ErrHumanRequired}), "⛔ Approvals are decided by people: an agent never decides."},
		{refusal(&approvals.RefusedError{Reason: approvals.ErrDeniedByPolicy, Detail: "rule 3 denies env=prod"}), "⛔ Denied by policy: rule 3 denies env=prod."},
		{refusal(&approvals.RefusedError{Reason: approvals.ErrUnverified, Detail: "no reply token"}),
			"⛔ Your decision was not counted: who sent it could not be verified: no reply token."},
		{refusal(&approvals.RefusedError{Reason: approvals.ErrDuplicateApproval, Detail: "1 of 2"}),
			"👍 Your approval is already counted; the call still waits for more approvers."},
		{&DecisionError{Code: DecisionNotFound}, "❓ Unknown approval."},
		{&DecisionError{Code: DecisionNotFound, Question: true}, "❓ Unknown question."},
		{&DecisionError{Code: DecisionInvalidArgs, Message: "version: missing"}, "⚠️ Arguments not accepted: version: missing."},
		{&DecisionError{Code: DecisionInvalidArgs, Message: "the answer must be one of: a, b", Question: true},
			"⚠️ That does not answer the question: the answer must be one of: a, b."},
		{&DecisionError{Code: DecisionBadRequest, Message: "bad\nline"}, "⚠️ Not accepted: bad" + LineMark + "line"},
		{&DecisionError{Code: DecisionAlreadyDecided, Batch: true, Message: "Approved: deploy. Refused: status (expired)."},
			"ℹ️ Approved: deploy. Refused: status (expired)"},
	} {
		if got := RefusalText(c.de); got != c.want {
			t.Errorf("RefusalText(%+v)\n got %q\nwant %q", c.de, got, c.want)
		}
	}
	// Every code has its own words, and none is left empty.
	seen := map[string]DecisionCode{}
	for _, code := range []DecisionCode{DecisionNotFound, DecisionAlreadyDecided, DecisionAlreadyVoted, DecisionNotApprover,
		DecisionSelfApproval, DecisionExpired, DecisionInvalidArgs, DecisionDenied, DecisionBadRequest, DecisionUnverified, DecisionHumanRequired} {
		got := RefusalText(&DecisionError{Code: code})
		if strings.TrimSpace(got) == "" {
			t.Errorf("%s: empty text", code)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%s and %s share the text %q", code, other, got)
		}
		seen[got] = code
	}
	if RefusalText(nil) != "" {
		t.Error("nil refusal has a text")
	}
}
