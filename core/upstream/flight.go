package upstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/tools"
)

// What a server sends about a call in flight: notifications/progress
// (matched by the progressToken opsgate sent with the call) goes to the
// call's output sink, so the run's events and its thread's status line
// show it as they show an exec tool's output; elicitation/create becomes a
// question to the run's people (elicit.go). A 2026-07-28 server asks in
// its result instead (input requests): the call's own context carries the
// flight. A server that asks by request names no call, so opsgate takes
// the one call in flight on that server, and refuses when there are
// several (docs/mcp-servers.md).

// flight is one tools/call in flight.
type flight struct {
	ctx   context.Context // the call's, bounded by call_timeout
	tool  string          // opsgate's name for the tool
	asker agent.PeopleAsker
	out   tools.OutputSink
}

// flights tracks a client's calls in flight by progress token.
type flights struct {
	mu   sync.Mutex
	byID map[string]*flight
	next atomic.Int64
}

// track registers f and returns its progress token and the function that
// forgets it.
func (fs *flights) track(f *flight) (string, func()) {
	token := "opsgate-" + strconv.FormatInt(fs.next.Add(1), 10)
	fs.mu.Lock()
	if fs.byID == nil {
		fs.byID = map[string]*flight{}
	}
	fs.byID[token] = f
	fs.mu.Unlock()
	return token, func() {
		fs.mu.Lock()
		delete(fs.byID, token)
		fs.mu.Unlock()
	}
}

func (fs *flights) get(token any) *flight {
	s, ok := token.(string)
	if !ok {
		return nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.byID[s]
}

// only returns the one flight, or nil and how many there are.
func (fs *flights) only() (*flight, int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.byID) != 1 {
		return nil, len(fs.byID)
	}
	for _, f := range fs.byID {
		return f, 1
	}
	return nil, 0
}

// progress relays a server's progress on a call to the call's output, one
// line each: "progress 3/10: copying".
func (c *client) progress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req == nil || req.Params == nil {
		return
	}
	f := c.flights.get(req.Params.ProgressToken)
	if f == nil || f.out == nil {
		return
	}
	p := req.Params
	line := "progress " + strconv.FormatFloat(p.Progress, 'f', -1, 64)
	if p.Total > 0 {
		line += "/" + strconv.FormatFloat(p.Total, 'f', -1, 64)
	}
	if p.Message != "" {
		line += ": " + p.Message
	}
	f.out([]byte(c.m.String(line) + "\n"))
}

// elicitation answers a server's elicitation/create request: the call it
// belongs to is the one in flight on this server.
func (c *client) elicitation(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	f, n := c.flights.only()
	if f == nil {
		// Before 2026-07-28 an elicitation names no call, and the SDK's
		// client hands it over without the request whose stream carried
		// it: with several calls in flight nobody can tell which asked.
		c.log.Warn("upstream elicitation refused: it names no call and several are in flight", "calls_in_flight", n)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"opsgate puts an elicitation to the people of the run whose tool call asks, and cannot tell which of the %d calls in flight to server %s asked (an elicitation/create names no call): ask in the tool's result instead (input requests, protocol 2026-07-28), or have one call in flight when you ask", n, c.srv.Name)}
	}
	// The question waits as long as both the request and the call do.
	qctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	return c.ask(qctx, f, req.Params)
}

// ask puts one form elicitation of call f to its run's people.
func (c *client) ask(ctx context.Context, f *flight, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if p == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "elicitation without params"}
	}
	if m := cmp.Or(p.Mode, "form"); m != "form" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("opsgate takes form elicitations only, not %q", m)}
	}
	if f.asker == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "opsgate has nobody to ask for this call (it belongs to no run's dispatch)"}
	}
	fm, err := newForm(c.srv.Name, p.RequestedSchema)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "opsgate cannot put this form to people: " + err.Error()}
	}
	msg := clipText(c.m.String(p.Message), 500)
	intro := fmt.Sprintf("%s asks: %s", f.tool, msg)
	for attempt := 1; ; attempt++ {
		ans, err := f.asker(ctx, intro, fm.ask)
		if err != nil {
			c.log.Warn("upstream elicitation not asked", "tool", f.tool, "err", err)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "opsgate could not put the question to people: " + c.m.String(err.Error())}
		}
		if !ans.Answered {
			c.log.Info("upstream elicitation unanswered", "tool", f.tool, "why", ans.Why)
			return elicitResult(ans, nil), nil
		}
		content, err := fm.content(ans.Reply)
		if err == nil {
			c.log.Info("upstream elicitation answered", "tool", f.tool, "by", ans.By)
			return elicitResult(ans, content), nil
		}
		if attempt == maxElicitAttempts {
			c.log.Info("upstream elicitation declined: answers did not fit the form", "tool", f.tool, "err", err)
			return &mcp.ElicitResult{Action: "decline"}, nil
		}
		intro = fmt.Sprintf("%s asks again (%s did not fit: %v): %s", f.tool, ans.By, err, msg)
	}
}

// fulfill answers the input requests of a 2026-07-28 result: elicitations
// go to people, roots/list is the empty list; sampling is refused.
func (c *client) fulfill(f *flight, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	out := mcp.InputResponseMap{}
	for id, r := range reqs {
		switch p := r.(type) {
		case *mcp.ElicitParams:
			res, err := c.ask(f.ctx, f, p)
			if err != nil {
				return nil, err
			}
			out[id] = res
		//lint:ignore SA1019 servers may still ask for roots in its deprecation window (SEP-2577)
		case *mcp.ListRootsParams:
			//lint:ignore SA1019 the same: an empty list, as roots/list answers
			out[id] = &mcp.ListRootsResult{Roots: []*mcp.Root{}}
		default:
			return nil, errors.New("opsgate does not provide that input to upstream servers")
		}
	}
	return out, nil
}
