package upstream

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
)

// httpClient is the client a Streamable HTTP server is reached with: the
// configured headers on every request, JSON answers bounded by
// MaxMessage (server-sent events are bounded per event by the SDK), and
// no redirect to another host, so credentials only go where configured.
func httpClient(s *Server) *http.Client {
	base := s.HTTPTransport
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	h := http.Header{}
	for k, v := range s.Headers {
		h.Set(k, v)
	}
	origin, _ := url.Parse(s.URL)
	return &http.Client{
		Transport: &headerTransport{base: base, headers: h, max: s.MaxMessage},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Host != origin.Host || req.URL.Scheme != origin.Scheme {
				return errors.New("redirect to a different host refused")
			}
			if len(via) >= 10 {
				return errors.New("too many redirects")
			}
			return nil
		},
	}
}

type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
	max     int64
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header[k] = v
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp == nil {
		return resp, err
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "text/event-stream" {
		resp.Body = &limitedBody{rc: resp.Body, left: t.max}
	}
	return resp, nil
}

// limitedBody fails a read past its limit instead of buffering without end.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
	read int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("response over %d bytes refused", b.read)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	b.read += int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
