package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/internal/fakellm"
)

// The Agent API end to end: the real binary, a real store, the fake model
// server scripted per test.

const agentAppToken = "agent-app-token"

// startAgentServer starts a server on agentConfig with its own script on
// the package's fake model server.
func startAgentServer(t *testing.T, pgDSN string) (*env, *fakellm.Script) {
	t.Helper()
	sc := llmServer().Script(t)
	e := newEnv(t)
	agentConfig(e, pgDSN, sc)
	e.start()
	return e, sc
}

// agentConfig is a config whose default agent "ops" talks to sc and may
// call two tools: slow (allowed; it writes started, then waits for the
// file "go" before it finishes, non-idempotent) and note (allowed).
func agentConfig(e *env, pgDSN string, sc *fakellm.Script) {
	slow := e.script("slow.sh", fmt.Sprintf(`
touch %[1]s/started
i=0
while [ ! -e %[1]s/go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
echo slow done
`, e.dir))
	// A short lease: after kill -9 the restarted server reclaims the turn
	// once the dead owner's lease ran out.
	e.writeConfig(e.storeYAML(pgDSN), fmt.Sprintf(`
engine: {lease: 2s}
api:
  tokens:
    - {name: app, token: %[1]q, actor: "console:alice", scopes: [read, request, decide, session.run], agent_concurrency: 1}
models:
  - {name: default, provider: openai, base_url: %[2]q, model: test-model, timeout: 20s}
  - {name: small, provider: openai, base_url: %[2]q, model: small-model, timeout: 20s}
agents:
  - {name: ops, model: default, tools: [slow, note, gated], max_steps: 5, default: true}
tools:
  - name: slow
    risk: external
    idempotent: false
    exec: {command: [%[3]q], timeout: 1m}
  - name: note
    risk: read
    exec: {command: [echo, noted]}
  - name: gated
    risk: reversible
    exec: {command: [echo, gated ran]}
policy:
  rules:
    - {match: {tool: "*"}, action: allow}
    - {match: {tool: gated}, action: ask, approvers: ["group:sre"], allow_self_approval: true}
approvers:
  groups:
    sre: ["console:alice"]
`, agentAppToken, sc.OpenAIURL(), slow))
}

// agentCall calls the Agent API with the app token.
func agentCall(t *testing.T, e *env, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, e.baseURL()+path, rd)
	req.Header.Set("Authorization", "Bearer "+agentAppToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(data, &out)
	return resp.StatusCode, out
}

type agentEvent struct {
	name string
	data map[string]any
}

// agentStream is one POST with Accept: text/event-stream.
type agentStream struct {
	status int
	body   string
	events chan agentEvent
	cancel context.CancelFunc
}

func openAgentStream(t *testing.T, e *env, path string, body any) *agentStream {
	t.Helper()
	b, _ := json.Marshal(body)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", e.baseURL()+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+agentAppToken)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	s := &agentStream{status: resp.StatusCode, events: make(chan agentEvent, 256), cancel: cancel}
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s.body = string(data)
		close(s.events)
		return s
	}
	go func() {
		defer close(s.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		name := ""
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				name = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				var d map[string]any
				_ = json.Unmarshal([]byte(v), &d)
				s.events <- agentEvent{name: name, data: d}
			}
		}
	}()
	return s
}

