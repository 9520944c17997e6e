package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestDoDecodesTheErrorBody(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(401)
			fmt.Fprint(w, `{"error":{"code":"unauthorized","message":"missing or invalid bearer token"}}`)
			return
		}
		switch r.URL.Path {
		case "/api/v1/approvals/a1/decision":
			w.WriteHeader(422)
			fmt.Fprint(w, `{"error":{"code":"invalid_args","message":"does not match pattern","field":"version"}}`)
		case "/api/v1/approvals/a2/decision":
			w.WriteHeader(409)
			fmt.Fprint(w, `{"error":{"code":"already_decided","message":"already approved","by":"console:bob","at":"2026-01-02T03:04:05Z"}}`)
		default:
			w.WriteHeader(502)
			fmt.Fprint(w, "<html>bad gateway</html>")
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = c.Decide(ctx, "a1", Decision{Action: "edit"})
	var e *Error
	if !errors.As(err, &e) || e.Status != 422 || e.Field != "version" || e.Code != "invalid_args" {
		t.Fatalf("422: %#v", err)
	}
	_, err = c.Decide(ctx, "a2", Decision{Action: "approve"})
	if !errors.As(err, &e) || e.By != "console:bob" || StatusOf(err) != 409 {
		t.Fatalf("409: %#v", err)
	}
	if _, err = c.Me(ctx); StatusOf(err) != 502 || !errors.As(err, &e) || e.Message != "<html>bad gateway</html>" {
		t.Fatalf("a body that is not the API's: %#v", err)
	}
	bad, _ := New(srv.URL, "wrong")
	if _, err := bad.Me(ctx); StatusOf(err) != 401 {
		t.Fatalf("wrong token: %v", err)
	}
	for _, s := range []string{"", "127.0.0.1:8080", "ftp://x", "http://"} {
		if _, err := New(s, "t"); err == nil {
			t.Errorf("New(%q) accepted", s)
		}
	}
}
