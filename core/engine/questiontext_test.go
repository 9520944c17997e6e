package engine

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
)

var replyAsk = llm.Ask{Questions: []llm.Question{
	{ID: "env", Kind: llm.QuestionChoice, Text: "Which environment?", Choices: []string{"staging", "prod"}},
	{ID: "why", Kind: llm.QuestionText, Text: "Why now?", Optional: true},
	{ID: "go", Kind: llm.QuestionConfirm, Text: "Go?"},
}}

func TestReplyAnswers(t *testing.T) {
	t.Parallel()
	one := llm.Ask{Questions: replyAsk.Questions[:1]}
	for _, tc := range []struct {
		name string
		ask  llm.Ask
		text string
		want []llm.Answer
	}{
		{"choice by number", one, " 2 ", []llm.Answer{{QuestionID: "env", Answer: "prod"}}},
		{"choice by number and period", one, "1.", []llm.Answer{{QuestionID: "env", Answer: "staging"}}},
		{"choice by name kept as written", one, "PROD", []llm.Answer{{QuestionID: "env", Answer: "PROD"}}},
		{"number out of range stays words", one, "3", []llm.Answer{{QuestionID: "env", Answer: "3"}}},
		{"single question takes the whole text", llm.Ask{Questions: replyAsk.Questions[1:2]}, "because\nit is time",
			[]llm.Answer{{QuestionID: "why", Answer: "because\nit is time"}}},
		{"one line per question, skip", replyAsk, "2)\nskip\nyes", []llm.Answer{
			{QuestionID: "env", Answer: "prod"}, {QuestionID: "why", IsSkipped: true}, {QuestionID: "go", Answer: "yes"}}},
		{"missing lines leave answers empty", replyAsk, "staging", []llm.Answer{
			{QuestionID: "env", Answer: "staging"}, {QuestionID: "why", IsSkipped: true}, {QuestionID: "go"}}},
	} {
		if got := replyAnswers(tc.ask, tc.text); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: replyAnswers(%q) = %+v, want %+v", tc.name, tc.text, got, tc.want)
		}
	}
}

// FuzzReplyAnswers: a reply is outside text; whatever it says, it yields
// exactly one answer per question, in order, a skip only for an optional
// question, and a numbered choice only as one of the choices.
func FuzzReplyAnswers(f *testing.F) {
	f.Add("2\nskip\nyes")
	f.Add("")
	f.Add("0\n-1\n99999999999999999999")
	f.Fuzz(func(t *testing.T, text string) {
		got := replyAnswers(replyAsk, text)
		if len(got) != len(replyAsk.Questions) {
			t.Fatalf("%d answers for %d questions", len(got), len(replyAsk.Questions))
		}
		for i, a := range got {
			q := replyAsk.Questions[i]
			if a.QuestionID != q.ID {
				t.Fatalf("answer %d is for %q, want %q", i, a.QuestionID, q.ID)
			}
			if a.IsSkipped && (!q.Optional || a.Answer != "") {
				t.Fatalf("skip of %q with answer %q", q.ID, a.Answer)
			}
			if a.Answer != strings.TrimSpace(a.Answer) {
				t.Fatalf("answer %q not trimmed", a.Answer)
			}
		}
	})
}

// TestQuestionMessagesNameWhoAsked: an agent's question says the agent
// asked; a tool's names the tool whose call asked, and an upstream
// server's tool its server — in the answered and the expired message.
func TestQuestionMessagesNameWhoAsked(t *testing.T) {
	t.Parallel()
	ask := llm.Ask{Questions: []llm.Question{{ID: "env", Kind: llm.QuestionText, Text: "Environment?"}}}
	run := &core.Run{Steps: []core.Step{{Index: 0, Tool: "status"}, {Index: 2, Tool: "fs.deploy"}}}
	at := time.Date(2026, 12, 7, 23, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		st   core.Step
		want string
	}{
		{core.Step{Index: 1, Tool: llm.AskUserTool}, "❓ The agent asked: Environment?"},
		{core.Step{Index: toolQuestionBase + 2*toolQuestionSlots + 1}, "❓ The tool fs.deploy (MCP server fs) asked: Environment?"},
		{core.Step{Index: toolQuestionBase}, "❓ The tool status asked: Environment?"},
	} {
		who := asker(run, c.st)
		reply := llm.Reply{Answers: []llm.Answer{{QuestionID: "env", Answer: "prod"}}}
		if got := answeredText(who, ask, reply, "console:alice", at); !strings.HasPrefix(got, c.want+"\n✅ Answered by console:alice") {
			t.Errorf("answered: %q, want it to start %q", got, c.want)
		}
		if got := expiredText(who, ask, at); !strings.HasPrefix(got, c.want+"\n⌛ Expired") {
			t.Errorf("expired: %q, want it to start %q", got, c.want)
		}
	}
}