// until reads events up to the first named name.
func (s *agentStream) until(t *testing.T, name string) ([]string, agentEvent) {
	t.Helper()
	var seen []string
	timeout := time.After(waitBound)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("stream ended before %s; saw %v", name, seen)
			}
			seen = append(seen, ev.name)
			if ev.name == name {
				return seen, ev
			}
		case <-timeout:
			t.Fatalf("no %s within %s; saw %v", name, waitBound, seen)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAgentAPITurnOverSSEAndResult(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, pgDSN string) {
		e, sc := startAgentServer(t, pgDSN)
		sc.Push(fakellm.CallTool("note", `{"reason":"to take a note"}`), fakellm.Say("Noted, ", "all done."))
		s := openAgentStream(t, e, "/api/v1/agent/runs", map[string]any{"text": "take a note"})
		if s.status != 200 {
			t.Fatalf("status %d: %s", s.status, s.body)
		}
		seen, fin := s.until(t, "turn.finished")
		got := strings.Join(seen, " ")
		for _, want := range []string{"run.queued", "turn.started", "tool.started", "tool.finished", "message.committed"} {
			if !strings.Contains(got, want) {
				t.Errorf("no %s in %v", want, seen)
			}
		}
		if fin.data["status"] != "finished" || fin.data["text"] != "Noted, all done." {
			t.Fatalf("turn.finished %v", fin.data)
		}
		count := map[string]int{}
		for _, n := range seen {
			count[n]++
		}
		if count["tool.started"] != 1 || count["tool.finished"] != 1 || count["message.committed"] != 1 || count["turn.finished"] != 1 {
			t.Errorf("each once: %v", seen)
		}
		sid := fin.data["sessionId"].(string)

		// A second turn in the same session, on the other model, without
		// streaming: the result.
		sc.Push(fakellm.Say("Still here."))
		code, res := agentCall(t, e, "POST", "/api/v1/agent/runs", map[string]any{"sessionId": sid, "text": "are you there?", "model": "small"})
		if code != 200 || res["status"] != "finished" || res["text"] != "Still here." {
			t.Fatalf("result %d %v", code, res)
		}
		// The model saw the session's history: the first turn's text.
		reqs := sc.Requests()
		if !strings.Contains(strings.Join(reqs[len(reqs)-1].Texts(), "\n"), "take a note") {
			t.Errorf("the second turn's request lacks the first turn")
		}
		if m := reqs[len(reqs)-1].JSON()["model"]; m != "small-model" {
			t.Errorf("the second turn went to model %v, want small-model", m)
		}
		if reqs[0].JSON()["model"] != "test-model" {
			t.Errorf("the first turn went to %v", reqs[0].JSON()["model"])
		}
		code, ses := agentCall(t, e, "GET", "/api/v1/agent/sessions/"+sid, nil)
		if turns, _ := ses["turns"].([]any); code != 200 || len(turns) != 2 {
			t.Fatalf("session %d %v", code, ses)
		}
		code, models := agentCall(t, e, "GET", "/api/v1/agent/models", nil)
		if items, _ := models["items"].([]any); code != 200 || len(items) != 2 {
			t.Errorf("models %d %v", code, models)
		}
		// The console lists the session's turns among the runs (thread agent:<id>).
		code, runs := agentCall(t, e, "GET", "/api/v1/runs?thread=agent:"+sid, nil)
		if items, _ := runs["items"].([]any); code != 200 || len(items) != 2 || items[0].(map[string]any)["kind"] != "agent" {
			t.Errorf("runs of the session: %d %v", code, runs)
		}
	})
}

func TestAgentAPIQueuePositionAnd429(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, pgDSN string) {
		e, sc := startAgentServer(t, pgDSN)
		// The first turn calls slow, which waits for the file "go".
		sc.Push(fakellm.CallTool("slow", `{"reason":"slowly"}`), fakellm.Say("slow finished"))
		first := openAgentStream(t, e, "/api/v1/agent/runs", map[string]any{"text": "go slow"})
		first.until(t, "tool.started")
		var queued []*agentStream
		for i := range 4 { // agent_concurrency 1: the queue holds 4
			sc.Push(fakellm.Say(fmt.Sprint("turn ", i)))
			s := openAgentStream(t, e, "/api/v1/agent/runs", map[string]any{"text": fmt.Sprint("hello ", i)})
			_, ev := s.until(t, "run.queued")
			if ev.data["position"] != float64(i+1) {
				t.Fatalf("turn %d queued at %v, want %d", i, ev.data["position"], i+1)
			}
			queued = append(queued, s)
		}
		full := openAgentStream(t, e, "/api/v1/agent/runs", map[string]any{"text": "one too many"})
		if full.status != 429 || !strings.Contains(full.body, "queue_full") {
			t.Fatalf("beyond the queue: %d %s", full.status, full.body)
		}
		if err := os.WriteFile(filepath.Join(e.dir, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		first.until(t, "turn.finished")
		for i, s := range queued {
			_, fin := s.until(t, "turn.finished")
			if fin.data["status"] != "finished" {
				t.Errorf("queued turn %d: %v", i, fin.data)
			}
		}
	})
}

