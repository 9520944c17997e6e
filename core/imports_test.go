package core_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreImportsNoAdapterOrStore guards the one-way arrows of
// docs/architecture.md: core and approvals never import a concrete adapter or
// store, so the engine cannot grow a platform special case.
func TestCoreImportsNoAdapterOrStore(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}",
		"github.com/opsgate/opsgate/core/...", "github.com/opsgate/opsgate/approvals").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/opsgate/opsgate/adapters/", "github.com/opsgate/opsgate/store/", "github.com/opsgate/opsgate/config", "github.com/opsgate/opsgate/cmd/"} {
			if strings.HasPrefix(p, banned) {
				t.Errorf("core depends on %s", p)
			}
		}
	}
}

// TestPartsNeverImportTheEngine guards the arrows into the engine
// (docs/architecture.md, "Packages and import rules"): the gate, the tool
// seam, the upstream MCP tools, the agent tasks and the LLM agent's loop
// (core/agentrun) are parts the engine wires together, so none of them may depend on core/engine — what they
// need of it is a small interface they declare.
func TestPartsNeverImportTheEngine(t *testing.T) {
	parts := []string{"core/gate", "core/tools", "core/upstream", "core/agenttask", "core/agentrun"}
	args := []string{"list", "-f", `{{.ImportPath}} {{join .Deps " "}}`}
	for _, p := range parts {
		args = append(args, "github.com/opsgate/opsgate/"+p)
	}
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(parts) {
		t.Fatalf("go list answered %d packages, want %d:\n%s", len(lines), len(parts), out)
	}
	for _, line := range lines {
		deps := strings.Fields(line)
		for _, d := range deps[1:] {
			if d == "github.com/opsgate/opsgate/core/engine" {
				t.Errorf("%s depends on core/engine", deps[0])
			}
		}
	}
}
