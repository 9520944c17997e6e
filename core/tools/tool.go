package tools

import (
	"context"
	"errors"
	"fmt"

	"github.com/opsgate/opsgate/approvals"
)

// Tool is a callable the gate guards (core/gate). Risk, Destructive and
// Idempotent drive policy defaults, cards and crash recovery; Schema
// validates (and fills defaults into) arguments before anything runs.
// Only the gate dispatches a tool: nothing else reads its Runner
// (TestOnlyTheGateReadsRunners in core/gate).
type Tool struct {
	Name, Description string
	Risk              approvals.Risk
	Destructive       bool
	// Idempotent tools are re-dispatched with the same idempotency key after
	// a crash mid-dispatch; others make the run interrupted.
	Idempotent bool
	Schema     *approvals.Schema
	Runner     Runner
}

// Check reports a tool that cannot be dispatched: no name or no runner.
func (t *Tool) Check() error {
	switch {
	case t == nil || t.Name == "":
		return errors.New("tool without a name")
	case t.Runner == nil:
		return fmt.Errorf("tool %q has no runner", t.Name)
	}
	return nil
}

// Runner executes a tool (Exec, HTTP and core/upstream's MCP tools
// implement it). Preview is the dry run shown on approval cards.
type Runner interface {
	Run(ctx context.Context, c Call) (Result, error)
	Preview(ctx context.Context, c Call) (string, error)
}

// ToolLookup finds a tool by name as it is now. The configured tools are
// one (Static); the upstream MCP registry (core/upstream) is another.
type ToolLookup interface {
	// LookupTool returns the tool named name. An error wrapping
	// ErrUnknownTool means there is no such tool (it may have disappeared);
	// any other error says why it cannot be had now (its server is down).
	LookupTool(ctx context.Context, name string) (*Tool, error)
}

// ToolLister is the optional capability of a ToolLookup that can list the
// tools it offers now (core/upstream's registry): an agent's tools globs
// then cover them too ("github.*"), as they are at each model turn. Tools
// waits, bounded by ctx, for sources still making their first connection,
// so a turn right after a start does not see an empty toolbox.
type ToolLister interface {
	Tools(ctx context.Context) []*Tool
}

// ErrUnknownTool is wrapped by a ToolLookup that has no tool of that name.
var ErrUnknownTool = errors.New("unknown tool")

// Static is a fixed set of tools by name (the configuration's tools).
type Static map[string]*Tool

// LookupTool implements ToolLookup.
func (m Static) LookupTool(_ context.Context, name string) (*Tool, error) {
	if t, ok := m[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownTool, name)
}
