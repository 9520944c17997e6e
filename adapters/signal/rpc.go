package signal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/opsgate/opsgate/core"
)

// signal-cli's JSON-RPC error codes (SignalJsonRpcCommandHandler), beside
// JSON-RPC's own (-32600 invalid request, -32601 method not found, -32602
// invalid params, -32603 internal error).
const (
	codeUserError       = -1
	codeIOError         = -3
	codeUntrustedKey    = -4
	codeRateLimit       = -5
	codeCaptchaRejected = -6
	codeInvalidParams   = -32602
	codeMethodNotFound  = -32601
	codeInvalidRequest  = -32600
)

// RPCError is a JSON-RPC error answer from signal-cli.
type RPCError struct {
	Method  string
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("signal-cli %s: error %d: %s", e.Method, e.Code, e.Message)
}

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
	ID      string `json:"id"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
	ID      json.RawMessage `json:"id"`
}

// sendResult is the result of send and sendReaction: the message's
// timestamp (its id, with the author) and one result per recipient.
type sendResult struct {
	Timestamp int64 `json:"timestamp"`
	Results   []struct {
		RecipientAddress struct {
			UUID   string `json:"uuid"`
			Number string `json:"number"`
		} `json:"recipientAddress"`
		Type              string `json:"type"`
		RetryAfterSeconds *int64 `json:"retryAfterSeconds,omitempty"`
	} `json:"results"`
}

type rpcClient struct {
	url string
	hc  *http.Client
	seq atomic.Int64
}

// maxRPCResponse bounds what a daemon answer may weigh.
const maxRPCResponse = 4 << 20

// errAnswerTooLarge is an answer longer than the call allows.
var errAnswerTooLarge = errors.New("answer too large")

// call posts one JSON-RPC request to /api/v1/rpc and decodes its result.
func (c *rpcClient) call(ctx context.Context, method string, params, out any) error {
	return c.callLimit(ctx, method, params, out, maxRPCResponse)
}

// callLimit is call reading at most limit bytes of answer; a longer one is
// errAnswerTooLarge, and no more of it is read.
func (c *rpcClient) callLimit(ctx context.Context, method string, params, out any, limit int64) error {
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", Method: method, Params: params, ID: strconv.FormatInt(c.seq.Add(1), 10)})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/api/v1/rpc", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("signal-cli %s: %w", method, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("signal-cli %s: read answer: %w", method, err)
	}
	if int64(len(b)) > limit {
		return fmt.Errorf("signal-cli %s: %w (over %d bytes)", method, errAnswerTooLarge, limit)
	}
	if resp.StatusCode != http.StatusOK {
		return &httpStatusError{Method: method, Status: resp.StatusCode}
	}
	var r rpcResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("signal-cli %s: malformed answer: %v", method, err)
	}
	if r.Error != nil {
		r.Error.Method = method
		return r.Error
	}
	if out != nil {
		if err := json.Unmarshal(r.Result, out); err != nil {
			return fmt.Errorf("signal-cli %s: malformed result: %v", method, err)
		}
	}
	return nil
}

type httpStatusError struct {
	Method string
	Status int
}

func (e *httpStatusError) Error() string {
	return fmt.Sprintf("signal-cli %s: HTTP %d", e.Method, e.Status)
}

// deliveryError maps a daemon failure onto what the delivery pipeline
// expects: a rate limit (-5) → *core.RateLimitError after the longest
// retryAfterSeconds signal-cli reports (a minute when it names none); what
// can never succeed as sent (user error, untrusted identity, bad params,
// captcha) → *core.PermanentError; I/O and internal errors and HTTP 5xx
// stay plain, to be retried with backoff.
func deliveryError(err error) error {
	var re *RPCError
	var he *httpStatusError
	switch {
	case errors.As(err, &re):
		switch re.Code {
		case codeRateLimit:
			return &core.RateLimitError{RetryAfter: retryAfter(re.Data), Err: err}
		case codeUserError, codeUntrustedKey, codeCaptchaRejected, codeInvalidParams, codeMethodNotFound, codeInvalidRequest:
			return &core.PermanentError{Err: err}
		}
	case errors.As(err, &he):
		if he.Status >= 400 && he.Status < 500 {
			return &core.PermanentError{Err: err}
		}
	}
	return err
}

// retryAfter reads the longest retryAfterSeconds of the failed send's
// results (error data {"response": {"timestamp", "results": [...]}}).
func retryAfter(data json.RawMessage) time.Duration {
	var d struct {
		Response sendResult `json:"response"`
	}
	wait := time.Duration(0)
	if json.Unmarshal(data, &d) == nil {
		for _, r := range d.Response.Results {
			if r.RetryAfterSeconds != nil && time.Duration(*r.RetryAfterSeconds)*time.Second > wait {
				wait = time.Duration(*r.RetryAfterSeconds) * time.Second
			}
		}
	}
	if wait <= 0 {
		wait = time.Minute
	}
	return wait
}
