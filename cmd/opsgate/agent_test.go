package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/opsgate/opsgate/internal/fakellm"
)

// llmServer is the fake model server the agent tests' opsgate processes
// talk to (loopback).
var llmServer = sync.OnceValue(fakellm.NewServer)

// TestAgentKilledMidDispatch: the real server, its agent on the fake model,
// is killed (SIGKILL) while the non-idempotent tool the model called runs.
// After the restart the run is interrupted and the thread told; the tool
// ran once and the model was not asked again for that turn; the next
// message's turn tells the model the outcome is unknown. Both stores.
func TestAgentKilledMidDispatch(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, pgDSN string) {
		e := newEnv(t)
		sc := llmServer().Script(t)
		sc.Push(fakellm.CallTool("once", `{"reason":"you asked"}`))
		once := e.script("once.sh", fmt.Sprintf(`
echo "once:$OPSGATE_IDEMPOTENCY_KEY" >> %[1]q
if [ ! -e %[2]q ]; then
	echo $$ > %[2]q
	sleep 20
fi
echo "once finished"
`, e.keyLog, filepath.Join(e.dir, "once.started")))
		t.Cleanup(func() {
			if b, err := os.ReadFile(filepath.Join(e.dir, "once.started")); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
					_ = syscall.Kill(-pid, syscall.SIGKILL)
				}
			}
		})
		e.writeConfig(e.storeYAML(pgDSN), fmt.Sprintf(`
engine:
  poll_interval: 100ms
  lease: 1s
tools:
  - {name: once, risk: read, idempotent: false, exec: {command: [%q], timeout: 1m}}
policy:
  rules:
    - {match: {tool: "*"}, action: allow}
models:
  - {name: default, provider: openai, base_url: %q, model: test-model, timeout: 10s}
agents:
  - {name: ops, model: default, tools: ["once"], default: true}
`, once, sc.OpenAIURL()))
		e.start()
		run := e.message("t-agent", "please run once")
		e.waitFile(filepath.Join(e.dir, "once.started"))
		e.kill()
		e.start()
		r := e.waitStatus(run.ID, "interrupted")
		if len(r.Steps) != 1 || r.Steps[0].Status != "interrupted" {
			t.Fatalf("steps %+v", r.Steps)
		}
		if n := len(sc.Requests()); n != 1 {
			t.Fatalf("the model was asked %d times for one stored answer", n)
		}
		sc.Push(fakellm.Say("It may have run; check before repeating."))
		next := e.message("t-agent", "did it work?")
		e.waitStatus(next.ID, "succeeded")
		reqs := sc.Requests()
		if len(reqs) != 2 || !strings.Contains(strings.Join(reqs[1].Texts(), "\n"), "Outcome unknown") {
			t.Fatalf("%d requests; the model was not told the outcome is unknown", len(reqs))
		}
		e.stop()
		if got, want := e.keys(), []string{"once:" + run.ID + "/0"}; !equal(got, want) {
			t.Errorf("dispatches = %v, want exactly %v", got, want)
		}
	})
}
