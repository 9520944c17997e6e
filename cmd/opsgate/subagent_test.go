package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/internal/fakellm"
)

// Sub-agents end to end (docs/agents.md, "Sub-agents"): the real binary,
// a real store, the parent and the child each on a script of their own.

// startSubagentServer starts a server whose default agent "ops" may
// delegate to "reviewer", which may call gated (ask, alice approves);
// rules are more policy rules (YAML list items), after those.
func startSubagentServer(t *testing.T, pgDSN string, rules ...string) (e *env, parent, child *fakellm.Script) {
	t.Helper()
	parent, child = llmServer().Script(t), llmServer().Script(t)
	e = newEnv(t)
	e.writeConfig(e.storeYAML(pgDSN), fmt.Sprintf(`
api:
  tokens:
    - {name: app, token: %[1]q, actor: "console:alice", scopes: [read, request, decide, session.run], agent_concurrency: 1}
models:
  - {name: default, provider: openai, base_url: %[2]q, model: test-model, timeout: 20s}
  - {name: rev, provider: openai, base_url: %[3]q, model: review-model, timeout: 20s}
agents:
  - {name: ops, model: default, tools: [note, "agent:reviewer"], max_steps: 5, default: true}
  - {name: reviewer, model: rev, description: "Reviews and runs gated work.", tools: [gated]}
tools:
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
%[4]s
approvers:
  groups:
    sre: ["console:alice"]
`, agentAppToken, parent.OpenAIURL(), child.OpenAIURL(), strings.Join(rules, "\n")))
	e.start()
	return e, parent, child
}

func TestAgentAPISubagentApprovalOverTheParentsStream(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, pgDSN string) {
		e, parent, child := startSubagentServer(t, pgDSN)
		parent.Push(fakellm.CallTool("agent_reviewer", `{"task":"run gated","reason":"needs review"}`), fakellm.Say("The reviewer ran it."))
		child.Push(fakellm.CallTool("gated", `{"reason":"asked to"}`), fakellm.Say("gated is done."))
		s := openAgentStream(t, e, "/api/v1/agent/runs", map[string]any{"text": "have the reviewer run gated"})
		_, q := s.until(t, "run.queued")
		root := q.data["sessionId"].(string)
		_, p := s.until(t, "permission.requested")
		sub, _ := p.data["sessionId"].(string)
		if p.data["toolName"] != "gated" || sub == "" || sub == root || !strings.HasPrefix(sub, "sub-") || !strings.HasSuffix(sub, "@agent:"+root) {
			t.Fatalf("permission.requested %v (root session %s)", p.data, root)
		}
		// The reply names the child's session; the root's owner may use it.
		code, res := agentCall(t, e, "POST", "/api/v1/agent/reply", map[string]any{"sessionId": root, "requestId": p.data["requestId"], "decision": "allowOnce"})
		if code != 404 {
			t.Errorf("the child's request under the root's session: %d %v", code, res)
		}
		code, res = agentCall(t, e, "POST", "/api/v1/agent/reply", map[string]any{"sessionId": sub, "requestId": p.data["requestId"], "decision": "allowOnce"})
		if code != 200 || res["status"] != "approved" || res["sessionId"] != sub {
			t.Fatalf("reply %d %v", code, res)
		}
		// The decision reaches the parent's stream with the child's session.
		_, d := s.until(t, "permission.decided")
		if d.data["sessionId"] != sub || d.data["requestId"] != p.data["requestId"] || d.data["status"] != "approved" {
			t.Fatalf("permission.decided %v (child session %s)", d.data, sub)
		}
		_, fin := s.until(t, "turn.finished")
		if fin.data["text"] != "The reviewer ran it." || fin.data["sessionId"] != root {
			t.Fatalf("turn.finished %v", fin.data)
		}
		reqs := parent.Requests()
		if last := strings.Join(reqs[len(reqs)-1].Texts(), "\n"); !strings.Contains(last, "gated is done.") || !strings.Contains(last, `source="agent:reviewer"`) {
			t.Errorf("the parent did not get the child's answer: %s", last)
		}
		if last := strings.Join(child.Requests()[1].Texts(), "\n"); !strings.Contains(last, "gated ran") {
			t.Errorf("the child did not get the tool's output: %s", last)
		}
	})
}

