package agent_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// failing answers with errs in order, then with ok.
func failing(errs ...error) *fakellm.Model {
	return &fakellm.Model{Respond: func(*agent.Request) (*agent.Response, error) {
		if len(errs) > 0 {
			err := errs[0]
			errs = errs[1:]
			return nil, err
		}
		return &agent.Response{Text: "ok"}, nil
	}}
}

func recordSleeps(waits *[]time.Duration) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		*waits = append(*waits, d)
		return ctx.Err()
	}
}

func TestRetryingPolicy(t *testing.T) {
	t.Parallel()
	rl := func(d time.Duration) error {
		return &agent.Error{Kind: agent.ErrRateLimited, Status: 429, RetryAfter: d}
	}
	server := &agent.Error{Kind: agent.ErrServer, Status: 502}
	cases := map[string]struct {
		errs    []error
		policy  agent.RetryPolicy
		ok      bool
		kind    agent.ErrorKind
		calls   int64
		waitsLE []time.Duration // upper bounds, in order
	}{
		"RetryAfterExact":       {[]error{rl(5 * time.Second)}, agent.RetryPolicy{}, true, "", 2, []time.Duration{5 * time.Second}},
		"RateLimitNoHeader":     {[]error{rl(0)}, agent.RetryPolicy{BaseDelay: time.Second}, true, "", 2, []time.Duration{time.Second}},
		"RetryAfterTooLong":     {[]error{rl(5 * time.Minute)}, agent.RetryPolicy{}, false, agent.ErrRateLimited, 1, nil},
		"BackoffDoubles":        {[]error{server, server, server}, agent.RetryPolicy{BaseDelay: time.Second}, true, "", 4, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		"BackoffCapped":         {[]error{server, server, server}, agent.RetryPolicy{BaseDelay: time.Second, MaxDelay: 1500 * time.Millisecond}, true, "", 4, []time.Duration{time.Second, 1500 * time.Millisecond, 1500 * time.Millisecond}},
		"Bounded":               {[]error{server, server, server, server}, agent.RetryPolicy{}, false, agent.ErrServer, 4, nil},
		"AuthNotRetried":        {[]error{&agent.Error{Kind: agent.ErrAuth, Status: 401}}, agent.RetryPolicy{}, false, agent.ErrAuth, 1, nil},
		"RequestNotRetried":     {[]error{&agent.Error{Kind: agent.ErrRequest, Status: 400}}, agent.RetryPolicy{}, false, agent.ErrRequest, 1, nil},
		"PlainErrorPassed":      {[]error{errors.New("boom")}, agent.RetryPolicy{}, false, "", 1, nil},
		"RetryAfterPastTheTurn": {[]error{rl(30 * time.Second)}, agent.RetryPolicy{Timeout: 10 * time.Second}, false, agent.ErrRateLimited, 1, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := failing(tc.errs...)
			var waits []time.Duration
			tc.policy.Sleep = recordSleeps(&waits)
			resp, err := agent.Retrying(m, tc.policy).Stream(context.Background(), &agent.Request{}, nil)
			if tc.ok != (err == nil) || (tc.ok && resp.Text != "ok") {
				t.Fatalf("resp %+v err %v", resp, err)
			}
			if tc.kind != "" {
				if e := agent.AsError(err); e == nil || e.Kind != tc.kind {
					t.Errorf("err = %v, want kind %s", err, tc.kind)
				}
			}
			if m.Calls() != tc.calls {
				t.Errorf("%d calls, want %d", m.Calls(), tc.calls)
			}
			if tc.waitsLE != nil && len(waits) != len(tc.waitsLE) {
				t.Fatalf("waits = %v, want %v", waits, tc.waitsLE)
			}
			for i, w := range tc.waitsLE {
				if waits[i] > w || waits[i] < w*3/4 {
					t.Errorf("wait %d = %v, want in [%v, %v]", i, waits[i], w*3/4, w)
				}
			}
		})
	}
}

