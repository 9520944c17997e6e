package history

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
)

// Moment is one event of a run's timeline, in words.
type Moment struct {
	Seq  int64
	At   time.Time
	Type string
	// Text is what happened ("asked for approval to run deploy …").
	Text string
	// Since is the time from the moment before (0 for the first).
	Since time.Duration
}

// Timeline puts a run's events in words, in order, each with the time since
// the one before. Engine words become plain ones: the first turn.started
// is "started", a later one "resumed" (after an approval, an answer or a
// restart). Event types it does not know read as their type and fields.
func Timeline(events []core.RunEvent) []Moment {
	out := make([]Moment, 0, len(events))
	turns := 0
	var prev time.Time
	for _, ev := range events {
		if ev.Type == core.EventTextDelta {
			continue // streamed text; message.committed says it once
		}
		m := Moment{Seq: ev.Seq, At: ev.At, Type: ev.Type}
		if !prev.IsZero() {
			m.Since = ev.At.Sub(prev)
		}
		prev = ev.At
		d := decode(ev.Data)
		if ev.Type == core.EventTurnStarted {
			turns++
		}
		m.Text = eventText(ev.Type, d, turns)
		out = append(out, m)
	}
	return out
}

// eventText is one event in words; turns counts the turn.started events up
// to this one.
func eventText(typ string, d detail, turns int) string {
	switch typ {
	case core.EventRunQueued:
		if a := d.str("agent"); a != "" {
			return "queued for the agent " + clip(a, maxValue)
		}
		return "queued: " + callText(d.str("flow"), d.args("args"))
	case core.EventTurnStarted:
		verb := "started"
		if turns > 1 {
			verb = "resumed"
		}
		if n, ok := d.num("step_index"); ok && n > 0 {
			verb += fmt.Sprintf(" at step %d", n+1)
		}
		if a := d.str("agent"); a != "" {
			verb += " (agent " + clip(a, maxValue)
			if mo := d.str("model"); mo != "" {
				verb += ", model " + clip(mo, maxValue)
			}
			verb += ")"
		}
		return verb
	case core.EventPermissionRequested:
		s := "asked for approval to run " + callText(d.str("tool"), d.args("args"))
		if r := d.str("risk"); r != "" {
			s += " (" + clip(r, maxValue) + ")"
		}
		if ap := d.list("approvers"); ap != "" {
			s += "; " + ap + " to decide"
		}
		return s
	case core.EventPermissionDecided:
		s := strings.ReplaceAll(orThing(clip(d.str("status"), maxValue), "decided"), "_", " ")
		if by := d.list("by"); by != "" {
			s += " by " + by
		}
		return s
	case core.EventToolStarted:
		s := "running " + callText(d.str("tool"), d.args("args"))
		if n, ok := d.num("attempt"); ok && n > 1 {
			s += fmt.Sprintf(" (attempt %d)", n)
		}
		return s
	case core.EventToolOutput:
		s := orThing(clip(d.str("tool"), maxValue), "the tool") + " running"
		if ms, ok := d.num("elapsed_ms"); ok {
			s += " · " + Duration(time.Duration(ms)*time.Millisecond)
		}
		if ls, _ := d["lines"].([]any); len(ls) > 0 {
			if last, _ := ls[len(ls)-1].(string); last != "" {
				s += ": " + clip(last, maxText)
			}
		}
		return s
	case core.EventToolFinished:
		took := ""
		if ms, ok := d.num("duration_ms"); ok {
			took = " in " + Duration(time.Duration(ms)*time.Millisecond)
		}
		tool := orThing(clip(d.str("tool"), maxValue), "the tool")
		if e := clip(d.str("error"), maxText); e != "" {
			return tool + " failed" + took + ": " + e
		}
		if ok, isBool := d["ok"].(bool); isBool && !ok {
			return tool + " failed" + took
		}
		s := tool + " finished" + took
		if tr, _ := d["truncated"].(bool); tr {
			s += " (output cut at the cap)"
		}
		return s
	case core.EventMessageCommitted:
		return "replied: " + clip(firstLine(d.str("text")), maxText)
	case core.EventTurnFinished:
		s := "the run "
		switch st := clip(d.str("status"), maxValue); st {
		case string(core.RunRejected), string(core.RunCancelled), string(core.RunInterrupted):
			s += "was " + st
		case "":
			s += "ended"
		default:
			s += strings.ReplaceAll(st, "_", " ")
		}
		if e := clip(d.str("error"), maxText); e != "" {
			s += ": " + e
		}
		return s
	case core.EventQuestionRequested:
		return "asked a person: " + questionText(d)
	case core.EventQuestionAnswered:
		if exp, _ := d["expired"].(bool); exp {
			return "the question expired unanswered"
		}
		s := "answered"
		if by := d.str("by"); by != "" {
			s += " by " + clip(by, maxValue)
		}
		return s
	case core.EventAgentMessage:
		return agentMessage(d)
	case "agent_call.requested":
		return "asked an agent to " + orThing(clip(d.str("stage"), maxValue), "do a task")
	case "agent_call.claimed":
		return "an agent took the task: " + clip(d.str("by"), maxValue)
	case "agent_call.finished":
		return "the agent task " + orThing(clip(d.str("status"), maxValue), "ended")
	}
	if r := d.rest(); r != "" {
		return clip(typ, maxValue) + ": " + r
	}
	return clip(typ, maxValue)
}

