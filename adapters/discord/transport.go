package discord

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	discordapi "github.com/bwmarrin/discordgo"

	"github.com/opsgate/opsgate/core/pace"
)

// rateTransport sits under discordgo's REST client and makes rate limits
// the adapter's business instead of the library's:
//
//   - it rewrites discordgo's endpoints (fixed at package load) onto
//     Config.APIURL;
//   - before a request it waits, with the caller's context, on the route
//     bucket learned for that route (X-RateLimit-Bucket plus the major
//     parameter), so a known-exhausted bucket is never hit;
//   - after a response it feeds -Remaining/-Reset-After to pace.Limiter's
//     Observe, notes a 429's scope for the caller, and strips the rate-limit
//     headers so discordgo's own limiter never sleeps silently.
type rateTransport struct {
	next    http.RoundTripper
	base    *url.URL // Config.APIURL
	lim     *pace.Limiter
	mu      sync.Mutex
	buckets map[string]string // route → Discord bucket hash
}

// discordgoAPI is the prefix discordgo puts on every REST endpoint.
var discordgoAPI = strings.TrimSuffix(discordapi.EndpointAPI, "/")

func newRateTransport(next http.RoundTripper, apiURL string) (*rateTransport, error) {
	if next == nil {
		next = http.DefaultTransport
	}
	u, err := url.Parse(apiURL)
	if err != nil {
		return nil, err
	}
	lim, err := pace.New(pace.Spec{IdleTTL: 30 * time.Minute})
	if err != nil {
		return nil, err
	}
	return &rateTransport{next: next, base: u, lim: lim, buckets: map[string]string{}}, nil
}

// callInfo is filled by the transport for the caller that put it in the
// request's context: what a 429 said about its scope.
type callInfo struct {
	mu     sync.Mutex
	global bool
	scope  string
}

type callInfoKey struct{}

func withCallInfo(ctx context.Context) (context.Context, *callInfo) {
	ci := &callInfo{}
	return context.WithValue(ctx, callInfoKey{}, ci), ci
}

func (t *rateTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if s := r.URL.String(); strings.HasPrefix(s, discordgoAPI+"/") {
		u := *t.base
		rest := strings.TrimPrefix(s, discordgoAPI)
		path, query, _ := strings.Cut(rest, "?")
		u.Path = strings.TrimRight(t.base.Path, "/") + path
		u.RawPath = ""
		u.RawQuery = query
		r = r.Clone(r.Context())
		r.URL = &u
		r.Host = u.Host
	}
	route, major := routeOf(r.Method, r.URL.Path, t.base.Path)
	t.mu.Lock()
	hash := t.buckets[route]
	t.mu.Unlock()
	if hash != "" {
		if err := t.lim.Wait(r.Context(), pace.Keys{Route: hash + ":" + major}); err != nil {
			return nil, err
		}
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	h := resp.Header
	if b := h.Get("X-RateLimit-Bucket"); b != "" {
		t.mu.Lock()
		t.buckets[route] = b
		t.mu.Unlock()
		rem, err1 := strconv.Atoi(h.Get("X-RateLimit-Remaining"))
		after, err2 := strconv.ParseFloat(h.Get("X-RateLimit-Reset-After"), 64)
		if err1 == nil && err2 == nil && after >= 0 && after < 24*3600 {
			t.lim.Observe(b+":"+major, rem, time.Duration(after*float64(time.Second)))
		}
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		if ci, ok := r.Context().Value(callInfoKey{}).(*callInfo); ok {
			ci.mu.Lock()
			ci.global = h.Get("X-RateLimit-Global") != "" || h.Get("X-RateLimit-Scope") == "global"
			ci.scope = h.Get("X-RateLimit-Scope")
			ci.mu.Unlock()
		}
	}
	for _, k := range []string{"X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Reset-After", "X-RateLimit-Global", "X-RateLimit-Limit"} {
		h.Del(k)
	}
	return resp, nil
}

// routeOf names a request's rate-limit route the way Discord groups them:
// method plus path with ids replaced, and the major parameter (channel,
// guild or webhook) that splits one bucket into many.
func routeOf(method, path, basePath string) (route, major string) {
	path = strings.TrimPrefix(path, strings.TrimRight(basePath, "/"))
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i := 1; i < len(segs); i++ {
		switch {
		case i == 1 && (segs[0] == "channels" || segs[0] == "guilds" || segs[0] == "webhooks"):
			major = segs[1]
			segs[1] = ":major"
		case i == 2 && segs[0] == "webhooks":
			// A webhook's token is part of its major parameter.
			major += "/" + segs[2]
			segs[2] = ":token"
		case (i == 1 || i == 2) && segs[0] == "interactions":
			segs[i] = ":token" // per call, never a shared route
		case isSnowflake(segs[i]):
			segs[i] = ":id"
		}
	}
	return method + " /" + strings.Join(segs, "/"), major
}

func isSnowflake(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
