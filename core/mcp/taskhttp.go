package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
)

// The wire side of the Tasks extension: a tools/call answered with a task
// (the SDK answers the marker result; it is replaced here by the
// CreateTaskResult), tasks/get, tasks/update, tasks/cancel, and
// notifications/tasks on a subscriptions/listen stream that asks for task
// ids. Only 2026-07-28 requests reach these.

// The JSON-RPC codes of the extension.
const (
	codeInvalidParams      = -32602
	codeInternal           = -32603
	codeMissingCapability  = -32021
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// taskMethodNames are the extension's methods, answered here; each is a
// route of action authority.UseTask (Server.Guards).
var taskMethodNames = []string{"tasks/get", "tasks/update", "tasks/cancel"}

// taskMethods is taskMethodNames as a set.
var taskMethods = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range taskMethodNames {
		m[n] = true
	}
	return m
}()

// rpcRequest is one JSON-RPC request to a task method.
type rpcRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta           map[string]json.RawMessage `json:"_meta"`
		TaskID         string                     `json:"taskId"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
		Notifications  struct {
			TaskIDs []string `json:"taskIds"`
		} `json:"notifications"`
	} `json:"params"`
}

// declaresTasks reports whether the request's capabilities name the
// extension.
func (r *rpcRequest) declaresTasks() bool {
	var cc struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(r.Params.Meta[metaClientCapabilities], &cc) != nil {
		return false
	}
	_, ok := cc.Extensions[extTasks]
	return ok
}

func writeRPCResult(w http.ResponseWriter, id json.RawMessage, result any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func writeRPCErrorData(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string, data any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
}

var missingTasks = map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{extTasks: map[string]any{}}}}

// callerFromHTTP is the token's identity of an authenticated request.
func callerFromHTTP(r *http.Request) (caller, bool) {
	ti := auth.TokenInfoFromContext(r.Context())
	if ti == nil {
		return caller{}, false
	}
	a, ok := ti.Extra[callerKey].(authority.Actor)
	if !ok {
		return caller{}, false
	}
	name, _ := ti.Extra["name"].(string)
	return caller{actor: core.Actor{ID: ti.UserID, Name: name}, scopes: a.Scopes, auth: a}, true
}

// loadTask returns task id when the authority lets c use it (only the
// identity that created it does: authority.UseTask) and it has not
// expired; otherwise the JSON-RPC error to answer, with the refusal's code
// in its data.
func (s *Server) loadTask(ctx context.Context, c caller, id string) (*core.MCPTask, *taskRefusal) {
	if s.tasks() == nil || len(id) > maxIDLen {
		return nil, &taskRefusal{code: codeInvalidParams, msg: "Failed to retrieve task: Task not found", why: string(authority.CodeNotFound)}
	}
	t, err := s.auth.Task(ctx, c.auth, authority.UseTask, id)
	if ref, ok := authority.RefusalOf(err); ok {
		msg := "Failed to retrieve task: Task not found"
		if ref.Code != authority.CodeNotFound {
			msg = "Failed to retrieve task: " + ref.Message
		}
		return nil, &taskRefusal{code: codeInvalidParams, msg: msg, why: string(ref.Code)}
	}
	if err != nil {
		s.log.Error("mcp task", "task", id, "err", err)
		return nil, &taskRefusal{code: codeInternal, msg: "opsgate could not read the task; try again"}
	}
	if !s.o.Now().Before(t.ExpiresAt) {
		return nil, &taskRefusal{code: codeInvalidParams, msg: "Failed to retrieve task: Task has expired", why: "expired"}
	}
	return t, nil
}

// taskRefusal is a task method's JSON-RPC error: its code and message as
// the extension words them, and why (the authority's refusal code, or
// "expired") in its data.
type taskRefusal struct {
	code int
	msg  string
	why  string
}

func (r *taskRefusal) write(w http.ResponseWriter, id json.RawMessage) {
	var data any
	if r.why != "" {
		data = map[string]any{"code": r.why}
	}
	writeRPCErrorData(w, http.StatusOK, id, r.code, r.msg, data)
}

// serveTaskMethod answers tasks/get, tasks/update and tasks/cancel.
func (s *Server) serveTaskMethod(w http.ResponseWriter, r *http.Request, body []byte) {
	var req rpcRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeRPCError(w, http.StatusBadRequest, nil, -32700, "malformed request")
		return
	}
	if !req.declaresTasks() {
		writeRPCErrorData(w, http.StatusOK, req.ID, codeMissingCapability, "Missing required client capability", missingTasks)
		return
	}
	c, ok := callerFromHTTP(r)
	if !ok {
		writeRPCError(w, http.StatusUnauthorized, req.ID, -32600, "unauthenticated")
		return
	}
	ctx := r.Context()
	t, ref := s.loadTask(ctx, c, req.Params.TaskID)
	if ref != nil {
		ref.write(w, req.ID)
		return
	}
	s.log.InfoContext(ctx, "mcp task call", "method", req.Method, "task", t.ID, "actor", c.actor.ID, "run", t.RunID)
	switch req.Method {
	case "tasks/update":
		if err := s.updateTask(ctx, c, t, req.Params.InputResponses); err != nil {
			writeRPCError(w, http.StatusOK, req.ID, codeInvalidParams, err.Error())
			return
		}
		writeRPCResult(w, req.ID, map[string]any{"resultType": "complete"})
	case "tasks/cancel":
		if t.Tool == "flow" {
			if _, te := s.authorizedRunAs(ctx, c, authority.Cancel, t.RunID); te == nil {
				if _, err := s.o.Engine.Cancel(ctx, t.RunID, c.actor); err != nil && !errors.Is(err, core.ErrConflict) {
					s.log.Error("mcp task cancel", "task", t.ID, "err", err)
				}
			}
		}
		// Cancellation is cooperative: an agent's tool call keeps running
		// and records its outcome; tasks/get says what became of it.
		writeRPCResult(w, req.ID, map[string]any{"resultType": "complete"})
	default:
		v, err := s.taskState(ctx, c, t)
		if err != nil {
			s.log.Error("mcp task state", "task", t.ID, "err", err)
			writeRPCError(w, http.StatusOK, req.ID, codeInternal, "opsgate could not read the task; try again")
			return
		}
		writeRPCResult(w, req.ID, withResultType(v, "complete"))
	}
}

// withResultType is v as a result object with resultType set.
func withResultType(v *taskView, rt string) map[string]any {
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if rt != "" {
		m["resultType"] = rt
	}
	return m
}

// updateTask delivers input responses: a form's answer to the run's
// question (as interact would submit it); the URL elicitation of an
// approval needs none (the person decides in the console). Keys that are
// not outstanding are ignored, as the spec asks.
func (s *Server) updateTask(ctx context.Context, c caller, t *core.MCPTask, responses map[string]json.RawMessage) error {
	if t.Tool != "flow" || len(responses) == 0 {
		return nil
	}
	run, err := s.o.Store.RunGet(ctx, t.RunID)
	if err != nil {
		return fmt.Errorf("the task's run cannot be read")
	}
	rv, err := s.runView(ctx, c, run)
	if err != nil {
		return fmt.Errorf("the task's run cannot be read")
	}
	args, _ := json.Marshal(map[string]string{"runId": run.ID})
	x := &call{c: c}
	_ = json.Unmarshal(args, &x.args)
	for i := range rv.PendingActions {
		a := &rv.PendingActions[i]
		raw, ok := responses[a.ID]
		if !ok || a.Kind != "question" {
			continue
		}
		var res sdk.ElicitResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return fmt.Errorf("inputResponses.%s is not an elicitation result", a.ID)
		}
		if res.Action != "accept" {
			continue // the question keeps waiting
		}
		ask, err := askOf(a)
		if err != nil {
			return err
		}
		answer, err := formAnswer(ask, res.Content)
		if err != nil {
			return err
		}
		if _, te := s.submit(ctx, x, a, ask, answer); te != nil {
			return fmt.Errorf("%s: %s", te.Code, te.Message)
		}
	}
	return nil
}

// bufferedWriter holds a response so a task marker can be replaced.
type bufferedWriter struct {
	h      http.Header
	status int
	buf    bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header         { return b.h }
func (b *bufferedWriter) WriteHeader(status int)      { b.status = status }
func (b *bufferedWriter) Write(p []byte) (int, error) { return b.buf.Write(p) }

// serveToolCall lets the stateless handler answer a tools/call and, when a
// tool made a task, answers the CreateTaskResult instead of the marker.
func serveToolCall(next http.Handler, w http.ResponseWriter, r *http.Request) {
	bw := &bufferedWriter{h: http.Header{}, status: http.StatusOK}
	next.ServeHTTP(bw, r)
	out := bw.buf.Bytes()
	var msg struct {
		JSONRPC string                     `json:"jsonrpc"`
		ID      json.RawMessage            `json:"id"`
		Result  map[string]json.RawMessage `json:"result"`
	}
	if bw.status == http.StatusOK && json.Unmarshal(out, &msg) == nil && msg.Result != nil {
		var meta map[string]json.RawMessage
		if json.Unmarshal(msg.Result["_meta"], &meta) == nil && meta[taskMarker] != nil {
			var task map[string]any
			if json.Unmarshal(meta[taskMarker], &task) == nil {
				delete(meta, taskMarker)
				if len(meta) > 0 {
					tm, _ := task["_meta"].(map[string]any)
					if tm == nil {
						tm = map[string]any{}
					}
					for k, v := range meta {
						tm[k] = v
					}
					task["_meta"] = tm
				}
				task["resultType"] = "task"
				if b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": task}); err == nil {
					out = append(b, '\n')
				}
			}
		}
	}
	for k, v := range bw.h {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(bw.status)
	_, _ = w.Write(out)
}

// asksForTasks reports whether a subscriptions/listen body asks for task
// notifications.
func asksForTasks(body []byte) bool {
	var req rpcRequest
	return json.Unmarshal(body, &req) == nil && len(req.Params.Notifications.TaskIDs) > 0
}

// maxListenTasks bounds the tasks one listen stream follows.
const maxListenTasks = 32

// serveTaskListen serves a subscriptions/listen that asks for task ids: it
// acknowledges the caller's own live tasks, then sends notifications/tasks
// with each one's full state whenever it changes, until every one is
// terminal or the client goes.
func (s *Server) serveTaskListen(w http.ResponseWriter, r *http.Request, body []byte) {
	var req rpcRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeRPCError(w, http.StatusBadRequest, nil, -32700, "malformed request")
		return
	}
	if !req.declaresTasks() {
		writeRPCErrorData(w, http.StatusOK, req.ID, codeMissingCapability, "Missing required client capability", missingTasks)
		return
	}
	c, ok := callerFromHTTP(r)
	f, canFlush := w.(http.Flusher)
	if !ok || !canFlush {
		writeRPCError(w, http.StatusInternalServerError, req.ID, codeInternal, "cannot stream")
		return
	}
	ctx := r.Context()
	var tasks []*core.MCPTask
	acked := []string{}
	for _, id := range req.Params.Notifications.TaskIDs {
		if len(tasks) == maxListenTasks {
			break
		}
		if t, _ := s.loadTask(ctx, c, id); t != nil {
			tasks = append(tasks, t)
			acked = append(acked, t.ID)
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	meta := map[string]any{metaSubscriptionID: req.ID}
	send := func(method string, params map[string]any) bool {
		params["_meta"] = meta
		b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", b); err != nil {
			return false
		}
		f.Flush()
		return true
	}
	if !send("notifications/subscriptions/acknowledged", map[string]any{"notifications": map[string]any{"taskIds": acked}}) {
		return
	}
	wakes := make([]<-chan struct{}, 0, len(tasks))
	for _, t := range tasks {
		ch, cancel := s.subscribe(t.RunID)
		defer cancel()
		wakes = append(wakes, ch)
	}
	wake := merge(ctx, wakes)
	poll := time.NewTicker(max(s.o.PollInterval, time.Second))
	defer poll.Stop()
	last := map[string]string{}
	for {
		done := 0
		for _, t := range tasks {
			v, err := s.taskState(ctx, c, t)
			if err != nil {
				s.log.Warn("mcp task listen", "task", t.ID, "err", err)
				continue
			}
			b, _ := json.Marshal(v)
			if last[t.ID] != string(b) {
				last[t.ID] = string(b)
				if !send("notifications/tasks", withResultType(v, "")) {
					return
				}
			}
			if v.terminal() {
				done++
			}
		}
		if done == len(tasks) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-poll.C:
		}
	}
}

// merge forwards a wake from any of chs until ctx ends.
func merge(ctx context.Context, chs []<-chan struct{}) <-chan struct{} {
	out := make(chan struct{}, 1)
	for _, ch := range chs {
		if ch == nil {
			continue
		}
		go func(ch <-chan struct{}) {
			for {
				select {
				case <-ctx.Done():
					return
				case <-ch:
					select {
					case out <- struct{}{}:
					default:
					}
				}
			}
		}(ch)
	}
	return out
}
