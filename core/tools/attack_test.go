package tools

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAttack_ExecDashArgumentIsAnOption: a value that starts an argv
// element with "-" would reach the program as an option (git's
// --upload-pack runs a command); it is refused in the command and the dry
// run, by CheckArgs before the card and by Run and Preview themselves.
func TestAttack_ExecDashArgumentIsAnOption(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "ran")
	e := &Exec{
		Command: []string{"/bin/sh", script(t, "touch "+marker+"; "+printArgs), "{{.service}}", "--env={{.env}}", "{{.version}}"},
		DryRun:  []string{"/bin/sh", script(t, "touch "+marker+"; "+printArgs), "--dry-run", "{{.version}}"},
	}
	for _, bad := range []string{"--upload-pack=touch /tmp/x", "-rf", "-"} {
		args := map[string]any{"service": "api", "env": "staging", "version": bad}
		err := e.CheckArgs(args)
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Arg != "version" || !errors.Is(err, ErrArgRefused) || !strings.Contains(err.Error(), "exec.allow_dash_args") {
			t.Fatalf("CheckArgs(%q) = %v, want an ArgError naming version and the opt-in", bad, err)
		}
		if _, err := e.Run(context.Background(), call(args)); !errors.As(err, &ae) {
			t.Fatalf("Run(%q) = %v, want an ArgError", bad, err)
		}
		if _, err := e.Preview(context.Background(), call(args)); !errors.As(err, &ae) {
			t.Fatalf("Preview(%q) = %v, want an ArgError", bad, err)
		}
	}
	// A negative number is an option too ("head -5").
	if err := e.CheckArgs(map[string]any{"service": -5.0, "env": "x", "version": "1"}); err == nil {
		t.Fatal("a negative number starting an element was accepted")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the program ran with an option smuggled in")
	}

	// The config's own dashes, and a dash inside a value that does not
	// start the element, are fine.
	res, err := e.Run(context.Background(), call(map[string]any{"service": "api", "env": "-weird", "version": "1.2.3-rc1"}))
	if err != nil || res.Output != "[api]\n[--env=-weird]\n[1.2.3-rc1]\n" {
		t.Fatalf("legitimate call: %q, %v", res.Output, err)
	}
	if out, err := e.Preview(context.Background(), call(map[string]any{"version": "1.2.3"})); err != nil || out != "[--dry-run]\n[1.2.3]\n" {
		t.Fatalf("legitimate preview: %q, %v", out, err)
	}

	// A tool that opts in passes dash values through.
	in := &Exec{Command: []string{"/bin/sh", script(t, printArgs), "{{.flag}}"}, AllowDashArgs: true}
	if err := in.CheckArgs(map[string]any{"flag": "--verbose"}); err != nil {
		t.Fatalf("opted-in CheckArgs: %v", err)
	}
	if res, err := in.Run(context.Background(), call(map[string]any{"flag": "--verbose"})); err != nil || res.Output != "[--verbose]\n" {
		t.Fatalf("opted-in Run: %q, %v", res.Output, err)
	}
}

