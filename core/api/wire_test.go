package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core"
)

// rawFrames opens a stream and returns its first n frames byte for byte
// (each ending in its blank line), or every frame when the stream ends
// sooner.
func rawFrames(t *testing.T, method, url, token string, body any, n int) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequestWithContext(ctx, method, url, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" ||
		res.Header.Get("Cache-Control") != "no-store" || res.Header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("status %d, headers %v", res.StatusCode, res.Header)
	}
	br := bufio.NewReader(res.Body)
	var frames []string
	var cur strings.Builder
	for len(frames) < n {
		line, err := br.ReadString('\n')
		cur.WriteString(line)
		if err != nil {
			break
		}
		if line == "\n" {
			frames = append(frames, cur.String())
			cur.Reset()
		}
	}
	return frames
}

// TestStreamWireFormat pins the bytes of core/api's three event streams
// (written through core/sse): what EventSource, the Go clients and
// clients/js read.
func TestStreamWireFormat(t *testing.T) {
	t.Parallel()
	t.Run("RunEvents", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.st.addRun(&core.Run{ID: "r1", Thread: core.Thread{Channel: "console", Key: "x"}, Status: core.RunSucceeded})
		b.st.appendEvent("r1", core.EventRunQueued)
		b.st.appendEvent("r1", core.EventTurnFinished)
		got := rawFrames(t, "GET", b.url+"/api/v1/runs/r1/events", adminToken, nil, 10)
		want := []string{
			"id: 1\nevent: run.queued\ndata: {\"seq\":1,\"run_id\":\"r1\",\"type\":\"run.queued\",\"at\":\"2026-01-02T03:04:05Z\",\"data\":{\"n\":1}}\n\n",
			"id: 2\nevent: turn.finished\ndata: {\"seq\":2,\"run_id\":\"r1\",\"type\":\"turn.finished\",\"at\":\"2026-01-02T03:04:05Z\",\"data\":{\"n\":2}}\n\n",
			"event: end\ndata: {\"run_id\":\"r1\",\"status\":\"succeeded\"}\n\n",
		}
		if strings.Join(got, "") != strings.Join(want, "") {
			t.Fatalf("wrote\n%q\nwant\n%q", got, want)
		}
	})
	t.Run("ChangeFeed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got := rawFrames(t, "GET", b.url+"/api/v1/events", adminToken, nil, 2)
		want := []string{"retry: 2000\n\n", "id: 1\nevent: ready\ndata: {\"approvals\":0,\"runs\":0}\n\n"}
		if strings.Join(got, "") != strings.Join(want, "") {
			t.Fatalf("wrote\n%q\nwant\n%q", got, want)
		}
	})
	t.Run("AgentSession", func(t *testing.T) {
		t.Parallel()
		b := setupAgent(t)
		got := rawFrames(t, "POST", b.url+"/api/v1/agent/runs", otherToken, map[string]any{"text": "hello"}, 100)
		if len(got) < 4 {
			t.Fatalf("frames %q", got)
		}
		// Named events, one line of JSON each, no ids: a turn is not
		// resumed by Last-Event-ID.
		frame := regexp.MustCompile(`^event: [a-z]+\.[a-z]+\ndata: \{[^\n]*\}\n\n$`)
		for _, f := range got {
			if !frame.MatchString(f) {
				t.Errorf("frame %q is not event+data", f)
			}
		}
		if !regexp.MustCompile(`^event: run.queued\ndata: \{"position":0,"sessionId":"[^"]+","turnId":"[^"]+"\}\n\n$`).MatchString(got[0]) {
			t.Errorf("first frame %q", got[0])
		}
		if !strings.HasPrefix(got[len(got)-1], "event: turn.finished\ndata: {") {
			t.Errorf("last frame %q", got[len(got)-1])
		}
	})
}
