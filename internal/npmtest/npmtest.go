// Package npmtest finds the npm packages Go tests run: real MCP servers
// and clients nobody here wrote, pinned in testdata/npm/package-lock.json
// and installed by `npm ci` (.ci/run does it; by hand:
// `npm ci --prefix testdata/npm`). Packages that need them share the one
// lockfile: add a dependency there, not a second package.json.
//
// A test that needs a binary calls Bin. When it is missing the test fails
// under CI (CI set, as .ci/run sets it) and is skipped loudly elsewhere, so
// a missing install step can never turn into a silent pass in CI.
package npmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	rootOnce sync.Once
	root     string
	rootErr  error
)

// Dir returns the absolute path of testdata/npm in this repository.
func Dir(t testing.TB) string {
	t.Helper()
	rootOnce.Do(func() { root, rootErr = findRoot() })
	if rootErr != nil {
		t.Fatalf("npmtest: %v", rootErr)
	}
	return filepath.Join(root, "testdata", "npm")
}

// findRoot walks up from the working directory (a package directory under
// go test) to the directory holding go.mod.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Bin returns the absolute path of the installed npm binary name
// (node_modules/.bin/<name>), after checking node is on PATH.
func Bin(t testing.TB, name string) string {
	t.Helper()
	dir := Dir(t)
	p := filepath.Join(dir, "node_modules", ".bin", name)
	_, statErr := os.Stat(p)
	_, nodeErr := exec.LookPath("node")
	if statErr == nil && nodeErr == nil {
		return p
	}
	why := fmt.Sprintf("npm binary %s is not installed (run `npm ci --prefix %s`)", name, dir)
	if nodeErr != nil {
		why = "node is not on PATH (apt-get install nodejs npm, then `npm ci --prefix " + dir + "`)"
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("npmtest: %s; CI must install it (.ci/run runs npm ci)", why)
	}
	// Loud: visible without -v, so a local run does not look complete.
	fmt.Fprintf(os.Stderr, "SKIP %s: %s\n", t.Name(), why)
	t.Skipf("npmtest: %s", why)
	return ""
}
