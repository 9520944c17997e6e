package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/opsgate/opsgate/core/redact"
)

// Headers opsgate sets on every request; a tool's config may not set them,
// so the receiving service can trust them for deduplication and tracing.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerRunID          = "X-Opsgate-Run-Id"
	// HeaderReceipt carries the call's approval receipt (Call.Receipt),
	// when it has one.
	HeaderReceipt = "Opsgate-Receipt"
)

// maxRedirects bounds same-host redirect chains.
const maxRedirects = 10

// drainMax bounds how much of an over-long response is read only to count
// it when the server sent no Content-Length.
const drainMax = 1 << 20

// HTTP is an http tool: one request whose method, URL, header values and
// body are templates. It is safe for concurrent use once built.
type HTTP struct {
	// Method is the request method (a template); empty means GET.
	Method string
	// URL is a template. String arguments are percent-escaped before
	// rendering (every byte outside A-Z a-z 0-9 - . _ ~), so a value stays
	// one path segment or query value; {{raw .x}} inserts one unescaped and
	// {{query .x}} applies url.QueryEscape instead.
	URL string
	// Headers maps header names (literal) to value templates.
	Headers map[string]string
	// Body is a template with a json function; empty sends no body.
	Body string
	// Timeout bounds Run, body read included; zero means DefaultTimeout.
	Timeout time.Duration
	// MaxOutput caps the captured response body; zero means DefaultMaxOutput.
	MaxOutput int64
	// Client sends the request; nil means a client on
	// http.DefaultTransport. Its CheckRedirect is replaced by one that
	// refuses redirects to a different host.
	Client *http.Client
	// PreviewMax caps the preview text; zero means DefaultPreviewMax.
	PreviewMax int64

	once     sync.Once
	compiled *httpTemplates
	err      error
}

type httpTemplates struct {
	method  *template.Template
	url     *template.Template
	names   []string // header names, sorted for a stable preview
	headers map[string]*template.Template
	body    *template.Template // nil when Body is empty
	client  *http.Client
}

func (h *HTTP) templates() (*httpTemplates, error) {
	h.once.Do(func() {
		h.compiled, h.err = h.compile()
	})
	return h.compiled, h.err
}

func (h *HTTP) compile() (*httpTemplates, error) {
	if strings.TrimSpace(h.URL) == "" {
		return nil, errors.New("http: url is empty")
	}
	if h.Timeout < 0 || h.MaxOutput < 0 || h.PreviewMax < 0 {
		return nil, errors.New("http: negative timeout or output cap")
	}
	method := h.Method
	if method == "" {
		method = http.MethodGet
	}
	t := &httpTemplates{headers: map[string]*template.Template{}}
	var err error
	if t.method, err = compile("method", method); err != nil {
		return nil, fmt.Errorf("http: %w", err)
	}
	if t.url, err = compile("url", h.URL); err != nil {
		return nil, fmt.Errorf("http: %w", err)
	}
	if !strings.Contains(h.URL, "{{") {
		if _, err := checkURL(h.URL); err != nil {
			return nil, fmt.Errorf("http: %w", err)
		}
	}
	for name, v := range h.Headers {
		if !isToken(name) {
			return nil, fmt.Errorf("http: invalid header name %q", name)
		}
		canon := http.CanonicalHeaderKey(name)
		if canon == headerIdempotencyKey || canon == headerRunID || canon == HeaderReceipt || canon == "Host" {
			return nil, fmt.Errorf("http: header %s is set by opsgate", canon)
		}
		if _, dup := t.headers[canon]; dup {
			return nil, fmt.Errorf("http: header %s given twice", canon)
		}
		if t.headers[canon], err = compile("header "+canon, v); err != nil {
			return nil, fmt.Errorf("http: %w", err)
		}
		t.names = append(t.names, canon)
	}
	sort.Strings(t.names)
	if h.Body != "" {
		if t.body, err = compile("body", h.Body); err != nil {
			return nil, fmt.Errorf("http: %w", err)
		}
	}
	t.client = redirectSafe(h.Client)
	return t, nil
}

// Validate parses the templates and checks the fields, so a broken tool is
// reported when the configuration loads.
func (h *HTTP) Validate() error {
	_, err := h.templates()
	return err
}

// redirectSafe returns a copy of c (or a default client) that follows
// redirects only within the original host.
func redirectSafe(c *http.Client) *http.Client {
	var cp http.Client
	if c != nil {
		cp = *c
	}
	cp.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		if req.URL.Host != via[0].URL.Host {
			return fmt.Errorf("%w: %s to %s", ErrRedirectRefused, via[0].URL.Host, req.URL.Host)
		}
		return nil
	}
	return &cp
}

// request is a rendered request before it is sent (or previewed).
type request struct {
	method  string
	url     *url.URL
	names   []string
	headers http.Header
	body    string
}