func TestAgentAPICancelWithLateResult(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, pgDSN string) {
		e, sc := startAgentServer(t, pgDSN)
		sc.Push(fakellm.CallTool("slow", `{"reason":"slowly"}`), fakellm.Say("must not be asked for"))
		s := openAgentStream(t, e, "/api/v1/agent/runs", map[string]any{"text": "go slow"})
		_, q := s.until(t, "run.queued")
		turn := q.data["turnId"].(string)
		s.until(t, "tool.started")
		waitFor(t, "slow started", func() bool { _, err := os.Stat(filepath.Join(e.dir, "started")); return err == nil })
		code, res := agentCall(t, e, "POST", "/api/v1/agent/turns/"+turn+"/cancel", nil)
		if code != 200 || res["status"] != "aborted" {
			t.Fatalf("cancel %d %v", code, res)
		}
		_, fin := s.until(t, "turn.finished")
		if fin.data["status"] != "aborted" {
			t.Fatalf("turn.finished %v", fin.data)
		}
		// The tool's result arrives after the cancel: refused, the turn
		// stays aborted and the model is not called again.
		requests := len(sc.Requests())
		if err := os.WriteFile(filepath.Join(e.dir, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the late result recorded", func() bool {
			_, r := agentCall(t, e, "GET", "/api/v1/runs/"+turn, nil)
			steps, _ := r["steps"].([]any)
			return len(steps) > 0 && steps[0].(map[string]any)["status"] != "dispatching"
		})
		code, res = agentCall(t, e, "GET", "/api/v1/agent/turns/"+turn, nil)
		if code != 200 || res["status"] != "aborted" {
			t.Errorf("after the late result: %d %v", code, res)
		}
		if n := len(sc.Requests()); n != requests {
			t.Errorf("the model was called %d more times after the cancel", n-requests)
		}
		code, _ = agentCall(t, e, "POST", "/api/v1/agent/turns/"+turn+"/cancel", nil)
		if code != 409 {
			t.Errorf("second cancel: %d, want 409", code)
		}
	})
}

func TestAgentAPIOutcomeUnknownAfterKill9(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, pgDSN string) {
		e, sc := startAgentServer(t, pgDSN)
		sc.Push(fakellm.CallTool("slow", `{"reason":"slowly"}`), fakellm.Say("after the crash"))
		s := openAgentStream(t, e, "/api/v1/agent/runs", map[string]any{"text": "go slow"})
		_, q := s.until(t, "run.queued")
		turn, sid := q.data["turnId"].(string), q.data["sessionId"].(string)
		waitFor(t, "slow started", func() bool { _, err := os.Stat(filepath.Join(e.dir, "started")); return err == nil })
		e.kill() // mid-dispatch of a non-idempotent tool
		e.start()
		var res map[string]any
		waitFor(t, "the turn ends after the restart", func() bool {
			_, res = agentCall(t, e, "GET", "/api/v1/agent/turns/"+turn, nil)
			return res["status"] != "running" && res["status"] != "queued"
		})
		errBody, _ := res["error"].(map[string]any)
		if res["status"] != "error" || errBody["code"] != "AGENT_OUTCOME_UNKNOWN" {
			t.Fatalf("turn after kill -9: %v", res)
		}
		_, ses := agentCall(t, e, "GET", "/api/v1/agent/sessions/"+sid, nil)
		if turns, _ := ses["turns"].([]any); len(turns) != 1 {
			t.Errorf("session %v", ses)
		}
	})
}

