package configs

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestDemoScripts runs the quickstart's demo tools the way opsgate does:
// argv only, environment carrying the run id and idempotency key.
func TestDemoScripts(t *testing.T) {
	t.Parallel()
	if len(Quickstart) == 0 {
		t.Fatal("quickstart.yaml not embedded")
	}
	cases := map[string]struct {
		args     []string
		wantCode int
		want     []string
		absent   []string
	}{
		"DeployDryRun":  {[]string{"demo/deploy.sh", "--dry-run", "api", "1.2.3", "prod"}, 0, []string{"would deploy api version 1.2.3 to prod", "nothing was changed"}, []string{"run id"}},
		"DeployReal":    {[]string{"demo/deploy.sh", "api", "1.2.3"}, 0, []string{"to staging", "run id:          run-7", "idempotency key: key-9", "deployed api 1.2.3"}, nil},
		"DeployBadName": {[]string{"demo/deploy.sh", "api;rm", "1"}, 2, nil, []string{"deploying"}},
		"DeployBadVer":  {[]string{"demo/deploy.sh", "api", "1 2"}, 2, nil, nil},
		"DeployTooFew":  {[]string{"demo/deploy.sh", "api"}, 2, nil, nil},
		"StatusOK":      {[]string{"demo/status.sh", "web"}, 0, []string{"service:  web", "status:   healthy", "run:      run-7"}, nil},
		"StatusBadName": {[]string{"demo/status.sh", "../x"}, 2, nil, nil},
		"StatusNoArgs":  {[]string{"demo/status.sh"}, 2, nil, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command("./"+tc.args[0], tc.args[1:]...)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "OPSGATE_RUN_ID=run-7", "OPSGATE_IDEMPOTENCY_KEY=key-9"}
			out, err := cmd.CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; output:\n%s", code, tc.wantCode, out)
			}
			for _, s := range tc.want {
				if !strings.Contains(string(out), s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(string(out), s) {
					t.Errorf("output has %q:\n%s", s, out)
				}
			}
		})
	}
}