// build renders every template from the call's arguments.
func (t *httpTemplates) build(c Call) (*request, error) {
	plain := normalize(c.Args)
	method, err := render(t.method, plain)
	if err != nil {
		return nil, err
	}
	method = strings.ToUpper(strings.TrimSpace(method))
	if !isToken(method) {
		return nil, fmt.Errorf("invalid method %q", method)
	}
	rawURL, err := render(t.url, escapeArgs(c.Args))
	if err != nil {
		return nil, err
	}
	u, err := checkURL(rawURL)
	if err != nil {
		return nil, err
	}
	if err := checkDotSegments(u, c.Args); err != nil {
		return nil, err
	}
	r := &request{method: method, url: u, headers: http.Header{}, names: t.names}
	for _, name := range t.names {
		v, err := render(t.headers[name], plain)
		if err != nil {
			return nil, err
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("header %s: value contains CR, LF or NUL", name)
		}
		r.headers.Set(name, v)
	}
	r.headers.Set(headerIdempotencyKey, c.IdempotencyKey)
	r.headers.Set(headerRunID, c.RunID)
	if c.Receipt != "" {
		r.headers.Set(HeaderReceipt, c.Receipt)
	}
	if t.body != nil {
		if r.body, err = render(t.body, plain); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// checkURL parses a rendered URL and insists on http(s) with a host. Its
// errors show the URL masked (redact): a URL may carry a credential.
func checkURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message quotes the whole URL
		}
		return nil, fmt.Errorf("url %q: %w", redact.URL(s), err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("url %q: scheme must be http or https", redact.ParsedURL(u))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("url %q: no host", redact.ParsedURL(u))
	}
	return u, nil
}

// Run renders and sends the request. A non-2xx response returns the filled
// Result (Status, capped body) and a *StatusError; the tool's timeout
// returns an error wrapping ErrTimeout; cancelling ctx returns an error
// wrapping ctx.Err(); a redirect to another host wraps ErrRedirectRefused.
// Error messages name the URL with its credentials masked (redact), since
// they are posted into the thread.
func (h *HTTP) Run(ctx context.Context, c Call) (Result, error) {
	res, err := h.run(ctx, c)
	return res, redact.Error(err)
}

func (h *HTTP) run(ctx context.Context, c Call) (Result, error) {
	t, err := h.templates()
	if err != nil {
		return Result{}, err
	}
	r, err := t.build(c)
	if err != nil {
		return Result{}, fmt.Errorf("http: %w", err)
	}
	timeout := orDefault(h.Timeout, DefaultTimeout)
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(runCtx, r.method, r.url.String(), body)
	if err != nil {
		return Result{}, fmt.Errorf("http: new request: %w", err)
	}
	req.Header = r.headers

	start := time.Now()
	resp, err := t.client.Do(req)
	if err != nil {
		return Result{Duration: time.Since(start)}, h.sendErr(ctx, runCtx, r, timeout, err)
	}
	defer resp.Body.Close()
	res := Result{Status: resp.StatusCode}
	var readErr error
	res.Output, res.Truncated, readErr = readCapped(resp, orDefault(h.MaxOutput, DefaultMaxOutput))
	res.Duration = time.Since(start)
	if readErr != nil {
		return res, h.sendErr(ctx, runCtx, r, timeout, fmt.Errorf("read body: %w", readErr))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return res, fmt.Errorf("http %s %s: %w", r.method, redact.ParsedURL(r.url), &StatusError{Code: resp.StatusCode})
	}
	return res, nil
}

// sendErr classifies a transport or read failure. net/http's *url.Error
// quotes the whole request URL (query credentials included), so only what
// it wraps is kept, under the masked URL.
func (h *HTTP) sendErr(ctx, runCtx context.Context, r *request, timeout time.Duration, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	where := r.method + " " + redact.ParsedURL(r.url)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("http %s: cancelled: %w", where, ctx.Err())
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("http %s: after %s: %w", where, timeout, ErrTimeout)
	}
	return fmt.Errorf("http %s: %w", where, err)
}

// readCapped keeps the first max bytes of the body and works out how many
// were dropped: from Content-Length when the server sent one, else by
// reading (and discarding) at most drainMax more bytes.
func readCapped(resp *http.Response, max int64) (string, bool, error) {
	kept, err := io.ReadAll(io.LimitReader(resp.Body, max))
	if err != nil {
		return string(kept), false, err
	}
	if int64(len(kept)) < max {
		return string(kept), false, nil
	}
	if resp.ContentLength >= 0 {
		text, cut := capText(kept, resp.ContentLength-int64(len(kept)))
		return text, cut, nil
	}
	n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, drainMax+1))
	if err != nil {
		text, _ := capText(kept, n)
		return text, true, err
	}
	if n > drainMax {
		text, _ := capText(kept, n)
		return strings.Replace(text, "[… truncated ", "[… truncated more than ", 1), true, nil
	}
	text, cut := capText(kept, n)
	return text, cut, nil
}

// isToken reports whether s is an RFC 9110 token (header name, method).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
