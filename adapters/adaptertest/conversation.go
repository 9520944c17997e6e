package adaptertest

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/core/tools"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// conversationCases are the rules of a chat channel as a whole surface
// (docs/agents.md): people hold a conversation with the agent there,
// answer its questions there and approve its batches there, and the thread
// reads as the conversation. Each runs through the adapter's own receive
// path (Suite.Chat) and checks what the fake platform received; where the
// platform lacks a capability (Suite.Lacks) it checks the documented
// fallback instead.
//
//   - ReplyContinuesConversation: a reply to the bot's answer is the next
//     turn of the same session (the model remembers), in the same thread.
//   - DirectChatContinuesConversation: in a private chat the next message
//     is (CapDirect; otherwise a reply, as above).
//   - QuestionChoice, QuestionConfirm, QuestionSkip, QuestionFreeText: the
//     agent's question reaches the thread; it is answered there (a button,
//     a form, or a reply: "2", "yes", "skip", words); the model gets the
//     answer; the question's message then says who answered what (edited
//     in place with CapEdit, a new message otherwise).
//   - ApproveAll: one turn's two gated calls come on one card; the
//     approver approves both there at once ("Approve all" with
//     CapButtons, the text command the card shows otherwise); each runs
//     once and the agent answers.
//   - InterimTextInThread: what the model says before its tool call is in
//     the thread, before its answer.
var conversationCases = []Case{
	{"ReplyContinuesConversation", func(t *testing.T, s Suite) {
		c := s.conversation(t)
		if c == nil {
			return
		}
		c.chat.Say(t, s.Requester, "remember banana")
		noted := c.h.WaitMessage(c.fake, "Noted: banana.")
		c.chat.Reply(t, s.Requester, noted, "which word?")
		c.h.WaitMessage(c.fake, "The word was banana.")
		c.sameThread(t, 2)
	}},
	{"DirectChatContinuesConversation", func(t *testing.T, s Suite) {
		c := s.conversation(t)
		if c == nil {
			return
		}
		if !s.has(t, CapDirect) {
			c.chat.Say(t, s.Requester, "remember cherry")
			noted := c.h.WaitMessage(c.fake, "Noted: cherry.")
			c.chat.Reply(t, s.Requester, noted, "which word?")
			c.h.WaitMessage(c.fake, "The word was cherry.")
			return
		}
		d, ok := c.chat.(Direct)
		if !ok {
			t.Fatal("adaptertest: the platform has private chats (no Lacks[CapDirect]) but its Chat is no Direct")
		}
		d.SayDirect(t, s.Requester, "remember cherry")
		c.h.WaitMessage(c.fake, "Noted: cherry.")
		d.SayDirect(t, s.Requester, "which word?")
		c.h.WaitMessage(c.fake, "The word was cherry.")
		c.sameThread(t, 2)
	}},
	{"QuestionChoice", func(t *testing.T, s Suite) {
		s.question(t, "ask choice", "Which environment?", "prod", "2", "Got prod.")
	}},
	{"QuestionConfirm", func(t *testing.T, s Suite) {
		s.question(t, "ask confirm", "Proceed with the restart?", "Yes", "yes", "Got yes.")
	}},
	{"QuestionSkip", func(t *testing.T, s Suite) {
		s.question(t, "ask skip", "Any note for the changelog?", "Skip", "skip", "Got skipped.")
	}},
	{"QuestionFreeText", func(t *testing.T, s Suite) {
		s.question(t, "ask text", "What should the release be called?", "", "blue-green", "Got blue-green.")
	}},
	{"ApproveAll", func(t *testing.T, s Suite) {
		c := s.conversation(t)
		if c == nil {
			return
		}
		c.chat.Say(t, s.Requester, "two deploys")
		card := c.h.WaitMessage(c.fake, "deploy", "web")
		if s.has(t, CapButtons) {
			p, ok := c.chat.(Presser)
			if !ok {
				t.Fatal("adaptertest: the platform has buttons (no Lacks[CapButtons]) but its Chat is no Presser")
			}
			p.Press(t, s.Approver, card, "Approve all")
		} else {
			m := approveAllRE.FindStringSubmatch(card.Text)
			if m == nil {
				t.Fatalf("the batch card shows no %q command:\n%s", core.ApproveAllCommand("<ref>"), card.Text)
			}
			c.chat.Reply(t, s.Approver, card, strings.TrimSpace(core.ApproveAllCommand(m[1])))
		}
		c.h.WaitMessage(c.fake, "Both deploys are done.")
		if n := len(c.h.Dispatches()); n != 2 {
			t.Errorf("deploy dispatched %d times, want once per call", n)
		}
	}},
	{"InterimTextInThread", func(t *testing.T, s Suite) {
		c := s.conversation(t)
		if c == nil {
			return
		}
		c.chat.Say(t, s.Requester, "check api")
		c.h.WaitMessage(c.fake, "api is healthy.")
		c.h.WaitIdle()
		view := View(c.fake.Received())
		interim, final := -1, -1
		for i, m := range view {
			if strings.Contains(m.Text, "Checking api first.") && interim < 0 {
				interim = i
			}
			if strings.Contains(m.Text, "api is healthy.") {
				final = i
			}
		}
		if interim < 0 || final < 0 || interim >= final {
			t.Fatalf("the thread does not read as the conversation (interim at %d, answer at %d): %+v", interim, final, view)
		}
	}},
}

