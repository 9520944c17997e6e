// Package coretest holds the end-to-end test fixtures that core's operator
// surfaces (core/api, core/mcp) share, so each package's tests say only
// what differs: which tools, policy and tokens. Everything here is cleaned
// up with the test that asked for it.
package coretest

import (
	"context"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/internal/testkit"
	"github.com/opsgate/opsgate/store/sqlite"
)

// Store opens a migrated SQLite store in the test's temporary directory and
// closes it when the test ends (testkit.SQLite).
func Store(t testing.TB) *sqlite.Store { return testkit.SQLite(t) }

// DeploySchema is the argument schema of the tests' deploy tool: a
// lower-case service, a version, and env defaulting to staging.
func DeploySchema(t testing.TB) *approvals.Schema {
	t.Helper()
	schema, err := approvals.CompileSchema("deploy", map[string]any{
		"type": "object", "required": []any{"service", "version"}, "additionalProperties": false,
		"properties": map[string]any{
			"service": map[string]any{"type": "string", "pattern": "^[a-z0-9-]+$"},
			"version": map[string]any{"type": "string"},
			"env":     map[string]any{"type": "string", "default": "staging"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return schema
}

// Run runs eng in the background until the test ends, then stops it and
// fails the test if Run returned an error.
func Run(t testing.TB, eng *engine.Engine) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("engine run: %v", err)
		}
	})
}