func TestAgentAPIQuestionAndAnswer(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, pgDSN string) {
		e, sc := startAgentServer(t, pgDSN)
		sc.Push(fakellm.CallTool("ask_user", `{"questions":[{"id":"env","kind":"choice","text":"Which environment?","choices":["staging","prod"]}]}`),
			fakellm.Say("Deploying to prod."))
		s := openAgentStream(t, e, "/api/v1/agent/runs", map[string]any{"text": "deploy api"})
		seen, fin := s.until(t, "turn.finished")
		pq, _ := fin.data["pendingQuestion"].(map[string]any)
		if fin.data["status"] != "finished" || pq == nil || !strings.Contains(strings.Join(seen, " "), "question.requested") {
			t.Fatalf("turn %v (%v)", fin.data, seen)
		}
		sid, rid := fin.data["sessionId"].(string), pq["requestId"].(string)
		code, res := agentCall(t, e, "POST", "/api/v1/agent/answer", map[string]any{"sessionId": sid, "requestId": rid,
			"answers": []map[string]any{{"questionId": "env", "isSkipped": false, "answer": "moon"}}})
		if code != 422 {
			t.Errorf("a choice that is none: %d %v", code, res)
		}
		// The answer switches the rest of the turn to the other model.
		a := openAgentStream(t, e, "/api/v1/agent/answer", map[string]any{"sessionId": sid, "requestId": rid, "model": "small",
			"answers": []map[string]any{{"questionId": "env", "isSkipped": false, "answer": "prod"}}})
		if a.status != 200 {
			t.Fatalf("answer: %d %s", a.status, a.body)
		}
		seen, started := a.until(t, "turn.started")
		if started.data["model"] != "small" || strings.Contains(strings.Join(seen, " "), "text.delta") {
			t.Errorf("turn.started %v after %v", started.data, seen)
		}
		seen, fin = a.until(t, "turn.finished")
		if fin.data["status"] != "finished" || !strings.Contains(fmt.Sprint(fin.data["text"]), "Deploying to prod.") || fin.data["pendingQuestion"] != nil {
			t.Fatalf("continued turn %v", fin.data)
		}
		if strings.Contains(strings.Join(seen, " "), "turn.started") {
			t.Errorf("a second turn.started: %v", seen)
		}
		reqs := sc.Requests()
		if last := strings.Join(reqs[len(reqs)-1].Texts(), "\n"); !strings.Contains(last, "prod") {
			t.Errorf("the model did not get the answer: %s", last)
		}
		if m := reqs[len(reqs)-1].JSON()["model"]; m != "small-model" {
			t.Errorf("the answered turn went on with %v, want small-model", m)
		}
		if m := reqs[0].JSON()["model"]; m != "test-model" {
			t.Errorf("the turn began with %v", m)
		}
		code, res = agentCall(t, e, "POST", "/api/v1/agent/answer", map[string]any{"sessionId": sid, "requestId": rid, "model": "huge",
			"answers": []map[string]any{{"questionId": "env", "answer": "prod"}}})
		if code != 422 || res["error"].(map[string]any)["field"] != "model" {
			t.Errorf("an unknown model: %d %v", code, res)
		}
		// The session names the console page of its newest turn.
		code, ses := agentCall(t, e, "GET", "/api/v1/agent/sessions/"+sid, nil)
		if turns, _ := ses["turns"].([]any); code != 200 || len(turns) != 1 || !strings.HasSuffix(fmt.Sprint(ses["consoleUrl"]), "/runs/"+fmt.Sprint(fin.data["turnId"])) {
			t.Errorf("session %d %v", code, ses)
		}
	})
}

func TestAgentAPIApprovalOverTheStream(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, pgDSN string) {
		e, sc := startAgentServer(t, pgDSN)
		sc.Push(fakellm.CallTool("gated", `{"reason":"you asked"}`), fakellm.Say("It ran."))
		s := openAgentStream(t, e, "/api/v1/agent/runs", map[string]any{"text": "run gated"})
		_, p := s.until(t, "permission.requested")
		if p.data["toolName"] != "gated" || p.data["reason"] != "you asked" {
			t.Fatalf("permission.requested %v", p.data)
		}
		code, res := agentCall(t, e, "POST", "/api/v1/agent/reply", map[string]any{"sessionId": p.data["sessionId"],
			"requestId": p.data["requestId"], "decision": "allowOnce"})
		if code != 200 || res["status"] != "approved" {
			t.Fatalf("reply %d %v", code, res)
		}
		_, fin := s.until(t, "turn.finished")
		if fin.data["text"] != "It ran." {
			t.Fatalf("turn.finished %v", fin.data)
		}
		reqs := sc.Requests()
		if last := strings.Join(reqs[len(reqs)-1].Texts(), "\n"); !strings.Contains(last, "gated ran") {
			t.Errorf("the model did not get the output: %s", last)
		}
	})
}

func TestAgentAPINoOneCanAnswer(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, pgDSN string) {
		e, sc := startAgentServer(t, pgDSN)
		sc.Push(fakellm.CallTool("gated", `{"reason":"you asked"}`), fakellm.Say("Could not run it."))
		code, res := agentCall(t, e, "POST", "/api/v1/agent/runs", map[string]any{"text": "run gated"})
		if code != 200 || res["status"] != "finished" || res["text"] != "Could not run it." {
			t.Fatalf("result %d %v", code, res)
		}
		reqs := sc.Requests()
		if last := strings.Join(reqs[len(reqs)-1].Texts(), "\n"); !strings.Contains(last, "nobody here can give") {
			t.Errorf("the model was not told nobody could approve: %s", last)
		}
	})
}

