package tools

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestExecStreamsOutputWhileRunning: a running tool's output reaches
// Call.Output as it is written, before the tool ends — the tool below
// waits for a file the test creates only once the first line arrived —
// in order, stdout and stderr alike, also past the captured-output cap;
// the Result stays capped.
func TestExecStreamsOutputWhileRunning(t *testing.T) {
	t.Parallel()
	gate := filepath.Join(t.TempDir(), "go-on")
	e := &Exec{Command: []string{"/bin/sh", script(t, `echo "step 1 of 3: build"
i=0
while [ ! -e "$1" ]; do i=$((i+1)); [ $i -gt 3000 ] && exit 9; sleep 0.01; done
echo "step 2 of 3: push" >&2
head -c 3000 /dev/zero | tr '\0' 'x'
echo
echo "step 3 of 3: done"`), "{{.gate}}"}, MaxOutput: 1000, Timeout: time.Minute}
	var mu sync.Mutex
	var seen bytes.Buffer
	first := make(chan struct{})
	var once sync.Once
	sink := func(p []byte) {
		mu.Lock()
		seen.Write(p)
		mu.Unlock()
		once.Do(func() { close(first) })
	}
	done := make(chan error, 1)
	var res Result
	go func() {
		var err error
		res, err = e.Run(context.Background(), Call{Args: map[string]any{"gate": gate}, Output: sink})
		done <- err
	}()
	select {
	case <-first:
	case err := <-done:
		t.Fatalf("the tool ended (%v) before any output was streamed", err)
	}
	mu.Lock()
	early := seen.String()
	mu.Unlock()
	if !strings.HasPrefix(early, "step 1 of 3: build") {
		t.Fatalf("first output %q", early)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	all := seen.String()
	i1, i2, i3 := strings.Index(all, "step 1"), strings.Index(all, "step 2"), strings.Index(all, "step 3")
	if i1 < 0 || i2 < i1 || i3 < i2 || strings.Count(all, "x") != 3000 {
		t.Errorf("streamed output out of order or incomplete: %d %d %d, %d x", i1, i2, i3, strings.Count(all, "x"))
	}
	if !res.Truncated || len(res.Output) > 1100 {
		t.Errorf("result not capped: %d bytes, truncated %v", len(res.Output), res.Truncated)
	}
}
