package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/authority"
	"github.com/opsgate/opsgate/core/mcp"
	"github.com/opsgate/opsgate/core/shortid"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// tableProbes is every entry of every surface, in the order they run:
// reads first (so lists still show the objects near their top), then what
// changes something, each arranged to change nothing a later probe reads
// (an edit the schema refuses, an answer that is no choice, a pool of
// runs to cancel).
func tableProbes() []tableProbe {
	const (
		rest     = authority.SurfaceREST
		agentAPI = authority.SurfaceAgentAPI
		ext      = authority.SurfaceMCP
		internal = authority.SurfaceMCPInternal
		console  = authority.SurfaceConsole
		local    = authority.SurfaceLocal
		chat     = authority.SurfaceChat
	)
	r1 := func(w *tableWorld) string { return w.r1 }
	a1 := func(w *tableWorld) string { return w.a1 }
	r2Artifact := func(w *tableWorld) string { return w.r2 + "/status" }
	runPath := func(id func(*tableWorld) string, rest string) func(*tableWorld, *testing.T) string {
		return func(w *tableWorld, _ *testing.T) string { return "/api/v1/runs/" + id(w) + rest }
	}
	turn := func(w *tableWorld) string { return w.turn }
	ps := []tableProbe{
		// REST
		{surface: rest, entry: "GET /api/v1/runs/{id}", column: "see run", do: restCall("GET", runPath(r1, ""), nil)},
		{surface: rest, entry: "GET /api/v1/runs/{id}", column: "see session run", do: restCall("GET", runPath(turn, ""), nil)},
		{surface: rest, entry: "GET /api/v1/runs/{id}/events", column: "see run", do: func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
			return w.stream(t, "/api/v1/runs/"+w.r1+"/events", r.token, "")
		}},
		{surface: rest, entry: "GET /api/v1/runs", column: "list runs", do: restListed("/api/v1/runs?limit=200", r1)},
		{surface: rest, entry: "GET /api/v1/approvals/{id}", column: "see approval", do: restCall("GET",
			func(w *tableWorld, _ *testing.T) string { return "/api/v1/approvals/" + w.a1 }, nil)},
		{surface: rest, entry: "GET /api/v1/approvals", column: "list approvals", do: restListed("/api/v1/approvals?limit=200", a1)},
		{surface: rest, entry: "GET /api/v1/events", column: "list approvals", do: func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
			return w.stream(t, "/api/v1/events?kinds=approvals", r.token, w.a1)
		}},
		{surface: rest, entry: "GET /api/v1/messages", column: "see thread", do: restCall("GET", pathOf("/api/v1/messages?thread=console:tbl-r1"), nil)},
		{surface: rest, entry: "GET /api/v1/audit", column: "read audit", do: restCall("GET", pathOf("/api/v1/audit"), nil)},
		{surface: rest, entry: "GET /api/v1/audit/verify", column: "read audit", do: restCall("GET", pathOf("/api/v1/audit/verify"), nil)},
		// The history's order and kind pass the same gate.
		{surface: rest, entry: "GET /api/v1/audit", column: "read audit", do: restCall("GET", pathOf("/api/v1/audit?order=newest&kind=approval.requested"), nil)},
		// Short ids (core/shortid) answer as the whole id does: what a row
		// may not see is no candidate, so its short form is not found.
		{surface: rest, entry: "GET /api/v1/runs/{id}", column: "see run", do: restCall("GET", runPath(short(r1), ""), nil)},
		{surface: rest, entry: "GET /api/v1/runs/{id}", column: "see session run", do: restCall("GET", runPath(short(turn), ""), nil)},
		{surface: rest, entry: "GET /api/v1/approvals/{id}", column: "see approval", do: restCall("GET",
			func(w *tableWorld, _ *testing.T) string { return "/api/v1/approvals/" + shortid.Of(w.a1) }, nil)},
		{surface: rest, entry: "GET /api/v1/grants", column: "read grants", do: restCall("GET", pathOf("/api/v1/grants?status=all"), nil)},
		{surface: rest, entry: "GET /api/v1/me", column: "self", do: restCall("GET", pathOf("/api/v1/me"), nil)},
		{surface: rest, entry: "GET /api/v1/deliveries", column: "administer", do: restCall("GET", pathOf("/api/v1/deliveries"), nil)},
		// a1 is pending: a reader is told "not_decided" (allowed through).
		{surface: rest, entry: "GET /api/v1/approvals/{id}/receipt", column: "see approval", do: restCall("GET",
			func(w *tableWorld, _ *testing.T) string { return "/api/v1/approvals/" + w.a1 + "/receipt" }, nil)},
		{surface: rest, entry: "GET /api/v1/receipts/key", column: "catalog", do: restCall("GET", pathOf("/api/v1/receipts/key"), nil)},
		{surface: rest, entry: "GET /api/v1/policy", column: "catalog", do: restCall("GET", pathOf("/api/v1/policy"), nil)},
		{surface: rest, entry: "GET /api/v1/schedules", column: "list schedules", do: func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
			st, body := w.rest(t, "GET", "/api/v1/schedules", r.token, nil)
			if o := restOutcome(st, body); o != oAllow {
				return o
			}
			if items, _ := body["items"].([]any); len(items) != 1 || items[0].(map[string]any)["name"] != "tbl-nightly" {
				t.Errorf("schedules as %s: %v", r.name, body)
			}
			return oAllow
		}},
		// Agent API
		{surface: agentAPI, entry: "GET /api/v1/agent/sessions/{id}", column: "see session", do: restCall("GET",
			func(w *tableWorld, _ *testing.T) string { return "/api/v1/agent/sessions/" + w.s1 }, nil)},
		{surface: agentAPI, entry: "GET /api/v1/agent/turns/{id}", column: "see session", do: restCall("GET",
			func(w *tableWorld, _ *testing.T) string { return "/api/v1/agent/turns/" + w.turn }, nil)},
		{surface: agentAPI, entry: "GET /api/v1/agent/sessions", column: "use session", do: restCall("GET", pathOf("/api/v1/agent/sessions"), nil)},
		{surface: agentAPI, entry: "GET /api/v1/agent/models", column: "catalog", do: restCall("GET", pathOf("/api/v1/agent/models"), nil)},
		{surface: agentAPI, entry: "GET /api/v1/agent/agents", column: "catalog", do: restCall("GET", pathOf("/api/v1/agent/agents"), nil)},
		// MCP, external and internal
		{surface: ext, entry: "get_run", column: "see run", do: mcpCall(mcp.PathExternal, "get_run", runArg(r1))},
		{surface: ext, entry: "get_run", column: "see session run", do: mcpCall(mcp.PathExternal, "get_run", runArg(turn))},
		{surface: internal, entry: "get_run", column: "see run", do: mcpCall(mcp.PathInternal, "get_run", runArg(r1))},
		{surface: ext, entry: "get_artifact", column: "see run", do: mcpArtifact(mcp.PathExternal, r2Artifact)},
		{surface: internal, entry: "get_artifact", column: "see run", do: mcpArtifact(mcp.PathInternal, r2Artifact)},
		{surface: ext, entry: "get_agent_call", column: "see run", do: mcpCall(mcp.PathExternal, "get_agent_call", taskArgs(nil))},
		{surface: ext, entry: "list_runs", column: "list runs", do: mcpFound(mcp.PathExternal, "list_runs", map[string]any{}, r1)},
		{surface: internal, entry: "list_runs", column: "list runs", do: mcpFound(mcp.PathInternal, "list_runs", map[string]any{}, r1)},
		{surface: ext, entry: "list_artifacts", column: "list runs", do: mcpFound(mcp.PathExternal, "list_artifacts", map[string]any{"limit": 100}, r2Artifact)},
		{surface: internal, entry: "list_artifacts", column: "list runs", do: mcpFound(mcp.PathInternal, "list_artifacts", map[string]any{"limit": 100}, r2Artifact)},
		{surface: ext, entry: "get_record", column: "read audit", do: mcpCall(mcp.PathExternal, "get_record", recordArg)},
		{surface: internal, entry: "get_record", column: "read audit", do: mcpCall(mcp.PathInternal, "get_record", recordArg)},
		{surface: ext, entry: "status", column: "self", do: mcpCall(mcp.PathExternal, "status", noArgs)},
		{surface: internal, entry: "status", column: "self", do: mcpCall(mcp.PathInternal, "status", noArgs)},
		{surface: ext, entry: "list_workflows", column: "catalog", do: mcpCall(mcp.PathExternal, "list_workflows", noArgs)},
		{surface: internal, entry: "list_workflows", column: "catalog", do: mcpCall(mcp.PathInternal, "list_workflows", noArgs)},
		// The Tasks extension's methods on alice's task: an empty update
		// changes nothing.
		{surface: ext, entry: "tasks/get", column: "use task", do: mcpTaskMethod(mcp.PathExternal, "tasks/get", aliceTask, nil)},
		{surface: internal, entry: "tasks/get", column: "use task", do: mcpTaskMethod(mcp.PathInternal, "tasks/get", aliceTask, nil)},
		{surface: ext, entry: "tasks/update", column: "use task", do: mcpTaskMethod(mcp.PathExternal, "tasks/update", aliceTask, noResponses)},
		{surface: internal, entry: "tasks/update", column: "use task", do: mcpTaskMethod(mcp.PathInternal, "tasks/update", aliceTask, noResponses)},
		{surface: ext, entry: mcp.PathWellKnown, column: "public", do: func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
			// Without mcp.oauth the discovery path answers, to anyone, that
			// tokens are bearer tokens.
			st, body := w.rest(t, "GET", "/.well-known/oauth-protected-resource", r.token, nil)
			if e, _ := body["error"].(map[string]any); st == 404 && strings.Contains(fmt.Sprint(e["message"]), "bearer token") {
				return oAllow
			}
			return restOutcome(st, body)
		}},
		// Console
		{surface: console, entry: "GET /runs/{id}", column: "see run", do: consolePage("GET", func(w *tableWorld, _ *testing.T) string { return "/runs/" + w.r1 }, nil, nil)},
		{surface: console, entry: "GET /runs/{id}", column: "see session run", do: consolePage("GET", func(w *tableWorld, _ *testing.T) string { return "/runs/" + w.turn }, nil, nil)},
		{surface: console, entry: "GET /runs", column: "list runs", do: consolePage("GET", pathOf("/runs"), nil, r1)},
		{surface: console, entry: "GET /approvals/{id}", column: "see approval", do: consolePage("GET", func(w *tableWorld, _ *testing.T) string { return "/approvals/" + w.a1 }, nil, nil)},
		{surface: console, entry: "GET /approvals/{id}/receipt", column: "see approval", do: consolePage("GET", func(w *tableWorld, _ *testing.T) string { return "/approvals/" + w.a1 + "/receipt" }, nil, nil)},
		{surface: console, entry: "GET /policy", column: "catalog", do: consolePage("GET", pathOf("/policy"), nil, nil)},
		{surface: console, entry: "GET /approvals", column: "list approvals", do: consolePage("GET", pathOf("/approvals"), nil, a1)},
		{surface: console, entry: "GET /{$}", column: "list approvals", do: consolePage("GET", pathOf("/"), nil, a1)},
		{surface: console, entry: "GET /chat", column: "see thread", do: consolePage("GET", pathOf("/chat?thread=tbl-r1"), nil, nil)},
		{surface: console, entry: "GET /audit", column: "read audit", do: consolePage("GET", pathOf("/audit"), nil, nil)},
		{surface: console, entry: "GET /audit/export", column: "read audit", do: consolePage("GET", pathOf("/audit/export?format=jsonl&kind=approval.requested"), nil, nil)},
		{surface: console, entry: "GET /runs/{id}", column: "see run", do: consoleShort("/runs/", r1)},
		{surface: console, entry: "GET /runs/{id}", column: "see session run", do: consoleShort("/runs/", turn)},
		{surface: console, entry: "GET /approvals/{id}", column: "see approval", do: consoleShort("/approvals/", a1)},
		{surface: console, entry: "GET /grants", column: "read grants", do: consolePage("GET", pathOf("/grants?status=all"), nil, nil)},
		{surface: console, entry: "GET /deliveries", column: "administer", do: consolePage("GET", pathOf("/deliveries"), nil, nil)},
		{surface: console, entry: "GET /schedules", column: "list schedules", do: consolePage("GET", pathOf("/schedules"), nil,
			func(*tableWorld) string { return "tbl-nightly" })},
		{surface: console, entry: "GET /events", column: "self", do: consoleStream},
		{surface: console, entry: "/", column: "self", do: consoleMissing},
		{surface: console, entry: "GET /static/", column: "public", do: consolePage("GET", pathOf("/static/console.css"), nil, nil)},
		{surface: console, entry: "GET /favicon.ico", column: "public", do: consolePage("GET", pathOf("/favicon.ico"), nil, nil)},
		{surface: console, entry: "GET /signin", column: "public", do: consolePage("GET", pathOf("/signin"), nil, nil)},
		{surface: console, entry: "POST /signin", column: "public", authenticates: true, do: consoleSignIn},
		// Local channel
		{surface: local, entry: "GET /local/v1/stream", column: "see thread", do: func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
			return w.stream(t, "/local/v1/stream?thread=local:tbl-l&history=0", r.token, "")
		}},

		// What changes something.
		{surface: rest, entry: "POST /api/v1/approvals/{id}/decision", column: "decide", do: restCall("POST",
			func(w *tableWorld, _ *testing.T) string { return "/api/v1/approvals/" + w.a1 + "/decision" }, func(*tableWorld) any { return badEdit() })},
		// The TUI's label grants nothing: the same answers as without it.
		{surface: rest, entry: "POST /api/v1/approvals/{id}/decision", column: "decide", do: func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
			return restOutcome(w.restWith(t, "POST", "/api/v1/approvals/"+w.a1+"/decision", r.token, http.Header{api.ChannelHeader: {api.TUIChannel}}, badEdit()))
		}},
		// Handed to a person the configuration does not name: refused
		// after the authority, changing nothing.
		{surface: rest, entry: "POST /api/v1/approvals/{id}/delegate", column: "decide", do: restCall("POST",
			func(w *tableWorld, _ *testing.T) string { return "/api/v1/approvals/" + w.a1 + "/delegate" },
			func(*tableWorld) any { return map[string]any{"to": "person:nobody"} })},
		{surface: agentAPI, entry: "POST /api/v1/agent/reply", column: "decide", do: restCall("POST", pathOf("/api/v1/agent/reply"),
			func(w *tableWorld) any {
				return map[string]any{"sessionId": w.s1, "requestId": w.a1, "decision": "allowOnce"}
			})},
		{surface: console, entry: "POST /approvals/{id}/decision", column: "decide", do: consolePage("POST",
			func(w *tableWorld, _ *testing.T) string { return "/approvals/" + w.a1 + "/decision" },
			func(*tableWorld) url.Values {
				return url.Values{"action": {"edit"}, "arg:service": {"Bad Name"}, "arg:version": {"1"}}
			}, nil)},
		{surface: console, entry: "POST /approvals/{id}/delegate", column: "decide", do: consolePage("POST",
			func(w *tableWorld, _ *testing.T) string { return "/approvals/" + w.a1 + "/delegate" },
			func(*tableWorld) url.Values { return url.Values{"to": {"person:nobody"}} }, nil)},
		{surface: local, entry: "POST /local/v1/decisions", column: "decide", do: restCall("POST", pathOf("/local/v1/decisions"), func(w *tableWorld) any {
			d := badEdit()
			d["thread"], d["approval_id"], d["event_id"] = "local:tbl-d", w.a1, w.uniq("d")
			return d
		})},
		{surface: chat, entry: "decision", column: "decide", do: func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
			_, err := w.eng.HandleEvent(context.Background(), core.ChannelEvent{Channel: "slack", EventID: w.uniq("ev"),
				Actor: core.Actor{ID: r.chat}, Thread: core.Thread{Channel: "slack", Key: "C1"}, ReceivedAt: time.Now().UTC(),
				Decision: &core.Decision{ApprovalID: w.a1, Action: approvals.ActionEdit, Args: badEdit()["args"].(map[string]any)}})
			return chatOutcome(err)
		}},
		{surface: rest, entry: "POST /api/v1/runs/{id}/answer", column: "answer", do: restCall("POST", runPath(func(w *tableWorld) string { return w.q1 }, "/answer"),
			func(w *tableWorld) any {
				return map[string]any{"action_id": w.question, "answer": json.RawMessage(badAnswer)}
			})},
		{surface: rest, entry: "POST /api/v1/runs/{id}/answer", column: "answer", do: func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
			return restOutcome(w.restWith(t, "POST", "/api/v1/runs/"+w.q1+"/answer", r.token, http.Header{api.ChannelHeader: {api.TUIChannel}},
				map[string]any{"action_id": w.question, "answer": json.RawMessage(badAnswer)}))
		}},
		{surface: ext, entry: "answer_ask", column: "answer", do: mcpCall(mcp.PathExternal, "answer_ask", answerArgs)},
		{surface: internal, entry: "answer_ask", column: "answer", do: mcpCall(mcp.PathInternal, "answer_ask", answerArgs)},
		{surface: ext, entry: "interact", column: "answer", do: mcpCall(mcp.PathExternal, "interact", questionArgs)},
		{surface: internal, entry: "interact", column: "answer", do: mcpCall(mcp.PathInternal, "interact", questionArgs)},
		{surface: console, entry: "POST /runs/{id}/answer", column: "answer", do: consolePage("POST",
			func(w *tableWorld, _ *testing.T) string { return "/runs/" + w.q1 + "/answer" },
			func(w *tableWorld) url.Values { return url.Values{"action_id": {w.question}, "q:env": {"moon"}} }, nil)},
		{surface: chat, entry: "answer", column: "answer", do: func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
			return chatOutcome(w.eng.Answer(context.Background(), core.Actor{ID: r.chat}, "slack", w.q1, w.question, json.RawMessage(badAnswer)))
		}},
		{surface: agentAPI, entry: "POST /api/v1/agent/answer", column: "use session", do: restCall("POST", pathOf("/api/v1/agent/answer"),
			func(w *tableWorld) any {
				return map[string]any{"sessionId": w.s1, "requestId": "ask-0", "answers": json.RawMessage(badAnswer)}
			})},
		{surface: ext, entry: "claim_agent_call", column: "claim", do: mcpCall(mcp.PathExternal, "claim_agent_call", taskArgs(func(r tableRow) map[string]any {
			return map[string]any{"claimId": "claim-" + r.name}
		}))},
		{surface: ext, entry: "call_agent_tool", column: "claim", do: mcpCall(mcp.PathExternal, "call_agent_tool", taskArgs(func(tableRow) map[string]any {
			return map[string]any{"ownerToken": "og_forged", "toolCallId": "c1", "toolId": "status", "input": map[string]any{"service": "api"}}
		}))},
		{surface: ext, entry: "read_agent_asset", column: "claim", do: mcpCall(mcp.PathExternal, "read_agent_asset", taskArgs(func(tableRow) map[string]any {
			return map[string]any{"ownerToken": "og_forged", "assetId": "context"}
		}))},
		{surface: ext, entry: "complete_agent_call", column: "claim", do: mcpCall(mcp.PathExternal, "complete_agent_call", taskArgs(func(tableRow) map[string]any {
			return map[string]any{"ownerToken": "og_forged", "result": map[string]any{"summary": "x"}}
		}))},
		{surface: ext, entry: "fail_agent_call", column: "claim", do: mcpCall(mcp.PathExternal, "fail_agent_call", taskArgs(func(tableRow) map[string]any {
			return map[string]any{"ownerToken": "og_forged", "message": "no"}
		}))},
		{surface: rest, entry: "DELETE /api/v1/grants/{id}", column: "revoke grant", do: restCall("DELETE",
			func(w *tableWorld, _ *testing.T) string { return "/api/v1/grants/" + w.g1 }, nil)},
		{surface: console, entry: "POST /grants/{id}/revoke", column: "revoke grant", do: consolePage("POST",
			func(w *tableWorld, _ *testing.T) string { return "/grants/" + w.g1 + "/revoke" }, nil, nil)},
		// No such delivery or schedule: once the authority let the token
		// through, the handler says so, and nothing changes.
		{surface: rest, entry: "POST /api/v1/deliveries/{id}/requeue", column: "administer",
			do: restMissing("/api/v1/deliveries/no-such-delivery/requeue", `delivery "no-such-delivery" not found`)},
		{surface: console, entry: "POST /deliveries/{id}/requeue", column: "administer", do: consoleMissingObject(pathOf("/deliveries/no-such-delivery/requeue"))},
		{surface: rest, entry: "POST /api/v1/schedules/{name}/run", column: "administer",
			do: restMissing("/api/v1/schedules/no-such-schedule/run", `schedule "no-such-schedule" not found`)},
		{surface: rest, entry: "POST /api/v1/schedules/{name}/pause", column: "administer",
			do: restMissing("/api/v1/schedules/no-such-schedule/pause", `schedule "no-such-schedule" not found`)},
		{surface: rest, entry: "POST /api/v1/schedules/{name}/resume", column: "administer",
			do: restMissing("/api/v1/schedules/no-such-schedule/resume", `schedule "no-such-schedule" not found`)},
		{surface: console, entry: "POST /schedules/{name}/{action}", column: "administer", do: consoleMissingObject(pathOf("/schedules/no-such-schedule/run"))},
		{surface: rest, entry: "POST /api/v1/messages", column: "request", do: restCall("POST", pathOf("/api/v1/messages"),
			func(w *tableWorld) any { return map[string]any{"thread": w.uniq("tbl-req"), "text": "status api"} })},
		{surface: ext, entry: "flow", column: "request", do: mcpCall(mcp.PathExternal, "flow", flowArgs)},
		{surface: internal, entry: "flow", column: "request", do: mcpCall(mcp.PathInternal, "flow", flowArgs)},
		{surface: console, entry: "POST /chat", column: "request", do: consolePage("POST", pathOf("/chat"),
			func(w *tableWorld) url.Values {
				return url.Values{"thread": {w.uniq("tbl-chat")}, "text": {"status api"}}
			}, nil)},
		{surface: local, entry: "POST /local/v1/messages", column: "request", do: restCall("POST", pathOf("/local/v1/messages"),
			func(w *tableWorld) any {
				return map[string]any{"thread": "local:" + w.uniq("tbl-local"), "text": "status api"}
			})},
		{surface: chat, entry: "message", column: "request", do: func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
			rc, err := w.eng.HandleEvent(context.Background(), core.ChannelEvent{Channel: "slack", EventID: w.uniq("ev"),
				Actor: core.Actor{ID: r.chat}, Thread: core.Thread{Channel: "slack", Key: w.uniq("C")}, Text: "status api", ReceivedAt: time.Now().UTC()})
			if err == nil && (rc.Refused || rc.RunID == "") {
				return oDenied
			}
			return chatOutcome(err)
		}},
		{surface: agentAPI, entry: "POST /api/v1/agent/sessions", column: "use session", do: restCall("POST", pathOf("/api/v1/agent/sessions"),
			func(*tableWorld) any { return map[string]any{} })},
		{surface: agentAPI, entry: "POST /api/v1/agent/runs", column: "use session", do: func(t *testing.T, w *tableWorld, r tableRow, i int) outcome {
			if tableAccepts[authority.SurfaceAgentAPI][i] == oAllow {
				w.sc.Push(fakellm.Say("again"))
			}
			return restOutcome(w.rest(t, "POST", "/api/v1/agent/runs", r.token, map[string]any{"sessionId": w.s1, "text": "again"}))
		}},
		{surface: agentAPI, entry: "POST /api/v1/agent/turns/{id}/cancel", column: "cancel session run", do: restCall("POST",
			func(w *tableWorld, _ *testing.T) string { return "/api/v1/agent/turns/" + w.turn + "/cancel" }, func(*tableWorld) any { return map[string]any{} })},
		{surface: rest, entry: "POST /api/v1/runs/{id}/cancel", column: "cancel", do: func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
			return w.cancelled(restOutcome(w.rest(t, "POST", "/api/v1/runs/"+w.cancellable(t)+"/cancel", r.token, map[string]any{})))
		}},
		{surface: ext, entry: "tasks/cancel", column: "use task", do: mcpTaskMethod(mcp.PathExternal, "tasks/cancel", (*tableWorld).cancellableTask, nil)},
		{surface: internal, entry: "tasks/cancel", column: "use task", do: mcpTaskMethod(mcp.PathInternal, "tasks/cancel", (*tableWorld).cancellableTask, nil)},
		{surface: ext, entry: "cancel_run", column: "cancel", do: mcpCancel(mcp.PathExternal)},
		{surface: internal, entry: "cancel_run", column: "cancel", do: mcpCancel(mcp.PathInternal)},
		{surface: console, entry: "POST /runs/{id}/cancel", column: "cancel", do: func(t *testing.T, w *tableWorld, r tableRow, i int) outcome {
			id := w.cancellable(t)
			return w.cancelled(consolePage("POST", pathOf("/runs/"+id+"/cancel"), nil, nil)(t, w, r, i))
		}},
		// Last: signing out ends the row's console session.
		{surface: console, entry: "POST /signout", column: "self", do: func(t *testing.T, w *tableWorld, r tableRow, i int) outcome {
			c := w.console(t, r)
			st, loc, _ := w.page(t, c, "POST", "/signout", url.Values{"_csrf": {c.csrf}})
			return consoleOutcome(st, loc)
		}},
	}
	return ps
}