// TestAttack_HTTPDotSegmentWalksURLPath: percent-encoding keeps a value in
// one segment, but "." and ".." (or their encodings) as a whole segment are
// resolved by servers and proxies: /api/../admin reaches /admin.
func TestAttack_HTTPDotSegmentWalksURLPath(t *testing.T) {
	t.Parallel()
	srv, ch, hits := recorder(t, nil)
	h := &HTTP{URL: srv.URL + "/api/{{.service}}/status"}
	raw := &HTTP{URL: srv.URL + "/files/{{raw .path}}"}
	for _, bad := range []string{"..", ".", "%2e%2e", "%2E.", "%252e%252e"} {
		args := map[string]any{"service": bad}
		var ae *ArgError
		if err := h.CheckArgs(args); !errors.As(err, &ae) || ae.Arg != "service" {
			t.Fatalf("CheckArgs(%q) = %v, want an ArgError naming service", bad, err)
		}
		if _, err := h.Run(context.Background(), call(args)); !errors.As(err, &ae) {
			t.Fatalf("Run(%q) = %v, want an ArgError", bad, err)
		}
		if _, err := h.Preview(context.Background(), call(args)); !errors.As(err, &ae) {
			t.Fatalf("Preview(%q) = %v, want an ArgError", bad, err)
		}
	}
	if err := raw.CheckArgs(map[string]any{"path": "docs/../../admin"}); err == nil {
		t.Fatal("{{raw}} value with a .. segment accepted")
	}
	if hits.Load() != 0 {
		t.Fatalf("%d requests were sent", hits.Load())
	}
	for _, ok := range []string{"...", "a..b", ".hidden", "v1.2"} {
		if _, err := h.Run(context.Background(), call(map[string]any{"service": ok})); err != nil {
			t.Fatalf("Run(%q): %v", ok, err)
		}
		got := <-ch
		if seg, _ := url.PathUnescape(strings.Split(got.path, "/")[2]); seg != ok {
			t.Fatalf("server saw %q for %q", got.path, ok)
		}
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestAttack_HTTPErrorPostsCredentialIntoThread: the error of a failed
// call is the step's error and the thread's reply. net/http quotes the
// whole URL in it; every form of URL credential is masked now.
func TestAttack_HTTPErrorPostsCredentialIntoThread(t *testing.T) {
	t.Parallel()
	secrets := []string{"K3Y-1", "T0K-2", "S1G-3", "PW-4", "CS-5", "AT-6", "SEC-7", "P4SS-8"}
	query := "?api_key=K3Y-1&token=T0K-2&sig=S1G-3&password=PW-4&client_secret=CS-5&access_token=AT-6&secret=SEC-7&env=prod"
	check := func(t *testing.T, what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: error shows %q: %v", what, s, err)
			}
		}
		if !strings.Contains(err.Error(), "env=prod") || !strings.Contains(err.Error(), "api_key=****") {
			t.Errorf("%s: error lost the harmless part of the URL: %v", what, err)
		}
	}

	t.Run("ConnectionRefused", func(t *testing.T) {
		t.Parallel()
		h := &HTTP{URL: "http://deployer:P4SS-8@" + closedAddr(t) + "/x" + query}
		_, err := h.Run(context.Background(), call(nil))
		check(t, "refused", err)
		if !strings.Contains(err.Error(), "deployer:****@") {
			t.Errorf("userinfo not shown masked: %v", err)
		}
	})
	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		block := make(chan struct{})
		srv, _, _ := recorder(t, func(w http.ResponseWriter, r *http.Request) { <-block })
		t.Cleanup(func() { close(block) })
		h := &HTTP{URL: srv.URL + "/slow" + query, Timeout: 50 * time.Millisecond}
		_, err := h.Run(context.Background(), call(nil))
		check(t, "timeout", err)
		if !errors.Is(err, ErrTimeout) {
			t.Errorf("masking lost the sentinel: %v", err)
		}
	})
	t.Run("Status", func(t *testing.T) {
		t.Parallel()
		srv, _, _ := recorder(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) })
		h := &HTTP{URL: srv.URL + "/x" + query}
		_, err := h.Run(context.Background(), call(nil))
		check(t, "status", err)
		var se *StatusError
		if !errors.As(err, &se) || se.Code != http.StatusBadGateway {
			t.Errorf("masking lost the StatusError: %v", err)
		}
	})
	t.Run("RedirectToAnotherHost", func(t *testing.T) {
		t.Parallel()
		srv, _, _ := recorder(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://localhost:1/elsewhere"+query, http.StatusFound)
		})
		h := &HTTP{URL: srv.URL + "/x" + query}
		_, err := h.Run(context.Background(), call(nil))
		check(t, "redirect", err)
		if !errors.Is(err, ErrRedirectRefused) {
			t.Errorf("masking lost the sentinel: %v", err)
		}
	})
	t.Run("RenderedURLDoesNotParse", func(t *testing.T) {
		t.Parallel()
		h := &HTTP{URL: "{{raw .u}}"}
		_, err := h.Run(context.Background(), call(map[string]any{"u": "http://deployer:P4SS-8@h%zz/x" + query}))
		if err == nil {
			t.Fatal("no error")
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("error shows %q: %v", s, err)
			}
		}
	})
}
