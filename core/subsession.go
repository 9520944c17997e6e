package core

import (
	"strconv"
	"strings"
)

// Sub-agent sessions (docs/agents.md, "Sub-agents"): an agent that
// delegates to another configured agent starts the child's turn in a
// session of its own, so the child has its own sessionId, history and
// queue. The session's thread names the thread the delegation began in —
// its root, a chat thread or an Agent API session — so the child's cards,
// questions and replies go where the person who started it is, and the
// root's attendance is the child's. The key is written by the engine only:
// "sub-<parent run>-<step>@<root thread>".
const subSessionPrefix = "sub-"

// SubSession is the thread of the sub-agent turn that step idx of run
// parentRun starts; root is the thread the delegation began in (the
// parent's root when the parent is itself a sub-agent).
func SubSession(parentRun string, idx int, root Thread) Thread {
	if r, ok := SubSessionRoot(root); ok {
		root = r
	}
	return Thread{Channel: AgentSessionChannel, Key: subSessionPrefix + parentRun + "-" + strconv.Itoa(idx) + "@" + root.String()}
}

// SubSessionRoot returns the root thread of a sub-agent session; ok is
// false for every other thread.
func SubSessionRoot(t Thread) (root Thread, ok bool) {
	if t.Channel != AgentSessionChannel || !strings.HasPrefix(t.Key, subSessionPrefix) {
		return Thread{}, false
	}
	_, rest, found := strings.Cut(t.Key, "@")
	if !found {
		return Thread{}, false
	}
	r, err := ParseThread(rest)
	if err != nil || (r.Channel == AgentSessionChannel && strings.HasPrefix(r.Key, subSessionPrefix)) {
		return Thread{}, false
	}
	return r, true
}

// HomeThread is where a run in thread t speaks and who attends it: the
// root of a sub-agent session, else t itself.
func HomeThread(t Thread) Thread {
	if r, ok := SubSessionRoot(t); ok {
		return r
	}
	return t
}