// short is the short form of id(w) as people see it (core/shortid).
func short(id func(*tableWorld) string) func(*tableWorld) string {
	return func(w *tableWorld) string { return shortid.Of(id(w)) }
}

// consoleShort asks for the page of id(w) by its short form: one the row
// may see redirects to the whole id's page; one it may not is not found.
func consoleShort(prefix string, id func(*tableWorld) string) func(*testing.T, *tableWorld, tableRow, int) outcome {
	return func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
		st, loc, _ := w.page(t, w.console(t, r), "GET", prefix+shortid.Of(id(w)), nil)
		if st == http.StatusSeeOther && loc != prefix+id(w) && !strings.HasPrefix(loc, "/signin") {
			t.Errorf("%s%s redirected to %s, want %s%s", prefix, shortid.Of(id(w)), loc, prefix, id(w))
		}
		return consoleOutcome(st, loc)
	}
}

func aliceTask(w *tableWorld, _ *testing.T) string { return w.task }

var noResponses = map[string]any{"inputResponses": map[string]any{}}

func noArgs(*tableWorld, *testing.T, tableRow) map[string]any { return map[string]any{} }

func recordArg(*tableWorld, *testing.T, tableRow) map[string]any {
	return map[string]any{"recordId": "1"}
}

func runArg(id func(*tableWorld) string) func(*tableWorld, *testing.T, tableRow) map[string]any {
	return func(w *tableWorld, _ *testing.T, _ tableRow) map[string]any { return map[string]any{"runId": id(w)} }
}

