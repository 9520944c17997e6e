package fakellm

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/opsgate/opsgate/core/agent"
)

// Model is the zero-latency fake model: an in-process agent.Model with no
// network, no serialization and no waiting, so a benchmark of an agent turn
// measures opsgate's own cost per tool call and nothing of the model's.
// Respond decides each turn from the request; it must be safe for
// concurrent use when sessions run in parallel.
type Model struct {
	Respond func(req *agent.Request) (*agent.Response, error)
	// Record keeps every request (off in benchmarks: it only costs memory).
	Record bool

	calls    atomic.Int64
	mu       sync.Mutex
	requests []*agent.Request
}

var _ agent.Model = (*Model)(nil)

// Stream answers at once: the text as one delta, then the response.
func (m *Model) Stream(ctx context.Context, req *agent.Request, sink agent.Sink) (*agent.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.calls.Add(1)
	if m.Record {
		m.mu.Lock()
		cp := *req
		cp.Messages = append([]agent.RequestMessage(nil), req.Messages...)
		m.requests = append(m.requests, &cp)
		m.mu.Unlock()
	}
	resp, err := m.Respond(req)
	if err != nil {
		return nil, err
	}
	out := *resp
	out.ToolCalls = append([]agent.ToolCall(nil), resp.ToolCalls...)
	if out.Stop == "" {
		out.Stop = agent.StopEnd
		if len(out.ToolCalls) > 0 {
			out.Stop = agent.StopToolUse
		}
	}
	if sink != nil && out.Text != "" {
		sink(agent.Delta{Text: out.Text})
	}
	return &out, nil
}

// Calls is how many turns the model answered.
func (m *Model) Calls() int64 { return m.calls.Load() }

// Requests returns the recorded requests (Record must be set).
func (m *Model) Requests() []*agent.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*agent.Request(nil), m.requests...)
}

// ErrNoReply is returned by a Replies model with nothing left.
var ErrNoReply = errors.New("fakellm: no scripted reply")

// Replies is a Model that answers with resps in order, then ErrNoReply.
func Replies(resps ...*agent.Response) *Model {
	var mu sync.Mutex
	return &Model{Record: true, Respond: func(*agent.Request) (*agent.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(resps) == 0 {
			return nil, ErrNoReply
		}
		r := resps[0]
		resps = resps[1:]
		return r, nil
	}}
}

// Looping is a stateless Model for load: while the request holds fewer than
// n tool results after its last user message it asks for call again (a
// fresh id each time), then answers final. Any number of sessions can share
// it, since each turn is decided from its own request alone.
func Looping(call agent.ToolCall, n int, final string) *Model {
	return &Model{Respond: func(req *agent.Request) (*agent.Response, error) {
		results := 0
		for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != agent.RoleUser; i-- {
			if req.Messages[i].Role == agent.RoleTool {
				results++
			}
		}
		if results >= n {
			return &agent.Response{Text: final, Usage: agent.Usage{InputTokens: 1, OutputTokens: 1}}, nil
		}
		c := call
		c.ID = "call_" + strconv.Itoa(results)
		return &agent.Response{ToolCalls: []agent.ToolCall{c}, Usage: agent.Usage{InputTokens: 1, OutputTokens: 1}}, nil
	}}
}

// Gated is a model for streaming tests: each turn waits until Ready is
// closed (so a test can subscribe first), then streams Deltas one by one
// and answers with their text.
type Gated struct {
	Ready  chan struct{}
	Deltas []string
}

var _ agent.Model = (*Gated)(nil)

// NewGated returns a Gated model streaming deltas once its Ready is closed.
func NewGated(deltas ...string) *Gated { return &Gated{Ready: make(chan struct{}), Deltas: deltas} }

// Stream waits for Ready (or ctx), then streams the deltas.
func (g *Gated) Stream(ctx context.Context, _ *agent.Request, sink agent.Sink) (*agent.Response, error) {
	select {
	case <-g.Ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	text := ""
	for _, d := range g.Deltas {
		if sink != nil {
			sink(agent.Delta{Text: d})
		}
		text += d
	}
	return &agent.Response{Text: text, Stop: agent.StopEnd}, nil
}
