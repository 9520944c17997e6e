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
