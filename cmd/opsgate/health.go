package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// cmdHealthcheck asks a running server's /healthz (or /readyz with
// --ready) and exits 0 only on 200. It is the container image's
// HEALTHCHECK: the image needs no curl or wget, and the address comes from
// the same config (server.listen only) as the server's.
func cmdHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("healthcheck", "healthcheck [--server URL] [--config FILE] [--ready] [--timeout D]",
		"Exits 0 when the server answers GET /healthz (with --ready: /readyz, which also needs the store) with 200.",
		stdout, stderr)
	server := fs.String("server", "", "server base URL (default $OPSGATE_SERVER, else from the config's server.listen)")
	cfgPath := fs.String("config", "", "config file whose server.listen to use")
	ready := fs.Bool("ready", false, "ask /readyz instead of /healthz")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("healthcheck takes no arguments")
	}
	base := *server
	if base == "" {
		base = os.Getenv("OPSGATE_SERVER")
	}
	if base == "" {
		listen, _, err := clientDefaults(*cfgPath)
		if err != nil {
			return err
		}
		base = serverURLFromListen(listen)
	}
	path := "/healthz"
	if *ready {
		path = "/readyz"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimRight(base, "/")+path, nil)
	if err != nil {
		return usagef("--server %q: %v", base, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", base, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck %s%s: %d %s", base, path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(stdout, "%s%s: %s\n", base, path, strings.TrimSpace(string(body)))
	return nil
}