func TestRetryingTimeoutNamesTheLastFailure(t *testing.T) {
	t.Parallel()
	m := &fakellm.Model{Respond: func(*agent.Request) (*agent.Response, error) {
		return nil, &agent.Error{Kind: agent.ErrServer, Model: "default", Host: "llm:8000", Status: 503}
	}}
	r := agent.Retrying(m, agent.RetryPolicy{Timeout: 50 * time.Millisecond, BaseDelay: time.Hour})
	_, err := r.Stream(context.Background(), &agent.Request{}, nil)
	e := agent.AsError(err)
	if e == nil || e.Kind != agent.ErrTimeout || e.Model != "default" || !strings.Contains(e.Error(), "after server error (HTTP 503)") {
		t.Fatalf("err = %v", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		h    http.Header
		want time.Duration
	}{
		"Seconds":  {http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		"Fraction": {http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		"Millis":   {http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond},
		"Date":     {http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		"PastDate": {http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		"Garbage":  {http.Header{"Retry-After": {"soon"}}, 0},
		"Negative": {http.Header{"Retry-After": {"-3"}}, 0},
		"Missing":  {http.Header{}, 0},
	}
	for name, tc := range cases {
		if got := agent.ParseRetryAfter(tc.h, now); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

func TestErrorsAreSafeToShow(t *testing.T) {
	t.Parallel()
	if h := agent.HostOf("https://user:pass@llm.internal:8443/v1?key=secret"); h != "llm.internal:8443" {
		t.Errorf("HostOf = %q", h)
	}
	spec := agent.ModelSpec{Name: "m", BaseURL: "https://user:pass@llm.internal/v1?key=secret", APIKey: "sk-abcdef"}
	e := agent.HTTPError(spec, 401, nil, "bad key sk-abcdef\n given for https://u:hunter2@llm.internal/v1?api_key=k1", nil)
	for _, s := range []string{e.Error(), e.ThreadMessage()} {
		if strings.Contains(s, "sk-abcdef") || strings.Contains(s, "pass") || strings.Contains(s, "secret") || strings.Contains(s, "\n") ||
			strings.Contains(s, "hunter2") || strings.Contains(s, "k1") {
			t.Errorf("unsafe: %q", s)
		}
	}
	dns := agent.TransportError(spec, &net.DNSError{Name: "llm.internal", Err: "no such host"}, false)
	if e := agent.AsError(dns); e == nil || e.Kind != agent.ErrUnreachable || !strings.Contains(e.ThreadMessage(), "cannot resolve llm.internal") {
		t.Errorf("dns = %v", dns)
	}
	if err := agent.TransportError(spec, context.Canceled, false); !errors.Is(err, context.Canceled) || agent.AsError(err) != nil {
		t.Errorf("cancel = %v", err)
	}
	for status, kind := range map[int]agent.ErrorKind{429: agent.ErrRateLimited, 401: agent.ErrAuth, 403: agent.ErrAuth, 404: agent.ErrRequest,
		400: agent.ErrRequest, 408: agent.ErrServer, 500: agent.ErrServer, 529: agent.ErrServer} {
		if e := agent.HTTPError(spec, status, nil, "", nil); e.Kind != kind || e.Retryable() != (kind == agent.ErrRateLimited || kind == agent.ErrServer) {
			t.Errorf("%d: %s", status, e.Kind)
		}
	}
}

func TestEnsureCallIDs(t *testing.T) {
	t.Parallel()
	calls := []agent.ToolCall{{ID: "a"}, {ID: ""}, {ID: "a"}, {ID: ""}}
	agent.EnsureCallIDs(calls)
	seen := map[string]bool{}
	for _, c := range calls {
		if c.ID == "" || seen[c.ID] {
			t.Fatalf("ids = %+v", calls)
		}
		seen[c.ID] = true
	}
	if calls[0].ID != "a" {
		t.Error("a good id was replaced")
	}
}

func TestBodyMessage(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"error":{"message":"Rate limit reached","type":"requests"}}`: "Rate limit reached",
		`{"error":"model \"x\" not found"}`:                            `model "x" not found`,
		`{"object":"error","message":"context too long"}`:              "context too long",
		`{"detail":"Not Found"}`:                                       "Not Found",
		"  upstream connect error\n":                                   "upstream connect error",
		"\xff\xfe":                                                     "",
		strings.Repeat("x", 500):                                       strings.Repeat("x", 200) + "…",
	} {
		if got := agent.BodyMessage([]byte(body)); got != want {
			t.Errorf("BodyMessage(%.40q) = %q, want %q", body, got, want)
		}
	}
}
