package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func sdkParams(name string, args any) *sdk.CallToolParams {
	return &sdk.CallToolParams{Name: name, Arguments: args}
}

const twoQuestions = `{"questions":[{"id":"env","kind":"choice","text":"Which environment?","choices":["staging","prod"]},
	{"id":"note","kind":"text","text":"Anything else?","optional":true}]}`

const oneConfirm = `{"questions":[{"id":"go","kind":"confirm","text":"Restart now?"}]}`

// waitingRun starts a triage run (it waits for its agent: waiting_input)
// as c and puts a question on it.
func waitingRun(t *testing.T, c *client, questions string) (string, string) {
	t.Helper()
	runID, _ := startTriage(t, c, "q"+randomID()[:6])
	qid := "q-" + randomID()[:8]
	theEnv.qs.ask(runID, qid, questions)
	t.Cleanup(func() { c.call("cancel_run", map[string]any{"runId": runID}) })
	return runID, qid
}

// Elicitation on every protocol version that has it: 2026-07-28 as an
// input_required retry (the SDK client retries with the answer), the
// others as elicitation/create in the session.
func TestInteractElicitsAnswers(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"2026-07-28", "2025-11-25", "2025-06-18"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			var asked atomic.Int64
			var schema string
			c := connect(t, agentToken, clientOpts{version: v, elicit: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				asked.Add(1)
				b, _ := json.Marshal(req.Params.RequestedSchema)
				schema = string(b)
				return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"env": "prod"}}, nil
			}})
			runID, qid := waitingRun(t, c, twoQuestions)
			got := c.mustOK("get_run", map[string]any{"runId": runID}).obj("run")
			var q map[string]any
			for _, a := range got["pending_actions"].([]any) {
				if a.(map[string]any)["kind"] == "question" {
					q = a.(map[string]any)
				}
			}
			if q == nil || q["id"] != qid || len(q["questions"].([]any)) != 2 || q["answerable"] != true {
				t.Fatalf("question action = %v", got["pending_actions"])
			}
			r := c.mustOK("interact", map[string]any{"runId": runID, "actionId": qid})
			if in := r.obj("interaction"); in["mode"] != "elicitation" || in["outcome"] != "accept" {
				t.Fatalf("interaction = %v", r.out)
			}
			if asked.Load() != 1 || !strings.Contains(schema, `"enum":["staging","prod"]`) || !strings.Contains(schema, `"required":["env"]`) {
				t.Fatalf("form: asked %d, schema %s", asked.Load(), schema)
			}
			var ans []map[string]any
			if err := json.Unmarshal(theEnv.qs.answer(qid), &ans); err != nil || len(ans) != 2 || ans[0]["answer"] != "prod" || ans[1]["isSkipped"] != true {
				t.Fatalf("answer = %s", theEnv.qs.answer(qid))
			}
		})
	}
}

func TestInteractCancelledFormKeepsTheWait(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			c := connect(t, agentToken, clientOpts{version: v, elicit: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				return &sdk.ElicitResult{Action: "cancel"}, nil
			}})
			runID, qid := waitingRun(t, c, oneConfirm)
			r := c.mustOK("interact", map[string]any{"runId": runID, "actionId": qid})
			if in := r.obj("interaction"); in["outcome"] != "cancel" || in["action"].(map[string]any)["id"] != qid {
				t.Fatalf("interaction = %v", r.out)
			}
			if r.obj("run")["status"] != "waiting_input" || theEnv.qs.answer(qid) != nil {
				t.Fatalf("cancel changed something: %v", r.obj("run")["status"])
			}
		})
	}
}

