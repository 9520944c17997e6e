package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
)

// The HTTP side of an endpoint, outermost first:
//
//  1. Origin: a browser's Origin header must be allowed (403 otherwise,
//     as the spec requires against DNS rebinding); internal endpoints
//     take only loopback or configured origins, and without an Origin
//     only loopback peers.
//  2. The bearer token must be one of this kind (internal or not).
//  3. The body is peeked: a request of protocol 2026-07-28 or later
//     (stateless: the version rides in _meta and the MCP-Protocol-Version
//     header) goes to a stateless SDK handler; anything else to a
//     stateful one with sessions (initialize, Mcp-Session-Id,
//     elicitation/create). Each endpoint has its own handlers, so a
//     session is bound to the endpoint that began it.
//  4. A JSON-RPC request for a method the server does not have is
//     answered -32601 in JSON-RPC, never a plain-text 400.

// metaProtocolVersion is where 2026-07-28 requests carry their version.
const metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// statelessFrom is the first protocol version without sessions.
const statelessFrom = "2026-07-28"

// knownMethods are the methods the SDK server answers (go-sdk v1.8.0's
// serverMethodInfos).
var knownMethods = map[string]bool{
	"completion/complete": true, "server/discover": true, "initialize": true, "ping": true,
	"prompts/list": true, "prompts/get": true, "tools/list": true, "tools/call": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"logging/setLevel": true, "resources/subscribe": true, "subscriptions/listen": true, "resources/unsubscribe": true,
	"notifications/cancelled": true, "notifications/initialized": true, "notifications/roots/list_changed": true,
	"notifications/progress": true,
}

// sessionless are the methods a request may send without a session before
// 2026-07-28: the one that opens a session, and the newer version's probe.
var sessionless = map[string]bool{"initialize": true, "server/discover": true}

