package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/authority"
)

// Delegator is the optional capability of an Engine that hands pending
// approvals on (the engine does): POST /api/v1/approvals/{id}/delegate.
// Refusals are *core.DecisionError, like a decision's.
type Delegator interface {
	Delegate(ctx context.Context, r approvals.DelegateRequest) (*approvals.Approval, error)
}

// PolicyReader is the optional capability of an Engine that tells the
// policy in force (the engine does): GET /api/v1/policy.
type PolicyReader interface {
	PolicyInForce() *approvals.Policy
}

// receiptView is GET /api/v1/approvals/{id}/receipt.
type receiptView struct {
	Receipt string `json:"receipt"`
}

// getReceipt serves an approval's signed receipt to whoever may see the
// approval: 409 not_decided while it is pending, 404 no_receipt for one
// that has none (expired, decided before receipts, or no key).
func (s *server) getReceipt(w http.ResponseWriter, r *http.Request) {
	a, err := s.auth.Approval(r.Context(), authFrom(r.Context()), authority.SeeApproval, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	switch {
	case a.Receipt != "":
		writeJSON(w, http.StatusOK, receiptView{Receipt: a.Receipt})
	case a.Status == approvals.StatusPending:
		s.fail(w, r, errf(http.StatusConflict, "not_decided", "approval %s is pending: its receipt comes with people's decision", a.ID))
	default:
		s.fail(w, r, errf(http.StatusNotFound, "no_receipt",
			"approval %s (%s) has no receipt: only a decision people made is signed, on a server with approvals.receipt_key_file", a.ID, a.Status))
	}
}

// receiptKey serves the key receipts verify with, as a JWK.
func (s *server) receiptKey(w http.ResponseWriter, r *http.Request) {
	if len(s.o.ReceiptKey) == 0 {
		s.fail(w, r, errf(http.StatusNotFound, "receipts_off", "this server signs no receipts"))
		return
	}
	w.Header().Set("Content-Type", "application/jwk+json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(append(append([]byte(nil), s.o.ReceiptKey...), '\n'))
}

// delegateBody is POST /api/v1/approvals/{id}/delegate.
type delegateBody struct {
	// To is "person:<name>" or "group:<name>".
	To     string `json:"to"`
	Reason string `json:"reason"`
}

// delegate hands a pending approval on, for an actor who may decide it:
// the refusals a decision gets (403 not_approver, 409, 410), 422 invalid
// for a target the configuration does not name.
func (s *server) delegate(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	d, ok := s.o.Engine.(Delegator)
	if !ok {
		s.fail(w, r, errf(http.StatusNotFound, "not_found", "this server does not hand approvals on"))
		return
	}
	var b delegateBody
	if err := decodeBody(r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	if b.To = strings.TrimSpace(b.To); b.To == "" {
		s.fail(w, r, invalid("to", "to: name a person (person:<name>) or a group (group:<name>)"))
		return
	}
	ctx := r.Context()
	if _, err := s.auth.Approval(ctx, authFrom(ctx), authority.Decide, id); err != nil {
		// A person the approval does not name goes on to the engine, which
		// refuses and audits the attempt as it does a decision's; every
		// other refusal (unknown, an agent, no scope decide) ends here.
		var ref *authority.Refusal
		if !errors.As(err, &ref) || ref.Code != authority.CodeNotApprover {
			s.fail(w, r, err)
			return
		}
	}
	a, err := d.Delegate(ctx, approvals.DelegateRequest{ApprovalID: id, Actor: actorFrom(ctx).ID, Channel: DecisionChannel,
		To: b.To, Reason: b.Reason, Groups: authFrom(ctx).Groups})
	if err != nil {
		s.fail(w, r, notFound(err, "approval", id))
		return
	}
	s.writeApproval(w, r, a)
}

// PolicyView is GET /api/v1/policy: the policy in force, in order (also
// the console's Policy page).
type PolicyView struct {
	Version           string       `json:"version"`
	Default           string       `json:"default"`
	DefaultApprovers  []string     `json:"default_approvers"`
	AllowSelfApproval bool         `json:"allow_self_approval"`
	Rules             []PolicyRule `json:"rules"`
}

// PolicyRule is one rule as GET /api/v1/policy shows it; Index is its
// place (policy.rules[Index]), the number approvals' "why" names.
type PolicyRule struct {
	Index             int               `json:"index"`
	Key               string            `json:"key"`
	Description       string            `json:"description,omitempty"`
	Summary           string            `json:"summary"`
	Tool              string            `json:"tool"`
	Args              map[string]string `json:"args,omitempty"`
	When              string            `json:"when,omitempty"`
	Action            approvals.Effect  `json:"action"`
	Approvers         []string          `json:"approvers"`
	Quorum            json.RawMessage   `json:"quorum"`
	AllowSelfApproval bool              `json:"allow_self_approval,omitempty"`
}

// NewPolicyView renders p for GET /api/v1/policy (and the console).
func NewPolicyView(p *approvals.Policy) PolicyView {
	v := PolicyView{Version: p.Version(), Default: string(p.Default), DefaultApprovers: nonNil(p.DefaultApprovers),
		AllowSelfApproval: p.AllowSelfApproval, Rules: make([]PolicyRule, 0, len(p.Rules))}
	if v.Default == "" {
		v.Default = string(approvals.DefaultAuto)
	}
	for i, r := range p.Rules {
		q, _ := json.Marshal(max(r.Quorum, 1))
		if r.QuorumWhen != "" {
			q, _ = json.Marshal(r.QuorumWhen)
		}
		v.Rules = append(v.Rules, PolicyRule{Index: i, Key: r.Key(), Description: r.Description, Summary: r.Summary(),
			Tool: r.Tool, Args: r.Args, When: r.When, Action: r.Effect, Approvers: nonNil(r.Approvers), Quorum: q,
			AllowSelfApproval: r.AllowSelfApproval})
	}
	return v
}

func (s *server) policy(w http.ResponseWriter, r *http.Request) {
	pr, ok := s.o.Engine.(PolicyReader)
	if !ok {
		s.fail(w, r, errf(http.StatusNotFound, "not_found", "this server does not show its policy"))
		return
	}
	writeJSON(w, http.StatusOK, NewPolicyView(pr.PolicyInForce()))
}
