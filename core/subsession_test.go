package core

import "testing"

func TestSubSessionNamesItsRoot(t *testing.T) {
	t.Parallel()
	chat := Thread{Channel: "slack", Key: "T1/C1/1700000000.1@x"}
	sub := SubSession("run-1", 2, chat)
	if sub.Channel != AgentSessionChannel || sub.Key != "sub-run-1-2@slack:T1/C1/1700000000.1@x" {
		t.Fatalf("sub-session %v", sub)
	}
	if root, ok := SubSessionRoot(sub); !ok || root != chat || HomeThread(sub) != chat {
		t.Fatalf("root %v %v", root, ok)
	}
	// A sub-agent's sub-agent has the same root.
	if deeper := SubSession("run-2", 0, sub); HomeThread(deeper) != chat {
		t.Fatalf("nested %v", deeper)
	}
	for _, th := range []Thread{chat, {Channel: AgentSessionChannel, Key: "0f8c…"}, {Channel: AgentSessionChannel, Key: "sub-x"},
		{Channel: AgentSessionChannel, Key: "sub-x@nothread"}, {Channel: AgentSessionChannel, Key: "sub-x@agent:sub-y@slack:a"}, {Channel: "slack", Key: "sub-x@slack:a"}} {
		if _, ok := SubSessionRoot(th); ok || HomeThread(th) != th {
			t.Errorf("%v taken for a sub-session", th)
		}
	}
}

// FuzzSubSessionRoot: a sessionId from an API body is never taken for a
// sub-session unless it names a root that is not one, and never panics.
func FuzzSubSessionRoot(f *testing.F) {
	f.Add("sub-r-1@agent:0f8c")
	f.Add("sub-@:")
	f.Add("sub-a@agent:sub-b@slack:c")
	f.Fuzz(func(t *testing.T, key string) {
		root, ok := SubSessionRoot(Thread{Channel: AgentSessionChannel, Key: key})
		if !ok {
			return
		}
		if _, nested := SubSessionRoot(root); nested || root.Channel == "" || root.Key == "" {
			t.Fatalf("%q: root %v", key, root)
		}
	})
}