func questionArgs(w *tableWorld, _ *testing.T, _ tableRow) map[string]any {
	return map[string]any{"runId": w.q1, "actionId": w.question}
}

func answerArgs(w *tableWorld, t *testing.T, r tableRow) map[string]any {
	a := questionArgs(w, t, r)
	a["answer"] = json.RawMessage(badAnswer)
	return a
}

func flowArgs(*tableWorld, *testing.T, tableRow) map[string]any {
	return map[string]any{"flowName": "status", "intent": "api"}
}

// taskArgs references t1's agent task, with extra(row) added.
func taskArgs(extra func(tableRow) map[string]any) func(*tableWorld, *testing.T, tableRow) map[string]any {
	return func(w *tableWorld, _ *testing.T, r tableRow) map[string]any {
		a := map[string]any{"runId": w.t1, "callId": w.call}
		if extra != nil {
			for k, v := range extra(r) {
				a[k] = v
			}
		}
		return a
	}
}

// mcpArtifact reads an artifact: one the token may not see is null.
func mcpArtifact(path string, id func(*tableWorld) string) func(*testing.T, *tableWorld, tableRow, int) outcome {
	return func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
		o, out := w.mcp(t, path, r.token, "get_artifact", map[string]any{"artifactId": id(w)})
		if o == oAllow && out["artifact"] == nil {
			return oHidden
		}
		return o
	}
}