// Without elicitation the action comes back; answer_ask takes the answer.
func TestAnswerAsk(t *testing.T) {
	t.Parallel()
	c := connect(t, agentToken)
	runID, qid := waitingRun(t, c, twoQuestions)
	r := c.mustOK("interact", map[string]any{"runId": runID, "actionId": qid})
	if in := r.obj("interaction"); in["mode"] != "none" || in["outcome"] != "unsupported" || in["action"].(map[string]any)["kind"] != "question" {
		t.Fatalf("interaction = %v", r.out)
	}
	c.mustErr("invalid_answer", "answer_ask", map[string]any{"runId": runID, "actionId": qid,
		"answer": []any{map[string]any{"questionId": "env", "answer": "moon"}}})
	c.mustErr("invalid_answer", "answer_ask", map[string]any{"runId": runID, "actionId": qid, "answer": map[string]any{"isConfirmed": true}})
	c.mustErr("not_found", "answer_ask", map[string]any{"runId": runID, "actionId": "nope", "answer": map[string]any{"isConfirmed": true}})
	connect(t, ciToken).mustErr("not_found", "answer_ask", map[string]any{"runId": runID, "actionId": qid, "answer": map[string]any{"isConfirmed": true}})
	c.mustOK("answer_ask", map[string]any{"runId": runID, "actionId": qid,
		"answer": []any{map[string]any{"questionId": "env", "answer": "Staging"}, map[string]any{"questionId": "note", "isSkipped": true}}})
	if a := string(theEnv.qs.answer(qid)); !strings.Contains(a, `"Staging"`) {
		t.Fatalf("answer %s", a)
	}
	// A single confirm question takes a confirmation.
	runID, qid = waitingRun(t, c, oneConfirm)
	c.mustOK("answer_ask", map[string]any{"runId": runID, "actionId": qid, "answer": map[string]any{"isConfirmed": false, "feedback": "later"}})
	if a := string(theEnv.qs.answer(qid)); !strings.Contains(a, `"isConfirmed":false`) {
		t.Fatalf("confirmation %s", a)
	}
	// Someone else's question: the authority's refusal (the reader is not
	// the requester, and an agent is nobody's approver).
	runID, qid = waitingRun(t, c, oneConfirm)
	connect(t, readerToken).mustErr("not_approver", "answer_ask", map[string]any{"runId": runID, "actionId": qid, "answer": map[string]any{"isConfirmed": true}})
	// An agent_call action is not a question.
	got := c.mustOK("get_run", map[string]any{"runId": runID}).obj("run")
	callID := got["pendingAgentCall"].(map[string]any)["id"]
	c.mustErr("not_a_question", "answer_ask", map[string]any{"runId": runID, "actionId": callID, "answer": map[string]any{"isConfirmed": true}})
	if in := c.mustOK("interact", map[string]any{"runId": runID, "actionId": callID}).obj("interaction"); in["mode"] != "none" ||
		in["action"].(map[string]any)["kind"] != "agent_call" {
		t.Fatalf("interact on an agent call: %v", in)
	}
}

// A requestState is signed: a forged or altered one, or one for another
// action or caller, is refused and changes nothing.
func TestRequestStateIsProtected(t *testing.T) {
	t.Parallel()
	c := connect(t, agentToken)
	runID, qid := waitingRun(t, c, oneConfirm)
	s := theEnv.srv
	good := s.signState(requestState{V: 1, Run: runID, Action: qid, Actor: "agent:claude", Endpoint: PathExternal, Exp: time.Now().Add(time.Minute).Unix()})
	call := func(state string) callResult {
		t.Helper()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"interact","arguments":{"runId":%q,"actionId":%q},
			"requestState":%q,"inputResponses":{"answer":{"action":"accept","content":{"go":true}}},
			"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}}}`,
			runID, qid, state)
		res, b := post(t, PathExternal, agentToken, body, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "interact")
		var m struct {
			Result struct {
				IsError           bool           `json:"isError"`
				StructuredContent map[string]any `json:"structuredContent"`
			} `json:"result"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%d %s", res.StatusCode, b)
		}
		return callResult{out: m.Result.StructuredContent, isError: m.Result.IsError}
	}
	body, mac, _ := strings.Cut(good, ".")
	for name, st := range map[string]string{
		"forged":       "eyJ2IjoxfQ.AAAA",
		"altered":      body + "x." + mac,
		"other action": s.signState(requestState{V: 1, Run: runID, Action: "other", Actor: "agent:claude", Endpoint: PathExternal, Exp: time.Now().Add(time.Minute).Unix()}),
		"other actor":  s.signState(requestState{V: 1, Run: runID, Action: qid, Actor: "agent:reader", Endpoint: PathExternal, Exp: time.Now().Add(time.Minute).Unix()}),
		"other place":  s.signState(requestState{V: 1, Run: runID, Action: qid, Actor: "agent:claude", Endpoint: PathCodex, Exp: time.Now().Add(time.Minute).Unix()}),
		"expired":      s.signState(requestState{V: 1, Run: runID, Action: qid, Actor: "agent:claude", Endpoint: PathExternal, Exp: time.Now().Add(-time.Minute).Unix()}),
	} {
		if r := call(st); !r.isError || r.code() != "invalid_request_state" || theEnv.qs.answer(qid) != nil {
			t.Errorf("%s: %v", name, r.out)
		}
	}
	if r := call(good); r.isError || theEnv.qs.answer(qid) == nil {
		t.Fatalf("good state: %v", r.out)
	}
}