func (s *Server) endpointHandler(ep endpoint) (http.Handler, error) {
	srv := s.newSDKServer(ep)
	get := func(*http.Request) *sdk.Server { return srv }
	common := sdk.StreamableHTTPOptions{
		Logger: s.log,
		// Origin is checked here (checkOrigin), on every endpoint and
		// behind proxies; the SDK's Host check would refuse a proxy's
		// public name.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        s.o.MaxBodyBytes,
	}
	stateless := common
	stateless.Stateless, stateless.JSONResponse = true, true
	stateful := common
	// Sessions end after an idle hour; a client then initializes again.
	stateful.SessionTimeout = sessionIdle
	statelessH := sdk.NewStreamableHTTPHandler(get, &stateless)
	statefulH := sdk.NewStreamableHTTPHandler(get, &stateful)

	dispatch := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && !strings.HasPrefix(sid, ep.tag+"-") {
			// A session of another endpoint: it stays where it began.
			writeRPCError(w, http.StatusNotFound, nil, -32600, "this session belongs to another MCP endpoint; initialize a new one here")
			return
		}
		var body []byte
		if r.Method == http.MethodPost && r.Body != nil {
			b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes))
			if err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					writeRPCError(w, http.StatusRequestEntityTooLarge, nil, -32600, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
					return
				}
				writeRPCError(w, http.StatusBadRequest, nil, -32700, "cannot read the request body")
				return
			}
			if err := core.CheckJSON(b); err != nil {
				writeRPCError(w, http.StatusBadRequest, nil, -32600, err.Error())
				return
			}
			body = b
			r.Body = io.NopCloser(bytes.NewReader(b))
			r.ContentLength = int64(len(b))
		}
		msg, parsed := peek(body)
		newProto := r.Header.Get("MCP-Protocol-Version") >= statelessFrom || (parsed && msg.metaVersion >= statelessFrom)
		if newProto && parsed && msg.isCall {
			// The Tasks extension (taskhttp.go) rides 2026-07-28 only.
			switch {
			case taskMethods[msg.method]:
				s.serveTaskMethod(w, r, body)
				return
			case msg.method == "subscriptions/listen" && asksForTasks(body):
				s.serveTaskListen(w, r, body)
				return
			case msg.method == "tools/call":
				serveToolCall(statelessH, w, r)
				return
			}
		}
		if parsed && msg.method != "" && !knownMethods[msg.method] {
			if !msg.isCall {
				// Notifications are never answered; an unknown one is
				// ignored.
				w.WriteHeader(http.StatusAccepted)
				return
			}
			status := http.StatusOK
			if newProto {
				status = http.StatusNotFound
			}
			writeRPCError(w, status, msg.id, -32601, fmt.Sprintf("method not found: %q", msg.method))
			return
		}
		if newProto {
			statelessH.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" && parsed && msg.method != "" && !sessionless[msg.method] {
			// Before 2026-07-28 everything but initialize belongs to a
			// session: the spec's 400, with a JSON-RPC error a client can
			// read (the SDK would open a session and answer code 0).
			writeRPCError(w, http.StatusBadRequest, msg.id, -32600,
				fmt.Sprintf("Bad Request: %s needs the Mcp-Session-Id header of a session (send initialize first), or protocol version %s or later", msg.method, statelessFrom))
			return
		}
		statefulH.ServeHTTP(w, r)
	})
	var opts auth.RequireBearerTokenOptions
	opts.AllowMissingExpiration = true
	if s.o.OAuth != nil && s.o.PublicURL != "" {
		opts.ResourceMetadataURL = s.o.PublicURL + "/.well-known/oauth-protected-resource" + ep.path
	}
	requireToken := auth.RequireBearerToken(s.verifier(ep), &opts)
	authed := requireToken(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Only refusals carry the challenge.
		w.Header().Del("WWW-Authenticate")
		dispatch.ServeHTTP(w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.checkOrigin(ep, r) {
			writeRPCError(w, http.StatusForbidden, nil, -32600, "origin not allowed: "+r.Header.Get("Origin"))
			return
		}
		if opts.ResourceMetadataURL == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="opsgate"`)
		}
		authed.ServeHTTP(w, r)
	}), nil
}

// rpcPeek is what the dispatcher needs of a JSON-RPC message.
type rpcPeek struct {
	method      string
	isCall      bool
	id          json.RawMessage
	metaVersion string
}

// peek reads one JSON-RPC message (not a batch: those are left to the
// SDK, which refuses them after 2025-03-26).
func peek(body []byte) (rpcPeek, bool) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return rpcPeek{}, false
	}
	var m struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		return rpcPeek{}, false
	}
	p := rpcPeek{method: m.Method, id: m.ID, isCall: len(m.ID) > 0 && string(m.ID) != "null"}
	if v, ok := m.Params.Meta[metaProtocolVersion]; ok {
		_ = json.Unmarshal(v, &p.metaVersion)
	}
	return p, true
}

// writeRPCError answers a JSON-RPC error (with no id when none is known).
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	body := map[string]any{"jsonrpc": "2.0", "error": map[string]any{"code": code, "message": msg}}
	if len(id) > 0 {
		body["id"] = id
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// checkOrigin applies the Origin rules of ep. A request without Origin
// comes from a program, not a page: fine on the external endpoints, and on
// the internal ones only from a loopback peer.
func (s *Server) checkOrigin(ep endpoint, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return !ep.internal || loopbackAddr(r.RemoteAddr)
	}
	o, err := url.Parse(origin)
	if err != nil || o.Scheme == "" || o.Host == "" {
		return false
	}
	norm := strings.ToLower(o.Scheme + "://" + o.Host)
	allowed := s.o.AllowedOrigins
	if ep.internal {
		if loopbackHost(o.Hostname()) {
			return true
		}
		allowed = s.o.InternalOrigins
	} else if s.o.PublicURL != "" {
		if pu, err := url.Parse(s.o.PublicURL); err == nil && strings.EqualFold(pu.Scheme+"://"+pu.Host, norm) {
			return true
		}
	}
	for _, a := range allowed {
		if strings.EqualFold(strings.TrimRight(a, "/"), norm) {
			return true
		}
	}
	return false
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return loopbackHost(host)
}

// wellKnown answers OAuth discovery: RFC 9728 metadata when OAuth is
// configured, a JSON 404 for every other /.well-known path.
func (s *Server) wellKnown(w http.ResponseWriter, r *http.Request) {
	const prm = "/.well-known/oauth-protected-resource"
	if s.o.OAuth != nil && s.o.PublicURL != "" && (r.URL.Path == prm || strings.HasPrefix(r.URL.Path, prm+"/")) {
		resource := s.o.PublicURL + strings.TrimPrefix(r.URL.Path, prm)
		if resource == s.o.PublicURL {
			resource += PathExternal
		}
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource: resource, AuthorizationServers: s.o.OAuth.AuthorizationServers,
			ScopesSupported: s.o.OAuth.ScopesSupported, BearerMethodsSupported: []string{"header"}, ResourceName: "opsgate",
		}).ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "not_found",
		"message": "opsgate has no " + r.URL.Path + ": MCP clients authenticate with a bearer token (api.tokens)"}})
}

// token is a configured credential, compared by digest in constant time.
type token struct {
	digest [32]byte
	actor  core.Actor
	auth   authority.Actor
}

func newTokens(ts []Token) ([]token, error) {
	out := make([]token, 0, len(ts))
	seen := map[[32]byte]bool{}
	for i, t := range ts {
		if t.Token == "" || t.Name == "" {
			return nil, fmt.Errorf("token %d (%q): empty token or name", i, t.Name)
		}
		if _, _, ok := strings.Cut(t.Actor, ":"); !ok {
			return nil, fmt.Errorf("token %d (%q): actor %q: want <channel>:<id>", i, t.Name, t.Actor)
		}
		d := sha256.Sum256([]byte(t.Token))
		if seen[d] {
			return nil, fmt.Errorf("token %d (%q): the same token is configured twice", i, t.Name)
		}
		seen[d] = true
		out = append(out, token{digest: d, actor: core.Actor{ID: t.Actor, Name: t.Name},
			auth: authority.TokenActor(t.Name, t.Actor, t.Scopes, t.Internal)})
	}
	return out, nil
}

// surface is the authority's name for ep's kind of endpoint.
func (ep endpoint) surface() authority.Surface {
	if ep.internal {
		return authority.SurfaceMCPInternal
	}
	return authority.SurfaceMCP
}

// verifier checks a bearer token for ep: a token the endpoint does not
// take (authority.Accepts: internal tokens only internally, the others
// only externally) is as unknown here as a wrong one.
func (s *Server) verifier(ep endpoint) auth.TokenVerifier {
	return func(_ context.Context, raw string, _ *http.Request) (*auth.TokenInfo, error) {
		d := sha256.Sum256([]byte(raw))
		var match *token
		for i := range s.tokens {
			if subtle.ConstantTimeCompare(d[:], s.tokens[i].digest[:]) == 1 {
				match = &s.tokens[i]
			}
		}
		if match == nil || s.auth.Accepts(ep.surface(), match.auth) != nil {
			return nil, auth.ErrInvalidToken
		}
		names := make([]string, len(match.auth.Scopes))
		for i, sc := range match.auth.Scopes {
			names[i] = string(sc)
		}
		return &auth.TokenInfo{UserID: match.actor.ID, Scopes: names,
			Extra: map[string]any{"name": match.actor.Name, callerKey: match.auth}}, nil
	}
}

// callerKey holds the token's authority.Actor in auth.TokenInfo.Extra.
const callerKey = "opsgate_actor"

// caller is the authenticated identity behind a tool call.
type caller struct {
	actor  core.Actor
	scopes core.Scopes
	auth   authority.Actor
}

func callerOf(req *sdk.CallToolRequest) (caller, bool) {
	if req == nil || req.Extra == nil || req.Extra.TokenInfo == nil || req.Extra.TokenInfo.UserID == "" {
		return caller{}, false
	}
	ti := req.Extra.TokenInfo
	name, _ := ti.Extra["name"].(string)
	a, ok := ti.Extra[callerKey].(authority.Actor)
	if !ok {
		return caller{}, false
	}
	return caller{actor: core.Actor{ID: ti.UserID, Name: name}, scopes: a.Scopes, auth: a}, true
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
