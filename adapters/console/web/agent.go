package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/authority"
)

// An agent run's page shows the conversation (the agent.message events of
// the run: the request, each model turn with its text and tool calls, each
// call's result as the model received it) and, while the run waits for
// input, the question as a form.

// convoEntry is one message of the conversation.
type convoEntry struct {
	Role   string // user | assistant | tool
	Text   string
	Calls  []convoCall
	Tool   string
	Error  bool
	Tokens string // "12 in · 5 out" for a model turn
	At     string
}

type convoCall struct {
	ID, Tool, Args, Reason, Problem string
}

// questionView is a pending ask_user question as a form.
type questionView struct {
	ActionID  string
	Questions []llm.Question
}

// conversation renders the agent.message events.
func conversation(evs []core.RunEvent) []convoEntry {
	var out []convoEntry
	for _, ev := range evs {
		if ev.Type != core.EventAgentMessage {
			continue
		}
		var m llm.Message
		if json.Unmarshal(ev.Data, &m) != nil {
			continue
		}
		e := convoEntry{Role: string(m.Role), Text: m.Text, Tool: m.Tool, Error: m.IsError, At: ts(ev.At)}
		for _, p := range m.Parts {
			if e.Text != "" {
				e.Text += "\n"
			}
			e.Text += p.Text
		}
		for _, c := range m.Calls {
			args := c.Arguments
			if c.Args != nil {
				args = prettyJSON(c.Args)
			}
			e.Calls = append(e.Calls, convoCall{ID: c.ID, Tool: c.Tool, Args: args, Reason: c.Reason, Problem: c.Problem})
		}
		if m.Usage != nil {
			e.Tokens = fmt.Sprintf("%d in · %d out", m.Usage.InputTokens, m.Usage.OutputTokens)
		}
		out = append(out, e)
	}
	return out
}

// pendingQuestion is the ask of the step waiting for input, if any.
func pendingQuestion(r *core.Run) *questionView {
	if r.Status != core.RunWaitingInput {
		return nil
	}
	for _, st := range r.Steps {
		if st.Status != "waiting_input" {
			continue
		}
		b, _ := json.Marshal(st.Args)
		ask, err := llm.ParseAsk(string(b))
		if err != nil {
			return nil
		}
		return &questionView{ActionID: fmt.Sprintf("ask-%d", st.Index), Questions: ask.Questions}
	}
	return nil
}

// answerRun posts the question form: q:<id> per question (empty skips an
// optional one) as the question array, through the engine's Answer.
func (s *server) answerRun(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	info := infoFrom(ctx)
	id := r.PathValue("id")
	qa, ok := s.o.Engine.(api.Answerer)
	if !ok {
		s.plainError(w, http.StatusNotFound, "This server takes no answers.")
		return
	}
	run, err := s.auth.Run(ctx, info.auth, authority.Answer, id)
	if err != nil {
		s.refused(w, r, err)
		return
	}
	q := pendingQuestion(run)
	if q == nil || q.ActionID != r.PostFormValue("action_id") {
		s.plainError(w, http.StatusConflict, "This question is no longer waiting for an answer.")
		return
	}
	var answers []llm.Answer
	for _, question := range q.Questions {
		v := strings.TrimSpace(r.PostFormValue("q:" + question.ID))
		answers = append(answers, llm.Answer{QuestionID: question.ID, Answer: v, IsSkipped: v == "" && question.Optional})
	}
	raw, _ := json.Marshal(answers)
	err = qa.Answer(ctx, info.actor, Channel, id, q.ActionID, raw)
	var de *core.DecisionError
	switch {
	case errors.As(err, &de):
		s.plainError(w, de.Code.HTTPStatus(), core.RefusalText(de))
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(id)+"?done=answered", http.StatusSeeOther)
}
