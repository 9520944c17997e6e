package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/internal/npmtest"
)

// TestTypeScriptUpstreamElicits: an upstream server written with the
// official TypeScript SDK (testdata/npm/elicit-server.mjs) asks with
// elicitation/create while its tool runs. opsgate, as its client, turns
// the form into the run's question (the run waits for input, the API
// lists it), relays the server's progress into the run's events, and a
// person's answer goes back to the server — typed as its schema says and
// validated there by the SDK — which answers with what it got.
func TestTypeScriptUpstreamElicits(t *testing.T) {
	t.Parallel()
	npmtest.Bin(t, "mcp-server-everything") // the same npm ci installs the SDK
	script := filepath.Join(npmtest.Dir(t), "elicit-server.mjs")
	e := newEnv(t)
	e.writeConfig(e.storeYAML(""), fmt.Sprintf(`
engine: {poll_interval: 100ms}
mcp_servers:
  - name: ts
    command: [node, %q]
    timeout: 5m
flows:
  - name: deploy
    command: "deploy {service}"
    steps: [{tool: ts.deploy, args: {service: "{{.service}}"}}]
policy:
  rules:
    - {match: {tool: "ts.*"}, action: allow}
`, script))
	e.start()

	run := e.message("ops-ts-elicit", "deploy api")
	e.waitStatus(run.ID, "waiting_input")
	var view struct {
		PendingActions []struct {
			ID        string `json:"id"`
			Kind      string `json:"kind"`
			Questions []struct {
				ID      string   `json:"id"`
				Kind    string   `json:"kind"`
				Text    string   `json:"text"`
				Choices []string `json:"choices"`
			} `json:"questions"`
		} `json:"pending_actions"`
	}
	if code := e.api("GET", "/api/v1/runs/"+run.ID, nil, &view); code != 200 || len(view.PendingActions) != 1 {
		t.Fatalf("GET run: %d %+v", code, view)
	}
	q := view.PendingActions[0]
	if q.Kind != "question" || len(q.Questions) != 2 || q.Questions[0].ID != "env" || q.Questions[0].Kind != "choice" ||
		strings.Join(q.Questions[0].Choices, ",") != "staging,prod" || q.Questions[1].ID != "replicas" || !strings.Contains(q.Questions[1].Text, "whole number") {
		t.Fatalf("the question: %+v", q)
	}
	// The server's progress is in the run's events while it waits.
	waitEvent(t, e, run.ID, "progress 1/2: asking where")
	// Not a number: the answer is taken (the question asks for text) but
	// the schema refuses it, so the run asks again, saying why.
	answer := func(replicas string) {
		t.Helper()
		var v struct {
			PendingActions []struct {
				ID string `json:"id"`
			} `json:"pending_actions"`
		}
		e.waitStatus(run.ID, "waiting_input")
		if code := e.api("GET", "/api/v1/runs/"+run.ID, nil, &v); code != 200 || len(v.PendingActions) != 1 {
			t.Fatalf("GET run: %d %+v", code, v)
		}
		body := map[string]any{"action_id": v.PendingActions[0].ID, "answer": []map[string]any{
			{"questionId": "env", "isSkipped": false, "answer": "prod"}, {"questionId": "replicas", "isSkipped": false, "answer": replicas}}}
		if code := e.api("POST", "/api/v1/runs/"+run.ID+"/answer", body, nil); code != 200 {
			t.Fatalf("answer %s: HTTP %d", replicas, code)
		}
	}
	answer("three")
	waitEvent(t, e, run.ID, "did not fit")
	answer("3")
	done := e.waitRun(run.ID, "final", func(r testRun) bool { return r.Status == "succeeded" || r.Status == "failed" })
	var out string
	for _, st := range done.Steps {
		if strings.HasPrefix(st.Output, "accept") || strings.HasPrefix(st.Output, "decline") {
			out = st.Output
		}
	}
	if done.Status != "succeeded" || out != `accept {"env":"prod","replicas":3}` {
		t.Fatalf("run %s, the server got %q (steps %+v)", done.Status, out, done.Steps)
	}
}

// waitEvent reads the run's event stream until a line holds want.
func waitEvent(t *testing.T, e *env, runID, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.baseURL()+"/api/v1/runs/"+runID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+e.token())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), want) {
			return
		}
	}
	t.Fatalf("run %s's events never held %q: %v", runID, want, sc.Err())
}
