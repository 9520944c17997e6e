package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckIdentifier(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in     string
		reason string // "" = accepted
	}{
		{"", ""},
		{"run-01JX", ""},
		{"T1/C1/1712345678.000100", ""},
		{"<CAF=abc@mail.example.com>", ""},
		{"!room:matrix.example.org", ""},
		{"ünïcödé-✓", ""},
		{strings.Repeat("a", MaxIdentifier), ""},
		{strings.Repeat("a", MaxIdentifier+1), "longer than"},
		{"acc\x00bi", "control character U+0000"},
		{"a\nb", "control character U+000A"},
		{"a\x7fb", "control character U+007F"},
		{"a\u0085b", "control character U+0085"},
		{"\xff\xfe", "not valid UTF-8"},
		{"\xc0\x80", "not valid UTF-8"},
		{"\xed\xa0\x80", "not valid UTF-8"}, // a UTF-16 surrogate
	} {
		err := CheckIdentifier("id", c.in)
		switch {
		case c.reason == "" && err != nil:
			t.Errorf("CheckIdentifier(%q) = %v, want accepted", c.in, err)
		case c.reason != "" && (err == nil || !strings.Contains(err.Error(), c.reason) || !errors.Is(err, ErrInvalidInput)):
			t.Errorf("CheckIdentifier(%q) = %v, want ErrInvalidInput saying %q", c.in, err, c.reason)
		}
	}
}

func TestCheckText(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "deploy api 1.2.3", "line one\nline two\ttab", "✓ done"} {
		if err := CheckText("text", ok); err != nil {
			t.Errorf("CheckText(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"a\x00b", "\xff", "deploy \xc0\x80"} {
		if err := CheckText("text", bad); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("CheckText(%q) = %v, want ErrInvalidInput", bad, err)
		}
	}
}

// Each identifier and text of an event is checked, with its field named.
func TestChannelEventCheck(t *testing.T) {
	t.Parallel()
	good := func() ChannelEvent {
		return ChannelEvent{Channel: "console", EventID: "e1", Actor: Actor{ID: "console:alice", Name: "Alice"},
			Thread: Thread{Channel: "console", Key: "ops-1"}, Text: "deploy api 1.2.3"}
	}
	ev := good()
	if err := ev.Check(); err != nil {
		t.Fatalf("a good event: %v", err)
	}
	for field, spoil := range map[string]func(*ChannelEvent){
		"channel":        func(e *ChannelEvent) { e.Channel = "con\x00sole" },
		"event_id":       func(e *ChannelEvent) { e.EventID = "\xff" },
		"actor":          func(e *ChannelEvent) { e.Actor.ID = "console:a\x00" },
		"actor.name":     func(e *ChannelEvent) { e.Actor.Name = "A\x00" },
		"thread.channel": func(e *ChannelEvent) { e.Thread.Channel = "c\x01" },
		"thread":         func(e *ChannelEvent) { e.Thread.Key = "acc\x00bi" },
		"text":           func(e *ChannelEvent) { e.Text = "deploy\x00" },
		"approval_id":    func(e *ChannelEvent) { e.Decision = &Decision{ApprovalID: "a\x00"} },
		"reason":         func(e *ChannelEvent) { e.Decision = &Decision{ApprovalID: "a1", Reason: "\xc0"} },
		"run_id":         func(e *ChannelEvent) { e.Answer = &AnswerEvent{RunID: "r\x00", ActionID: "a"} },
		"action_id":      func(e *ChannelEvent) { e.Answer = &AnswerEvent{RunID: "r", ActionID: "a\n"} },
	} {
		ev := good()
		spoil(&ev)
		var ie *InputError
		if err := ev.Check(); !errors.As(err, &ie) || ie.Field != field {
			t.Errorf("spoiled %s: Check = %v, want an InputError for %s", field, err, field)
		}
	}
}

func TestCheckJSON(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{`{}`, `{"a":"b"}`, `{"a":"\\u0000"}`, `{"a":"\u0001"}`, `not json at all`, `{"a":`} {
		if err := CheckJSON([]byte(ok)); err != nil {
			t.Errorf("CheckJSON(%s) = %v, want accepted", ok, err)
		}
	}
	for _, bad := range []string{`{"thread":"acc\u0000bi"}`, `{"a\u0000":1}`, `["x","\u0000"]`, "{\"a\":\"\xff\"}", `{"a":{"b":["\u0000"]}}`} {
		if err := CheckJSON([]byte(bad)); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("CheckJSON(%q) = %v, want ErrInvalidInput", bad, err)
		}
	}
}

