package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// apiClient calls a running server's /api/v1, the same API scripts use, so
// the CLI never needs database credentials and sees exactly what the server
// enforces (authorization, quorum, expiry).
type apiClient struct {
	base  *url.URL
	token string
	http  *http.Client
}

// apiError is a non-2xx answer of the API, decoded from its error body.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Code != "" {
		return fmt.Sprintf("%d %s: %s", e.Status, e.Code, msg)
	}
	return fmt.Sprintf("%d: %s", e.Status, msg)
}

// clientFlags are the connection flags every admin subcommand accepts.
type clientFlags struct {
	server, token, config *string
}

func addClientFlags(fs interface {
	String(name, value, usage string) *string
}) clientFlags {
	return clientFlags{
		server: fs.String("server", "", "server base URL (default $OPSGATE_SERVER, else from the config's server.listen)"),
		token:  fs.String("token", "", "API bearer token (default $OPSGATE_TOKEN, else <data_dir>/admin.token)"),
		config: fs.String("config", "", "config file used to find the server and the generated admin token"),
	}
}

// newClient resolves where the server is and which token to use: flags, then
// environment, then the configuration the server runs with.
func newClient(f clientFlags) (*apiClient, error) {
	server, token := *f.server, *f.token
	if server == "" {
		server = os.Getenv("OPSGATE_SERVER")
	}
	if token == "" {
		token = os.Getenv("OPSGATE_TOKEN")
	}
	if server == "" || token == "" {
		listen, dataDir, err := clientDefaults(*f.config)
		if err != nil {
			return nil, fmt.Errorf("find the server: %w (or pass --server and --token)", err)
		}
		if server == "" {
			server = serverURLFromListen(listen)
		}
		if token == "" {
			t, err := readAdminToken(dataDir)
			if err != nil {
				return nil, err
			}
			token = t
		}
	}
	u, err := url.Parse(strings.TrimRight(server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--server %q: want a URL like http://127.0.0.1:8080", server)
	}
	return &apiClient{base: u, token: token, http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// serverURLFromListen turns a listen address into a URL a local client can
// reach: a wildcard host means "this machine".
func serverURLFromListen(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	switch host {
	case "", "0.0.0.0", "::", "[::]":
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// readAdminToken reads the token serve generated when no api token was
// configured.
func readAdminToken(dataDir string) (string, error) {
	p := adminTokenPath(dataDir)
	b, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("no API token: pass --token or set $OPSGATE_TOKEN (%s does not exist; serve writes it only when api.tokens is empty)", p)
		}
		return "", fmt.Errorf("read admin token: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("admin token file %s is empty", p)
	}
	return t, nil
}

// do sends one request and decodes a JSON answer into out (when non-nil).
func (c *apiClient) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the server at %s (is `opsgate serve` running? see --server): %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read response from %s: %w", c.base, err)
	}
	if resp.StatusCode/100 != 2 {
		ae := &apiError{Status: resp.StatusCode}
		var eb struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &eb) == nil {
			ae.Code, ae.Message = eb.Error.Code, eb.Error.Message
		} else {
			ae.Message = strings.TrimSpace(string(truncate(data, 300)))
		}
		if resp.StatusCode == http.StatusUnauthorized {
			ae.Message += " (check --token / $OPSGATE_TOKEN)"
		}
		return ae
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], data...)
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode response from %s: %w", path, err)
	}
	return nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return append(b[:n:n], "..."...)
	}
	return b
}
