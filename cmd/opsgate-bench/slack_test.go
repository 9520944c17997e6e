package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestParseSlackFlagsBoundsLoad(t *testing.T) {
	t.Setenv("SLACK_SIGNING_SECRET", "")
	if _, err := parseSlackFlags(nil, discard{}); err == nil {
		t.Error("no signing secret accepted")
	}
	for _, bad := range [][]string{
		{"--signing-secret", "s", "--events", "2000000"},
		{"--signing-secret", "s", "--rate", "50000"},
		{"--signing-secret", "s", "--rate", "1000", "--duration", "2h"},
		{"--signing-secret", "s", "--fake-listen", "10.0.0.1:9"},
	} {
		if _, err := parseSlackFlags(bad, discard{}); err == nil {
			t.Errorf("parseSlackFlags(%q) accepted", bad)
		}
	}
	if _, err := parseSlackFlags([]string{"--signing-secret", "s"}, discard{}); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
}

// TestPostMentionIsSignedLikeSlack: the request carries Slack's headers and
// a v0 signature over "v0:<ts>:<body>" with the signing secret.
func TestPostMentionIsSignedLikeSlack(t *testing.T) {
	t.Parallel()
	got := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts := r.Header.Get("X-Slack-Request-Timestamp")
		m := hmac.New(sha256.New, []byte("sekrit"))
		m.Write([]byte("v0:" + ts + ":"))
		m.Write(body)
		switch {
		case r.URL.Path != "/slack/events":
			got <- &httpError{status: 404, body: r.URL.Path}
		case r.Header.Get("X-Slack-Signature") != "v0="+hex.EncodeToString(m.Sum(nil)):
			got <- &httpError{status: 401, body: "bad signature"}
		case !strings.Contains(string(body), `"type":"app_mention"`) || !strings.Contains(string(body), `"channel":"C1"`):
			got <- &httpError{status: 400, body: string(body)}
		default:
			got <- nil
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	c := newClient(u, "", 1)
	if err := postMention(context.Background(), c, "sekrit", "n", "C1", 7, "ping", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// TestSlackFakeCountsFirstReplies: the first post to an expected channel
// completes its event; later posts and unknown channels are extra.
func TestSlackFakeCountsFirstReplies(t *testing.T) {
	t.Parallel()
	var replies int
	f := &slackFake{waiting: map[string]*pendingEvent{}, onReply: func(sent, at time.Time) { replies++ }}
	f.expect("C1", time.Now())
	post := func(ch string) {
		r := httptest.NewRequest("POST", "/api/chat.postMessage", strings.NewReader(url.Values{"channel": {ch}, "text": {"ok"}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		f.ServeHTTP(w, r)
		if !strings.Contains(w.Body.String(), `"ok":true`) {
			t.Fatalf("post answered %s", w.Body.String())
		}
	}
	post("C1")
	post("C1")
	post("C2")
	if replies != 1 || f.extra.Load() != 2 || f.posts.Load() != 3 {
		t.Fatalf("replies %d, extra %d, posts %d; want 1, 2, 3", replies, f.extra.Load(), f.posts.Load())
	}
}