func TestCheckRequest(t *testing.T) {
	t.Parallel()
	for target, want := range map[string]bool{
		"/api/v1/runs/01JX":                                    true,
		"/api/v1/runs?status=succeeded&cursor=a":               true,
		"/api/v1/runs/%00":                                     false,
		"/api/v1/runs/%ff%fe":                                  false,
		"/api/v1/approvals/%00/decision":                       false,
		"/runs/a%0Ab":                                          false,
		"/api/v1/runs?status=%00":                              false,
		"/api/v1/runs?cursor=%FF":                              false,
		"/api/v1/runs?a=%zz":                                   false,
		"/api/v1/runs/" + strings.Repeat("a", MaxIdentifier+1): false,
	} {
		r := httptest.NewRequest("GET", target, nil)
		if err := CheckRequest(r); (err == nil) != want {
			t.Errorf("CheckRequest(%s) = %v, want accepted %v", target, err, want)
		}
	}
	h := GuardRequests(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for target, want := range map[string]int{"/x/ok": http.StatusTeapot, "/x/%00": http.StatusBadRequest} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		if rec.Code != want || (want == http.StatusBadRequest && !strings.Contains(rec.Body.String(), `"invalid_input"`)) {
			t.Errorf("GuardRequests %s = %d %s, want %d", target, rec.Code, rec.Body, want)
		}
	}
}

func TestIngressStatus(t *testing.T) {
	t.Parallel()
	su := &StoreUnavailableError{Store: "sqlite", Reason: "disk full", Err: errors.New("database or disk is full")}
	for _, c := range []struct {
		err    error
		status int
		msg    string
	}{
		{fmt.Errorf("engine: %w", &InputError{Field: "thread", Reason: "holds the control character U+0000"}), 400, "thread: holds the control character U+0000"},
		{fmt.Errorf("store: inbox record: %w", su), 503, "the sqlite store is unavailable (disk full)"},
		{errors.New("boom"), 500, ""},
	} {
		if got := IngressStatus(c.err); got != c.status {
			t.Errorf("IngressStatus(%v) = %d, want %d", c.err, got, c.status)
		}
		if got := IngressMessage(c.err); !strings.HasPrefix(got, c.msg) || (c.msg == "" && got != "") {
			t.Errorf("IngressMessage(%v) = %q, want %q…", c.err, got, c.msg)
		}
	}
	if !errors.Is(su, ErrStoreUnavailable) || errors.Unwrap(su) == nil {
		t.Error("StoreUnavailableError does not match ErrStoreUnavailable or hides its cause")
	}
}

// FuzzCheckJSON: whatever the bytes, CheckJSON never panics, refuses what
// is not UTF-8, and accepts every valid document whose decoded strings
// hold no NUL.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"\u0000"}`, `["\\u0000"]`, "{\"a\":\"\xff\"}", `{"a":`, `"\u0000"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := CheckJSON(b)
		if !utf8.Valid(b) && err == nil {
			t.Fatalf("accepted invalid UTF-8 %q", b)
		}
		if err == nil && utf8.Valid(b) && strings.Contains(string(b), `\u0000`) {
			// Accepted with a NUL escape in the text: it must be one
			// that does not decode to a NUL (an escaped backslash) or be
			// past a syntax error.
			var v any
			if jerr := jsonUnmarshal(b, &v); jerr == nil && holdsNUL(v) {
				t.Fatalf("accepted %q, which decodes to a NUL", b)
			}
		}
	})
}

// FuzzCheckRequest: no request target makes CheckRequest panic, and one it
// accepts has a path and query that CheckIdentifier and CheckText accept.
func FuzzCheckRequest(f *testing.F) {
	for _, s := range []string{"/api/v1/runs/x", "/a/%00", "/a?b=%ff", "/a?%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		r, err := http.NewRequest("GET", "http://h"+target, nil)
		if err != nil {
			return
		}
		if CheckRequest(r) == nil && strings.ContainsRune(r.URL.Path, 0) {
			t.Fatalf("accepted a path with a NUL: %q", r.URL.Path)
		}
	})
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// holdsNUL reports whether a decoded JSON value has a string (key or
// value) with a NUL in it.
func holdsNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.IndexByte(x, 0) >= 0
	case []any:
		for _, e := range x {
			if holdsNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range x {
			if strings.IndexByte(k, 0) >= 0 || holdsNUL(e) {
				return true
			}
		}
	}
	return false
}
