package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/agentrun"
	"github.com/opsgate/opsgate/core/markdown"
)

// What a thread reads of an agent's question: the question (how to answer
// by a reply, the console link), and, once answered or expired, the same
// message updated to say so (docs/agents.md, "Questions").

// questionText is the question as the thread gets it: every question
// (a choice may be answered by its number, counting from 1), how to
// answer by replying, and the console link.
func questionText(ask llm.Ask, run *core.Run, idx int, publicURL string, expires time.Time) string {
	var b strings.Builder
	b.WriteString("❓ The agent asks:\n")
	for i, q := range ask.Questions {
		fmt.Fprintf(&b, "%d. %s", i+1, markdown.Escape(core.OneLine(q.Text)))
		switch q.Kind {
		case llm.QuestionChoice:
			b.WriteString(" (one of: " + markdown.Escape(strings.Join(q.Choices, ", ")) + " — or its number)")
		case llm.QuestionConfirm:
			b.WriteString(" (yes or no)")
		}
		if q.Optional {
			b.WriteString(" — optional, reply \"skip\" to skip")
		}
		b.WriteString("\n")
	}
	if len(ask.Questions) == 1 {
		b.WriteString("Reply in this thread with your answer")
	} else {
		b.WriteString("Reply in this thread with one line per question, in order")
	}
	fmt.Fprintf(&b, " (before %s).", expires.UTC().Format("2006-01-02 15:04 UTC"))
	if publicURL != "" {
		fmt.Fprintf(&b, " Or answer in the console: %s/runs/%s", strings.TrimRight(publicURL, "/"), run.ID)
	}
	return b.String()
}

// agentAsker is who asks an agent's ask_user question.
const agentAsker = "The agent"

// asker names who asked question st of run, as its messages say it: the
// agent, or for a question a running tool asked (an upstream MCP server's
// elicitation, upstreamquestion.go) the tool whose call asked — opsgate's
// name for it, "<server>.<tool>" for an upstream server's.
func asker(run *core.Run, st core.Step) string {
	if !toolQuestion(st) {
		return agentAsker
	}
	idx := (st.Index - toolQuestionBase) / toolQuestionSlots
	for _, s := range run.Steps {
		if s.Index == idx && s.Tool != "" {
			if server, _, ok := strings.Cut(s.Tool, "."); ok {
				return "The tool " + s.Tool + " (MCP server " + server + ")"
			}
			return "The tool " + s.Tool
		}
	}
	return "A tool"
}

// askedText is the question as its updated message repeats it, who
// asked it first.
func askedText(who string, ask llm.Ask) string {
	var b strings.Builder
	who = markdown.Escape(core.OneLine(who))
	if len(ask.Questions) == 1 {
		b.WriteString("❓ " + who + " asked: " + markdown.Escape(core.OneLine(ask.Questions[0].Text)) + "\n")
		return b.String()
	}
	b.WriteString("❓ " + who + " asked:\n")
	for i, q := range ask.Questions {
		fmt.Fprintf(&b, "%d. %s\n", i+1, markdown.Escape(core.OneLine(q.Text)))
	}
	return b.String()
}

// answeredText is the question's message once answered: the question and
// who answered what, when.
func answeredText(who string, ask llm.Ask, r llm.Reply, by string, at time.Time) string {
	var b strings.Builder
	b.WriteString(askedText(who, ask))
	fmt.Fprintf(&b, "✅ Answered by %s at %s", markdown.Escape(core.OneLine(by)), at.UTC().Format("2006-01-02 15:04 UTC"))
	switch {
	case r.Confirmation != nil:
		b.WriteString(": " + yesNo(r.Confirmation.IsConfirmed))
		if f := r.Confirmation.Feedback; f != "" {
			b.WriteString(" — " + markdown.Escape(core.OneLine(f)))
		}
	case len(r.Answers) == 1:
		b.WriteString(": " + answerShown(r.Answers[0]))
	default:
		b.WriteString(":")
		for i, a := range r.Answers {
			fmt.Fprintf(&b, "\n%d. %s", i+1, answerShown(a))
		}
	}
	return b.String()
}

func answerShown(a llm.Answer) string {
	if a.IsSkipped {
		return "(skipped)"
	}
	return markdown.Escape(core.OneLine(a.Answer))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// expiredText is the question's message once it expired unanswered.
func expiredText(who string, ask llm.Ask, at time.Time) string {
	return askedText(who, ask) + "⌛ Expired at " + at.UTC().Format("2006-01-02 15:04 UTC") + " with no answer."
}

// questionUpdate is the outbox message that edits the question message
// questionID (the step's output while it waited) to say text.
func (e *Engine) questionUpdate(run *core.Run, questionID, text string) core.OutboxMessage {
	m := e.reply(run, text)
	m.Kind, m.Replaces = core.KindQuestionUpdate, questionID
	return m
}

// closedQuestion is the refusal of an answer to a question that no longer
// waits: who answered it and when, or that it expired.
func closedQuestion(st core.Step) *core.DecisionError {
	de := &core.DecisionError{Code: core.DecisionAlreadyDecided, Message: "this question is no longer waiting for an answer", Question: true}
	var an agentrun.Answered
	switch {
	case st.Status == core.StepSucceeded && json.Unmarshal([]byte(st.Output), &an) == nil:
		de.By = an.By
		if st.FinishedAt != nil {
			de.At = *st.FinishedAt
		}
	case st.Status == core.StepFailed && (st.Error == whyQuestionExpired || st.Error == whyAskerGone):
		de.Code = core.DecisionExpired
		if st.FinishedAt != nil {
			de.At = *st.FinishedAt
		}
	}
	return de
}

// replyAnswers reads a reply in the thread as the answers to ask: the
// whole text for a single question, else one line per question in order;
// "skip" (or nothing) skips an optional question, and a choice may be
// given by its number.
func replyAnswers(ask llm.Ask, text string) []llm.Answer {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(ask.Questions) == 1 {
		lines = []string{strings.TrimSpace(text)}
	}
	answers := make([]llm.Answer, 0, len(ask.Questions))
	for i, q := range ask.Questions {
		a := llm.Answer{QuestionID: q.ID}
		if i < len(lines) {
			a.Answer = strings.TrimSpace(lines[i])
		}
		if q.Kind == llm.QuestionChoice {
			a.Answer = choiceByNumber(q.Choices, a.Answer)
		}
		if q.Optional && (a.Answer == "" || strings.EqualFold(a.Answer, "skip")) {
			a.IsSkipped, a.Answer = true, ""
		}
		answers = append(answers, a)
	}
	return answers
}

// choiceByNumber is s, or the choice it numbers ("2", "2." or "2)") when
// no choice is spelled s itself.
func choiceByNumber(choices []string, s string) string {
	for _, c := range choices {
		if strings.EqualFold(c, s) {
			return s
		}
	}
	n, err := strconv.Atoi(strings.TrimRight(s, ".)"))
	if err != nil || n < 1 || n > len(choices) {
		return s
	}
	return choices[n-1]
}