func TestAgentAPIStreamDroppedMidWait(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, pgDSN string) {
		e, sc := startAgentServer(t, pgDSN)
		sc.Push(fakellm.CallTool("gated", `{"reason":"you asked"}`), fakellm.Say("Went on without it."))
		s := openAgentStream(t, e, "/api/v1/agent/runs", map[string]any{"text": "run gated"})
		_, q := s.until(t, "run.queued")
		turn := q.data["turnId"].(string)
		s.until(t, "permission.requested")
		s.cancel() // the app hangs up while the approval waits
		var res map[string]any
		waitFor(t, "the turn goes on and ends", func() bool {
			_, res = agentCall(t, e, "GET", "/api/v1/agent/turns/"+turn, nil)
			return res["status"] == "finished"
		})
		if res["text"] != "Went on without it." {
			t.Errorf("turn %v", res)
		}
	})
}

// TestGeneratedTokenDrivesTheAgentAPI: with no api.tokens the server's
// generated admin token holds session.run too, so the Agent API's
// examples (docs/agent-api.md) work on a fresh install.
func TestGeneratedTokenDrivesTheAgentAPI(t *testing.T) {
	t.Parallel()
	sc := llmServer().Script(t)
	e := newEnv(t)
	e.writeConfig(e.storeYAML(""), fmt.Sprintf(`
models:
  - {name: default, provider: openai, base_url: %q, model: test-model, timeout: 20s}
agents:
  - {name: ops, model: default, tools: [], default: true}
`, sc.OpenAIURL()))
	e.start()
	sc.Push(fakellm.Say("Hello from the quickstart."))
	var res map[string]any
	if code := e.api("POST", "/api/v1/agent/runs", map[string]any{"text": "hi"}, &res); code != 200 || res["text"] != "Hello from the quickstart." {
		t.Fatalf("generated token on the Agent API: %d %v", code, res)
	}
	var ses map[string]any
	if code := e.api("GET", "/api/v1/agent/sessions/"+res["sessionId"].(string), nil, &ses); code != 200 {
		t.Fatalf("session: %d", code)
	}
}

// TestRequiredServerDownFailsTheTurn: an agent whose tools reach an
// upstream MCP server marked required fails its turn with a clear error
// while the server is down, without calling the model; an agent that
// does not use the server runs.
func TestRequiredServerDownFailsTheTurn(t *testing.T) {
	t.Parallel()
	sc := llmServer().Script(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String() + "/mcp"
	l.Close()
	e := newEnv(t)
	e.writeConfig(e.storeYAML(""), fmt.Sprintf(`
api:
  tokens:
    - {name: app, token: %[1]q, actor: "console:alice", scopes: [read, request, session.run]}
models:
  - {name: default, provider: openai, base_url: %[2]q, model: test-model, timeout: 20s}
agents:
  - {name: ops, model: default, tools: ["gh.*"], default: true}
  - {name: plain, model: default, tools: []}
mcp_servers:
  - {name: gh, transport: http, url: %[3]q, required: true, connect_timeout: 2s}
`, agentAppToken, sc.OpenAIURL(), down))
	e.start()
	code, res := agentCall(t, e, "POST", "/api/v1/agent/runs", map[string]any{"text": "list the issues"})
	errBody, _ := res["error"].(map[string]any)
	if code != 200 || res["status"] != "error" || errBody["code"] != "required_server_down" || !strings.Contains(fmt.Sprint(errBody["message"]), "gh is required") {
		t.Fatalf("turn with a required server down: %d %v", code, res)
	}
	if n := len(sc.Requests()); n != 0 {
		t.Fatalf("the model was called %d times", n)
	}
	sc.Push(fakellm.Say("fine"))
	if code, res := agentCall(t, e, "POST", "/api/v1/agent/runs", map[string]any{"text": "hi", "agent": "plain"}); code != 200 || res["text"] != "fine" {
		t.Fatalf("an agent without the server: %d %v", code, res)
	}
}
