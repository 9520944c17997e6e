package api

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkPostMessage measures the API's own overhead per console message
// (auth, decode, validation, response) over the in-memory fakes, so a
// regression in the HTTP layer shows apart from the store's cost.
func BenchmarkPostMessage(b *testing.B) {
	st := newMemStore()
	h, err := New(Options{Engine: &fakeEngine{st: st, now: nowFunc}, Store: st, Now: nowFunc,
		Tokens: []Token{{Name: "a", Token: "t1", Actor: "console:a"}, {Name: "admin", Token: adminToken, Actor: "console:admin"}}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		req := httptest.NewRequest("POST", "/api/v1/messages",
			strings.NewReader(fmt.Sprintf(`{"thread":"t%d","text":"hello","event_id":"e%d"}`, i%64, i)))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}
