package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/textinput"

	"github.com/opsgate/opsgate/internal/client"
)

// question is a pending question of a run (its pending_actions entry),
// as the queue shows it.
type question struct {
	runID     string
	thread    string
	requester string
	action    client.PendingAction
}

// answerField is one question's input: free text, a choice (an index
// into Choices) or a confirmation.
type answerField struct {
	item    client.QuestionItem
	input   textinput.Model // text, and the feedback of a confirmation
	choice  int
	confirm bool
	err     string
}

// answerForm answers every question of one pending question at once.
type answerForm struct {
	q      *question
	fields []*answerField
	focus  int
	err    string
}

func newAnswerForm(q *question) *answerForm {
	f := &answerForm{q: q}
	for _, it := range q.action.Questions {
		in := textinput.New()
		in.Prompt = ""
		in.CharLimit = 4096
		if it.Kind == "confirm" {
			in.Placeholder = "feedback (optional)"
		}
		f.fields = append(f.fields, &answerField{item: it, input: in, confirm: true})
	}
	f.setFocus(0)
	return f
}

func (f *answerForm) setFocus(i int) {
	if len(f.fields) == 0 {
		return
	}
	i = (i + len(f.fields)) % len(f.fields)
	f.fields[f.focus].input.Blur()
	f.focus = i
	if k := f.fields[i].item.Kind; k != "choice" {
		f.fields[i].input.Focus()
	}
}

// answer builds the body's answer: a confirmation object for a single
// confirm question, else the question array. ok is false when a required
// answer is missing (its err set).
func (f *answerForm) answer() (any, bool) {
	f.err = ""
	if len(f.fields) == 1 && f.fields[0].item.Kind == "confirm" {
		fd := f.fields[0]
		return client.Confirmation{IsConfirmed: fd.confirm, Feedback: fd.input.Value()}, true
	}
	out := make([]client.QuestionAnswer, 0, len(f.fields))
	ok := true
	for _, fd := range f.fields {
		fd.err = ""
		a := client.QuestionAnswer{QuestionID: fd.item.ID}
		switch fd.item.Kind {
		case "choice":
			if len(fd.item.Choices) == 0 {
				a.IsSkipped = true
			} else {
				a.Answer = fd.item.Choices[fd.choice]
			}
		case "confirm":
			a.Answer = map[bool]string{true: "yes", false: "no"}[fd.confirm]
		default:
			a.Answer = fd.input.Value()
			if strings.TrimSpace(a.Answer) == "" {
				if !fd.item.Optional {
					fd.err, ok = "an answer is required", false
				}
				a.IsSkipped = true
			}
		}
		out = append(out, a)
	}
	return out, ok
}

// serverError places a 422's field (a question id) next to its question.
func (f *answerForm) serverError(fieldPath, msg string) {
	for i, fd := range f.fields {
		if fieldPath != "" && strings.Contains(fieldPath, fd.item.ID) {
			fd.err = msg
			f.setFocus(i)
			return
		}
	}
	f.err = msg
}

// summary is the queue line of a question: its first question's text.
func (q *question) summary() string {
	if len(q.action.Questions) == 0 {
		return "(no questions)"
	}
	s := q.action.Questions[0].Text
	if n := len(q.action.Questions); n > 1 {
		s += fmt.Sprintf(" (+%d more)", n-1)
	}
	return s
}