func TestAgentAPISubagentQuestionAnsweredByItsSession(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, pgDSN string) {
		e, parent, child := startSubagentServer(t, pgDSN)
		parent.Push(fakellm.CallTool("agent_reviewer", `{"task":"find the environment","reason":"need it"}`), fakellm.Say("The reviewer says prod."))
		child.Push(fakellm.CallTool("ask_user", `{"questions":[{"id":"env","kind":"choice","text":"Which environment?","choices":["staging","prod"]}]}`),
			fakellm.Say("prod"))
		s := openAgentStream(t, e, "/api/v1/agent/runs", map[string]any{"text": "which environment?"})
		_, fin := s.until(t, "turn.finished")
		root, _ := fin.data["sessionId"].(string)
		pq, _ := fin.data["pendingQuestion"].(map[string]any)
		if fin.data["status"] != "finished" || pq == nil || pq["sessionId"] == root || !strings.HasPrefix(fmt.Sprint(pq["sessionId"]), "sub-") {
			t.Fatalf("turn %v", fin.data)
		}
		sub, rid := pq["sessionId"].(string), pq["requestId"].(string)
		// Read later, the parent's turn says the same: the child's question.
		code, turn := agentCall(t, e, "GET", "/api/v1/agent/turns/"+fmt.Sprint(fin.data["turnId"]), nil)
		if tq, _ := turn["pendingQuestion"].(map[string]any); code != 200 || turn["status"] != "finished" || tq["sessionId"] != sub {
			t.Errorf("parent turn %d %v", code, turn)
		}
		code, res := agentCall(t, e, "POST", "/api/v1/agent/answer", map[string]any{"sessionId": sub, "requestId": rid, "model": "default",
			"answers": []map[string]any{{"questionId": "env", "answer": "prod"}}})
		if code != 422 {
			t.Errorf("switching a sub-agent's model: %d %v", code, res)
		}
		a := openAgentStream(t, e, "/api/v1/agent/answer", map[string]any{"sessionId": sub, "requestId": rid,
			"answers": []map[string]any{{"questionId": "env", "isSkipped": false, "answer": "prod"}}})
		if a.status != 200 {
			t.Fatalf("answer: %d %s", a.status, a.body)
		}
		_, fin = a.until(t, "turn.finished")
		if fin.data["status"] != "finished" || fin.data["text"] != "The reviewer says prod." || fin.data["pendingQuestion"] != nil || fin.data["sessionId"] != root {
			t.Fatalf("continued turn %v", fin.data)
		}
		if last := strings.Join(child.Requests()[1].Texts(), "\n"); !strings.Contains(last, "prod") {
			t.Errorf("the child did not get the answer: %s", last)
		}
	})
}

// TestSubagentReferencesCheckAndServeAgree: an unknown agent and a cycle
// are refused by config check and by serve, with the same problems.
func TestSubagentReferencesCheckAndServeAgree(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.writeConfig(e.storeYAML(""), `
models:
  - {name: default, provider: openai, base_url: "http://127.0.0.1:9/v1", model: m}
agents:
  - {name: ops, model: default, tools: ["agent:reviewr", "agent:a"], default: true}
  - {name: reviewer, model: default}
  - {name: a, model: default, tools: ["agent:ops"]}
`)
	checkOut, _, code := runOpsgate(t, e.dir, []string{"config", "check", "--config", e.cfgPath})
	if code != exitFail {
		t.Fatalf("config check exit %d:\n%s", code, checkOut)
	}
	want := problemLine.FindAllString(checkOut, -1)
	joined := strings.Join(want, "\n")
	if len(want) != 2 || !strings.Contains(joined, `agents[0].tools[0]: no agent named "reviewr" (did you mean "reviewer"?)`) ||
		!strings.Contains(joined, "agents[2].tools[0]: agent:ops makes a cycle of sub-agents (ops → a → ops)") {
		t.Fatalf("config check:\n%s", checkOut)
	}
	serveOut, serveCode := serveUntilExit(t, e)
	if got := problemLine.FindAllString(serveOut, -1); serveCode != exitFail || !slices.Equal(want, got) {
		t.Fatalf("serve exit %d, problems differ:\ncheck:\n%s\nserve:\n%s", serveCode, checkOut, serveOut)
	}
}

// TestAgentAPIDelegationAsks: a policy rule on agent:reviewer makes the
// delegation itself ask, on the parent's own session; the child starts
// only once the approver allows it.
func TestAgentAPIDelegationAsks(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, pgDSN string) {
		e, parent, child := startSubagentServer(t, pgDSN, `    - {match: {tool: "agent:*"}, action: ask, approvers: ["group:sre"], allow_self_approval: true}`)
		parent.Push(fakellm.CallTool("agent_reviewer", `{"task":"look at the change","reason":"a second look"}`), fakellm.Say("Reviewed."))
		child.Push(fakellm.Say("It looks right."))
		s := openAgentStream(t, e, "/api/v1/agent/runs", map[string]any{"text": "have the reviewer look"})
		_, q := s.until(t, "run.queued")
		root := q.data["sessionId"].(string)
		_, p := s.until(t, "permission.requested")
		input, _ := p.data["toolInput"].(map[string]any)
		if p.data["toolName"] != "agent:reviewer" || p.data["sessionId"] != root || p.data["reason"] != "a second look" || input["task"] != "look at the change" {
			t.Fatalf("permission.requested %v (root session %s)", p.data, root)
		}
		if n := len(child.Requests()); n != 0 {
			t.Fatalf("the child's model was called %d times before the delegation was allowed", n)
		}
		code, res := agentCall(t, e, "POST", "/api/v1/agent/reply", map[string]any{"sessionId": root, "requestId": p.data["requestId"], "decision": "allowOnce"})
		if code != 200 || res["status"] != "approved" {
			t.Fatalf("reply %d %v", code, res)
		}
		_, fin := s.until(t, "turn.finished")
		if fin.data["text"] != "Reviewed." || len(child.Requests()) != 1 {
			t.Fatalf("turn.finished %v; child turns %d", fin.data, len(child.Requests()))
		}
	})
}
