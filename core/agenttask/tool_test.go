package agenttask

import (
	"errors"
	"testing"

	"github.com/opsgate/opsgate/core"
)

func agentCode(t *testing.T, err error) core.AgentErrorCode {
	t.Helper()
	var ae *core.AgentError
	if !errors.As(err, &ae) {
		t.Fatalf("want *core.AgentError, got %v", err)
	}
	return ae.Code
}

// FuzzCanonicalInput: an agent's tool input is an object in one canonical
// form (equal inputs compare equal) or refused; never a panic.
func FuzzCanonicalInput(f *testing.F) {
	f.Add([]byte(`{"b":1,"a":"x"}`))
	f.Add([]byte(` { "a" : "x" , "b" : 1 } `))
	f.Add([]byte(`[1]`))
	f.Add([]byte(`{"a":1}{"b":2}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		canon, args, err := canonicalInput(raw)
		if err != nil {
			if agentCode(t, err) != core.AgentInvalidInput {
				t.Fatal(err)
			}
			return
		}
		again, _, err := canonicalInput(canon)
		if err != nil || string(again) != string(canon) || args == nil {
			t.Fatalf("%q → %q → %q (%v)", raw, canon, again, err)
		}
	})
}

func TestCanonicalInputRefusesHugeNumbers(t *testing.T) {
	if _, _, err := canonicalInput([]byte(`{"a":1e400}`)); agentCode(t, err) != core.AgentInvalidInput {
		t.Fatal(err)
	}
}
