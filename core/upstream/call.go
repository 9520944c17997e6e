package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/tools"
)

// ToolError reports a result with isError set: the tool ran and said it
// failed. The Result returned next to it carries what it said.
type ToolError struct {
	Server, Tool string
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("upstream %s: %s reported an error (isError)", e.Server, e.Tool)
}

// ErrUnavailable is wrapped when a server cannot be reached for a call.
var ErrUnavailable = errors.New("upstream server unavailable")

// ErrOutcomeUnknown is wrapped when a call was sent but no answer came
// (the connection broke, or the call timed out): it may have taken effect.
var ErrOutcomeUnknown = errors.New("outcome unknown")

// codeRejectedByTransport is the go-sdk's JSON-RPC code for a message its
// transport could not send.
const codeRejectedByTransport = -32005

// maxInputRounds bounds how often one call is sent again with answers to
// its input requests.
const maxInputRounds = 10

// runner calls one upstream tool; it is a tools.Runner.
type runner struct {
	c      *client
	remote string // the server's name for the tool
	name   string // opsgate's
}

// Preview is the card's dry run: MCP has none, and the card says so.
func (r *runner) Preview(context.Context, tools.Call) (string, error) {
	return PreviewText, nil
}

// Run sends one tools/call with the call's idempotency key and run id in
// _meta, bounded by the server's call timeout. Every failure is an error
// naming the server, with credentials masked.
func (r *runner) Run(ctx context.Context, call tools.Call) (tools.Result, error) {
	start := time.Now()
	res, err := r.run(ctx, call)
	res.Duration = time.Since(start)
	return res, r.c.m.Error(err)
}

func (r *runner) run(ctx context.Context, call tools.Call) (tools.Result, error) {
	c := r.c
	// Waiting for a (re)connecting server is bounded by the connection
	// attempt (connect_timeout for connecting, again for tools/list), not
	// by the call's timeout: a restarting server is not a slow tool.
	sctx, scancel := context.WithTimeout(ctx, 2*c.srv.ConnectTimeout)
	sess, err := c.session(sctx)
	scancel()
	if err != nil {
		if ctx.Err() != nil {
			return tools.Result{}, ctx.Err()
		}
		return tools.Result{}, fmt.Errorf("%s: %w", r.name, err)
	}
	cctx, cancel := context.WithTimeout(ctx, c.srv.CallTimeout)
	defer cancel()
	args := call.Args
	if args == nil {
		args = map[string]any{}
	}
	f := &flight{ctx: cctx, tool: r.name, asker: agent.PeopleAskerFrom(ctx), out: call.Output}
	token, forget := c.flights.track(f)
	defer forget()
	params := &mcp.CallToolParams{
		Name: r.remote, Arguments: args,
		Meta: mcp.Meta{MetaIdempotencyKey: call.IdempotencyKey, MetaRunID: call.RunID},
	}
	params.SetProgressToken(token)
	res, err := sess.CallTool(cctx, params)
	// A 2026-07-28 server asks in its result; the call is sent again with
	// the answers, a bounded number of times.
	for round := 0; err == nil && len(res.InputRequests) > 0; round++ {
		responses, ferr := c.fulfill(f, res.InputRequests)
		if ferr == nil && round == maxInputRounds {
			ferr = fmt.Errorf("it asked for input %d times", maxInputRounds)
		}
		if ferr != nil {
			return tools.Result{}, fmt.Errorf("upstream %s: %s asked for input (%s): %w",
				c.srv.Name, r.name, inputKinds(res.InputRequests), ferr)
		}
		params.InputResponses, params.RequestState = responses, res.RequestState
		res, err = sess.CallTool(cctx, params)
	}
	if err != nil {
		return tools.Result{}, r.callError(ctx, cctx, sess, err)
	}
	out, truncated := tools.CapOutput(c.m.String(renderResult(res)), c.srv.MaxOutput)
	result := tools.Result{Output: out, Truncated: truncated}
	if res.IsError {
		return result, &ToolError{Server: c.srv.Name, Tool: r.name}
	}
	return result, nil
}

// inputKinds names what an input_required result asked for.
func inputKinds(m mcp.InputRequestMap) string {
	var kinds []string
	for _, r := range m {
		k := "input"
		switch r.(type) {
		case *mcp.ElicitParams:
			k = "elicitation"
		//lint:ignore SA1019 servers may still ask for sampling in its deprecation window (SEP-2577)
		case *mcp.CreateMessageParams:
			k = "sampling: refused, opsgate's models are not lent to servers"
		//lint:ignore SA1019 servers may still ask for roots in its deprecation window (SEP-2577)
		case *mcp.ListRootsParams:
			k = "roots"
		}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	return strings.Join(kinds, ", ")
}

// callError names what went wrong with a sent call. A call whose answer
// never came may have taken effect: the message says the outcome is
// unknown, so nobody retries blindly.
func (r *runner) callError(parent, cctx context.Context, sess *mcp.ClientSession, err error) error {
	c := r.c
	var rpcErr *jsonrpc.Error
	switch {
	case parent.Err() != nil:
		return parent.Err() // shutdown: the engine leaves the step for recovery
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("upstream %s: %s %w after %s (%w: the call may still complete upstream)",
			c.srv.Name, r.name, tools.ErrTimeout, c.srv.CallTimeout, ErrOutcomeUnknown)
	case errors.Is(err, mcp.ErrConnectionClosed):
		c.connectionLost(sess)
		return fmt.Errorf("upstream %s: the connection closed during %s (%w): %v", c.srv.Name, r.name, ErrOutcomeUnknown, err)
	case errors.As(err, &rpcErr) && rpcErr.Code == codeRejectedByTransport && neverSent(err):
		// The HTTP request never reached the server: the tool did not run.
		c.connectionLost(sess)
		return fmt.Errorf("%w: upstream %s: %s was not sent: %v", ErrUnavailable, c.srv.Name, r.name, err)
	case errors.As(err, &rpcErr):
		return fmt.Errorf("upstream %s refused %s: %s (code %d)", c.srv.Name, r.name, rpcErr.Message, rpcErr.Code)
	}
	// A result that did not decode, or a transport failure after sending.
	c.connectionLost(sess)
	return fmt.Errorf("upstream %s: %s: %w (%w)", c.srv.Name, r.name, err, ErrOutcomeUnknown)
}

// neverSent reports an error of connecting (dial, DNS): the request
// cannot have reached the server. An error after that (EOF on a reused
// connection, a reset) may have come after the server read it.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// renderResult turns a result into text: text content as it is, other
// content as a one-line note, structured content as JSON when there is no
// content at all.
func renderResult(res *mcp.CallToolResult) string {
	var parts []string
	for _, ct := range res.Content {
		switch x := ct.(type) {
		case *mcp.TextContent:
			parts = append(parts, x.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", x.MIMEType, len(x.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", x.MIMEType, len(x.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link %s]", x.URI))
		case *mcp.EmbeddedResource:
			switch {
			case x.Resource == nil:
				parts = append(parts, "[resource]")
			case x.Resource.Text != "":
				parts = append(parts, x.Resource.Text)
			default:
				parts = append(parts, fmt.Sprintf("[resource %s (%s), %d bytes]", x.Resource.URI, x.Resource.MIMEType, len(x.Resource.Blob)))
			}
		default:
			parts = append(parts, fmt.Sprintf("[%T content]", ct))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	return strings.Join(parts, "\n")
}
