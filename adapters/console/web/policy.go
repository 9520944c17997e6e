package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/authority"
)

// policyPage shows the policy in force (after the last reload), rule by
// rule with the numbers approvals name as the rule that asked.
func (s *server) policyPage(w http.ResponseWriter, r *http.Request) {
	pr, ok := baseEngine(s.o.Engine).(api.PolicyReader)
	if !ok {
		s.plainError(w, http.StatusNotFound, "This server does not show its policy.")
		return
	}
	s.render(w, r, http.StatusOK, "policy", map[string]any{"Title": "Policy", "Policy": api.NewPolicyView(pr.PolicyInForce())})
}

// delegate hands a pending approval to a person or group (the engine
// judges and audits it as it does a decision); a refusal re-renders the
// card with the engine's message next to the form.
func (s *server) delegate(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	info := infoFrom(ctx)
	id := r.PathValue("id")
	back := localPath(r.PostFormValue("return"), "/approvals/"+url.PathEscape(id))
	d, ok := baseEngine(s.o.Engine).(api.Delegator)
	if !ok {
		s.plainError(w, http.StatusNotFound, "This server does not hand approvals on.")
		return
	}
	to, reason := strings.TrimSpace(r.PostFormValue("to")), strings.TrimSpace(r.PostFormValue("reason"))
	var err error
	if _, aerr := s.auth.Approval(ctx, info.auth, authority.Decide, id); authority.HumanRequired(aerr) {
		err = &core.DecisionError{Code: core.DecisionHumanRequired,
			Message: "You signed in with a token that may not decide approvals, so you may not hand them on either."}
	} else if to == "" {
		err = &core.DecisionError{Code: core.DecisionBadRequest, Message: "Name a person (person:<name>) or a group (group:<name>)."}
	} else {
		_, err = d.Delegate(ctx, approvals.DelegateRequest{ApprovalID: id, Actor: info.actor.ID, Channel: Channel, To: to, Reason: reason,
			Groups: info.groups})
	}
	if err == nil {
		s.log.InfoContext(ctx, "web: delegated", "approval", id, "to", to, "actor", info.actor.ID)
		redirectDone(w, r, back, "delegate")
		return
	}
	var de *core.DecisionError
	if !errors.As(err, &de) {
		s.refused(w, r, err)
		return
	}
	c, ok := s.refusedCard(w, r, id, de, "delegate", reason)
	if !ok {
		return
	}
	c.FormTo = to
	s.renderApproval(w, r, de.Code.HTTPStatus(), c, "")
}

// receipt serves an approval's signed receipt as text, to copy into a
// verifier (docs/receipts.md).
func (s *server) receipt(w http.ResponseWriter, r *http.Request) {
	a, err := s.auth.Approval(r.Context(), infoFrom(r.Context()).auth, authority.SeeApproval, r.PathValue("id"))
	if err != nil {
		s.refused(w, r, err)
		return
	}
	if a.Receipt == "" {
		s.plainError(w, http.StatusConflict, fmt.Sprintf("Approval %s (%s) has no receipt: only a decision people made is signed.", a.ID, a.Status))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(a.Receipt + "\n"))
}

// baseEngine is the engine under the console's wrapping (groupEngine), for
// its optional capabilities: a hand-over carries the vouched groups
// itself.
func baseEngine(e Engine) Engine {
	if g, ok := e.(groupEngine); ok {
		return g.Engine
	}
	return e
}