// approveAllRE finds the approve-all command a card shows, with the
// card's reference or (for a reply to the card itself) without.
var approveAllRE = regexp.MustCompile(`approve all(?: ([A-Za-z0-9_\-]+))?`)

// conv is one conversation case's harness, fake and driver.
type conv struct {
	h    *Harness
	fake Fake
	chat Chat
}

// conversation builds a harness whose default agent follows the script of
// converse, with a read tool "status" (allowed) beside the deploy tool
// (asked of the approvers). On a channel without chat it checks the
// fallback — the question links the console — and returns nil.
func (s Suite) conversation(t *testing.T) *conv {
	t.Helper()
	model := &fakellm.Model{Respond: converse}
	o := HarnessOptions{
		Agents: []engine.Agent{{Name: "ops", ModelName: "fake", Model: model, Tools: []string{"*"}, MaxSteps: 10, Default: true}},
		MoreTools: []*tools.Tool{{Name: "status", Description: "A service's health", Risk: approvals.RiskRead,
			Schema: mustSchema(t, "status", map[string]any{"type": "object", "properties": map[string]any{"service": map[string]any{"type": "string"}}}),
			Runner: &Recorder{Name: "status"}}},
		MoreRules: []approvals.Rule{{Tool: "status", Effect: approvals.EffectAllow}},
	}
	h, fake := s.New(t, o)
	if !s.has(t, CapChat) {
		rc := h.Send(s.Requester, s.Thread, "ask text")
		h.WaitRun(rc.RunID, core.RunWaitingInput)
		h.WaitMessage(fake, "What should the release be called?", "/runs/"+rc.RunID)
		return nil
	}
	return &conv{h: h, fake: fake, chat: s.Chat(t, h)}
}

// question asks the agent's question by saying ask, answers it as the
// requester — pressing press (CapButtons), filling a form (CapForms, for
// a free answer), or replying reply — and checks the model got it (its
// final text is done) and the question's message shows the answer.
func (s Suite) question(t *testing.T, ask, text, press, reply, done string) {
	t.Helper()
	c := s.conversation(t)
	if c == nil {
		return
	}
	c.chat.Say(t, s.Requester, ask)
	q := c.h.WaitMessage(c.fake, text)
	switch {
	case press == "" && s.has(t, CapForms):
		f, ok := c.chat.(Submitter)
		if !ok {
			t.Fatal("adaptertest: the platform has forms (no Lacks[CapForms]) but its Chat is no Submitter")
		}
		f.Submit(t, s.Requester, q, "Answer", reply)
	case press != "" && s.has(t, CapButtons):
		p, ok := c.chat.(Presser)
		if !ok {
			t.Fatal("adaptertest: the platform has buttons (no Lacks[CapButtons]) but its Chat is no Presser")
		}
		p.Press(t, s.Requester, q, press)
	default:
		c.chat.Reply(t, s.Requester, q, reply)
	}
	c.h.WaitMessage(c.fake, done)
	c.h.WaitIdle()
	// The question's message says who answered, in place or after it.
	msgs := c.fake.Received()
	edited, added := false, false
	for _, m := range msgs {
		if !strings.Contains(m.Text, "Answered by") {
			continue
		}
		switch {
		case m.EditOf == q.ID:
			edited = true
		case m.EditOf == "":
			added = true
		}
	}
	canEdit := s.has(t, CapEdit)
	if canEdit && !edited {
		t.Errorf("the question's message %s was not edited to show the answer; got %+v", q.ID, msgs)
	}
	if !canEdit && !added {
		t.Errorf("no message after the question shows the answer; got %+v", msgs)
	}
}

