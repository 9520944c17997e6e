package engine

import (
	"reflect"
	"strings"
	"testing"

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