func mcpCancel(path string) func(*testing.T, *tableWorld, tableRow, int) outcome {
	return func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
		o, _ := w.mcp(t, path, r.token, "cancel_run", map[string]any{"runId": w.cancellable(t)})
		return w.cancelled(o)
	}
}

// restMissing is a probe posting to an administrator's endpoint for an
// object that does not exist: the handler's 404 naming it (message) means
// the authority let the token through; Administer hides nothing.
func restMissing(path, message string) func(*testing.T, *tableWorld, tableRow, int) outcome {
	return func(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
		st, body := w.rest(t, "POST", path, r.token, map[string]any{})
		if e, _ := body["error"].(map[string]any); st == 404 && e["message"] == message {
			return oAllow
		}
		return restOutcome(st, body)
	}
}

// consoleMissingObject is restMissing for a console form: the handler's
// own "Not found." is allowed through, as Administer hides nothing.
func consoleMissingObject(path func(*tableWorld, *testing.T) string) func(*testing.T, *tableWorld, tableRow, int) outcome {
	return func(t *testing.T, w *tableWorld, r tableRow, i int) outcome {
		if o := consolePage("POST", path, nil, nil)(t, w, r, i); o != oHidden {
			return o
		}
		return oAllow
	}
}

// consoleStream opens the console's live feed with the row's session.
func consoleStream(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
	c := w.console(t, r)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", w.srv.URL+"/events", nil)
	res, err := c.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	return consoleOutcome(res.StatusCode, res.Header.Get("Location"))
}

// consoleMissing asks for a page that does not exist: signed in, the
// console's own "Not found."; without a session, sign in first.
func consoleMissing(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
	st, loc, body := w.page(t, w.console(t, r), "GET", "/no-such-page", nil)
	if st == 404 && strings.Contains(body, "Not found.") {
		return oAllow
	}
	return consoleOutcome(st, loc)
}

// consoleSignIn signs in with the row's token in a browser of its own.
func consoleSignIn(t *testing.T, w *tableWorld, r tableRow, _ int) outcome {
	c := &consoleClient{c: newBrowser()}
	st, loc, _ := w.signIn(t, c, r.token)
	return consoleOutcome(st, loc)
}