// sameThread checks that the harness's last n runs share one thread: the
// conversation continued rather than starting over.
func (c *conv) sameThread(t *testing.T, n int) {
	t.Helper()
	runs, _, err := c.h.Store.RunList(context.Background(), core.RunListParams{Limit: n})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != n {
		t.Fatalf("%d runs, want %d", len(runs), n)
	}
	for _, r := range runs[1:] {
		if r.Thread != runs[0].Thread {
			t.Errorf("the conversation's runs are in %s and %s; want one thread", runs[0].Thread, r.Thread)
		}
	}
}

func mustSchema(t *testing.T, name string, doc map[string]any) *approvals.Schema {
	t.Helper()
	sc, err := approvals.CompileSchema(name, doc)
	if err != nil {
		t.Fatalf("adaptertest: %s schema: %v", name, err)
	}
	return sc
}

var (
	rememberRE = regexp.MustCompile(`remember (\w+)`)
	answerRE   = regexp.MustCompile(`"answer":\s*"([^"]*)"`)
)

// questions the script asks, by what the person said.
var questions = map[string]string{
	"ask choice":  `{"questions":[{"id":"env","kind":"choice","text":"Which environment?","choices":["staging","prod"]}]}`,
	"ask confirm": `{"questions":[{"id":"ok","kind":"confirm","text":"Proceed with the restart?"}]}`,
	"ask skip":    `{"questions":[{"id":"note","kind":"text","text":"Any note for the changelog?","optional":true}]}`,
	"ask text":    `{"questions":[{"id":"name","kind":"text","text":"What should the release be called?"}]}`,
}

// converse is the agent of the conversation cases, a script decided by
// what the person said last and what came back since.
func converse(req *agent.Request) (*agent.Response, error) {
	last := -1
	for i, m := range req.Messages {
		if m.Role == agent.RoleUser {
			last = i
		}
	}
	if last < 0 {
		return nil, fmt.Errorf("converse: no user message")
	}
	said := req.Messages[last].Text
	var results []string
	for _, m := range req.Messages[last+1:] {
		if m.Role == agent.RoleTool {
			results = append(results, m.Text)
		}
	}
	say := func(text string) (*agent.Response, error) { return &agent.Response{Text: text}, nil }
	calls := func(text string, cs ...agent.ToolCall) (*agent.Response, error) {
		return &agent.Response{Text: text, ToolCalls: cs}, nil
	}
	switch {
	case strings.Contains(said, "which word"):
		for _, m := range req.Messages[:last] {
			if w := rememberRE.FindStringSubmatch(m.Text); m.Role == agent.RoleUser && w != nil {
				return say("The word was " + w[1] + ".")
			}
		}
		return say("I know no word.")
	case rememberRE.MatchString(said):
		return say("Noted: " + rememberRE.FindStringSubmatch(said)[1] + ".")
	case strings.Contains(said, "two deploys"):
		if len(results) == 0 {
			return calls("",
				agent.ToolCall{ID: "call_api", Name: "deploy", Arguments: `{"service":"api","version":"1.2.3","reason":"ship api"}`},
				agent.ToolCall{ID: "call_web", Name: "deploy", Arguments: `{"service":"web","version":"1.2.3","reason":"ship web"}`})
		}
		if len(results) == 2 && strings.Contains(results[0], "deployed") && strings.Contains(results[1], "deployed") {
			return say("Both deploys are done.")
		}
		return say("The deploys did not run: " + strings.Join(results, " | "))
	case strings.Contains(said, "check api"):
		if len(results) == 0 {
			return calls("Checking api first.", agent.ToolCall{ID: "call_status", Name: "status", Arguments: `{"service":"api","reason":"asked about api"}`})
		}
		return say("api is healthy.")
	}
	for key, ask := range questions {
		if !strings.Contains(said, key) {
			continue
		}
		if len(results) == 0 {
			return calls("", agent.ToolCall{ID: "call_ask", Name: "ask_user", Arguments: ask})
		}
		r := results[0]
		switch m := answerRE.FindStringSubmatch(r); {
		case strings.Contains(r, `"isSkipped":true`):
			return say("Got skipped.")
		case m != nil:
			return say("Got " + m[1] + ".")
		}
		return say("Got no answer: " + r)
	}
	return say("I did not understand.")
}
