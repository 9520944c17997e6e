package mcp

import (
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/api"
)

// The result shapes. Runs and approvals are the HTTP API's (the README),
// so a client can switch between the two; each tool's output wraps them
// with an optional "error" so a refusal is structured content too.

type flowView struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Usage       string `json:"usage" jsonschema:"the command line to send with send_message, e.g. deploy <service> <version> [env=staging]"`
}

// runView and approvalView are the API's own shapes (core/api owns them),
// so the two surfaces cannot drift apart.
type (
	runView      = api.RunView
	approvalView = api.ApprovalView
)

// toolError is a refusal or a bad request, as structured content: the
// same code and message the HTTP API would answer with.
type toolError = api.ErrorBody

// newRunView renders r as the API does, less the steps' idempotency keys,
// which this surface has never shown.
func newRunView(r *core.Run) *runView {
	v := api.NewRunView(r)
	if v != nil {
		for i := range v.Steps {
			v.Steps[i].IdempotencyKey = ""
		}
	}
	return v
}
