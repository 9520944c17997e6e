package mcp

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzOpenState: a requestState from outside never opens unless this
// server signed exactly it, and never panics.
func FuzzOpenState(f *testing.F) {
	s := &Server{stateK: subKey(testKey, "mcp request state v1")}
	good := s.signState(requestState{V: 1, Run: "r", Action: "a", Actor: "agent:x", Endpoint: PathExternal, Exp: 1 << 40})
	f.Add(good)
	f.Add("")
	f.Add(".")
	f.Add("eyJ2IjoxfQ.AAAA")
	f.Add(good + "x")
	f.Fuzz(func(t *testing.T, raw string) {
		st, err := s.openState(raw, time.Unix(0, 0))
		if err != nil {
			return
		}
		if raw != good || st.Run != "r" || st.Actor != "agent:x" {
			t.Fatalf("opened %q as %+v", raw, st)
		}
	})
}

// FuzzPeek: any body is either peeked or left alone, never a panic; a
// peeked call names its method.
func FuzzPeek(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	f.Add([]byte(`{"method":"x","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`))
	f.Add([]byte(`[{"method":"x"}]`))
	f.Add([]byte(`{"id":null,"method":7}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, ok := peek(body)
		if !ok {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("peeked invalid JSON %q", body)
		}
		if p.isCall && (len(p.id) == 0 || string(p.id) == "null") {
			t.Fatalf("a call without an id: %+v", p)
		}
	})
}

// FuzzToolInput: arguments either pass a tool's input schema (and decode
// to an object) or are refused with a message; never a panic.
func FuzzToolInput(f *testing.F) {
	s := compileSchema("fuzz", input(js{"runId": strMax("x", maxIDLen), "limit": integer("n", 1, maxLimit)}, "runId"))
	f.Add([]byte(`{"runId":"a","limit":3}`))
	f.Add([]byte(`{"runId":""}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"runId":"a","x":1}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := validateInput(s, raw)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty message")
			}
			return
		}
		var id string
		if json.Unmarshal(m["runId"], &id) != nil || id == "" || len(id) > maxIDLen {
			t.Fatalf("accepted %q", raw)
		}
	})
}
