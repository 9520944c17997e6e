package slack

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/slack/internal/fakeslack"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// TestAgentQuestionButtons: an agent's confirm question reaches the thread
// with Yes/No buttons; the requester's click answers it and the model
// receives the answer.
func TestAgentQuestionButtons(t *testing.T) {
	t.Parallel()
	m := fakellm.Replies(
		&llm.Response{ToolCalls: []llm.ToolCall{{ID: "q1", Name: "ask_user", Arguments: `{"questions":[{"id":"go","kind":"confirm","text":"Restart api now?"}]}`}}},
		&llm.Response{Text: "Restarting."},
	)
	e := setup(t, func(_ *Config, ho *adaptertest.HarnessOptions) {
		ho.Agents = []engine.Agent{{Name: "ops", ModelName: "fake", Model: m, Default: true}}
	})
	status(t, e.slash("UREQ", "could you restart api?"), http.StatusOK)
	roots := e.roots()
	if len(roots) != 1 {
		t.Fatalf("roots %+v", roots)
	}
	var q fakeslack.Message
	e.h.Eventually("the question with buttons", func() bool {
		for _, msg := range e.fake.Thread("C1", roots[0].TS) {
			if bytes.Contains(msg.Blocks, []byte(`"opsgate:answer"`)) {
				q = msg
				return true
			}
		}
		return false
	})
	if !bytes.Contains(q.Blocks, []byte("Restart api now?")) || !bytes.Contains(q.Blocks, []byte(`"Yes"`)) {
		t.Fatalf("question blocks %s", q.Blocks)
	}
	// Someone who may not answer is refused; the requester's Yes answers.
	status(t, e.clickAs("USTRANGER", q, actionAnswer), http.StatusOK)
	run := e.runOf(roots[0].TS)
	if cur, _ := e.h.Store.RunGet(t.Context(), run.ID); cur.Status != core.RunWaitingInput {
		t.Fatalf("a stranger's click answered: %s", cur.Status)
	}
	status(t, e.clickAs("UREQ", q, actionAnswer), http.StatusOK)
	e.h.Eventually("the run to finish", func() bool {
		cur, _ := e.h.Store.RunGet(t.Context(), run.ID)
		return cur.Status == core.RunSucceeded
	})
	reqs := m.Requests()
	last := reqs[len(reqs)-1].Messages
	if got := last[len(last)-1].Text; !strings.Contains(got, "Answered by slack:UREQ:") || !strings.Contains(got, `"answer":"yes"`) {
		t.Fatalf("the model got %q", got)
	}
}

func TestQuestionBlocksOnlyForButtons(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	choice := &core.QuestionCard{RunID: "r1", ActionID: "ask-0", Questions: []core.QuestionItem{{ID: "env", Kind: "choice", Text: "Which?", Choices: []string{"staging", "prod"}}}}
	blocks := a.questionBlocks(core.Outbound{Text: "Which?", Question: choice})
	raw := checkLimits(t, blocks)
	if !strings.Contains(raw, a.sign.buttonValue(actionAnswer, "r1|ask-0|1")) || !strings.Contains(raw, "prod") {
		t.Fatalf("blocks %s", raw)
	}
	text := &core.QuestionCard{RunID: "r1", ActionID: "ask-0", Questions: []core.QuestionItem{{ID: "why", Kind: "text", Text: "Why?"}}}
	if b := a.questionBlocks(core.Outbound{Text: "Why?", Question: text}); b != nil {
		t.Fatal("a text question got buttons")
	}
	if b := a.questionBlocks(core.Outbound{Text: "hello"}); b != nil {
		t.Fatal("a plain reply got buttons")
	}
}