// questionText is the first question of a question.requested event.
func questionText(d detail) string {
	qs, _ := d["questions"].([]any)
	if len(qs) == 0 {
		return "a question"
	}
	q, _ := qs[0].(map[string]any)
	s := clip(detail(q).str("text"), maxText)
	if len(qs) > 1 {
		s += fmt.Sprintf(" (+%d more)", len(qs)-1)
	}
	return s
}

// agentMessage is an agent.message event (core/agent's Message): the
// request, the model's answer and calls, or a tool's result.
func agentMessage(d detail) string {
	switch d.str("role") {
	case "user":
		return "the request reached the model"
	case "assistant":
		var tools []string
		calls, _ := d["calls"].([]any)
		for _, c := range calls {
			if m, ok := c.(map[string]any); ok {
				tools = append(tools, clip(detail(m).str("tool"), maxValue))
			}
		}
		s := "the model"
		if t := clip(firstLine(d.str("text")), maxText); t != "" {
			s += " said: " + t
			if len(tools) > 0 {
				s += ";"
			}
		}
		if len(tools) > 0 {
			s += " called " + strings.Join(tools, ", ")
		}
		if s == "the model" {
			s += " answered"
		}
		return s
	case "tool":
		s := "result of " + orThing(clip(d.str("tool"), maxValue), "a tool")
		if e, _ := d["is_error"].(bool); e {
			s += " (an error)"
		}
		return s
	}
	return "a message of the conversation"
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// Share is where part of a run's time went.
type Share struct {
	// What is "waiting for approval", "running deploy", "queued", …
	What string
	Took time.Duration
}

// Spent says where a run's time went, longest first: time queued before it
// started or resumed, waiting for a human (approval, answer), each tool
// running, and the rest as "working" (the engine and the model). end is
// when the run ended, or now for a run still going.
func Spent(events []core.RunEvent, end time.Time) []Share {
	if len(events) == 0 {
		return nil
	}
	sums := map[string]time.Duration{}
	// state is what the run is doing from each event on.
	state := ""
	var since time.Time
	move := func(at time.Time, next string) {
		if state != "" && !since.IsZero() && at.After(since) {
			sums[state] += at.Sub(since)
		}
		state, since = next, at
	}
	for _, ev := range events {
		d := decode(ev.Data)
		switch ev.Type {
		case core.EventRunQueued:
			move(ev.At, "queued")
		case core.EventTurnStarted:
			move(ev.At, "working")
		case core.EventPermissionDecided, core.EventQuestionAnswered:
			// Decided: the run is queued again until a replica takes it.
			move(ev.At, "queued")
		case core.EventPermissionRequested:
			move(ev.At, "waiting for approval")
		case core.EventQuestionRequested:
			move(ev.At, "waiting for an answer")
		case core.EventToolStarted:
			move(ev.At, "running "+orThing(clip(d.str("tool"), maxValue), "a tool"))
		case core.EventToolFinished:
			move(ev.At, "working")
		case core.EventTurnFinished:
			move(ev.At, "")
		}
	}
	if state != "" && end.After(since) {
		sums[state] += end.Sub(since)
	}
	out := make([]Share, 0, len(sums))
	for what, took := range sums {
		if took > 0 {
			out = append(out, Share{What: what, Took: took})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Took != out[j].Took {
			return out[i].Took > out[j].Took
		}
		return out[i].What < out[j].What
	})
	return out
}

// SpentText is Spent as one line: "2m14s in all: 2m01s waiting for
// approval (90%), 12s running deploy (9%), 1s working (1%)".
func SpentText(shares []Share) string {
	var total time.Duration
	for _, s := range shares {
		total += s.Took
	}
	if total <= 0 {
		return ""
	}
	parts := make([]string, 0, len(shares))
	for _, s := range shares {
		parts = append(parts, fmt.Sprintf("%s %s (%d%%)", Duration(s.Took), s.What, int(s.Took*100/total)))
	}
	return Duration(total) + " in all: " + strings.Join(parts, ", ")
}
