package agent

import (
	"fmt"
	"unicode/utf8"
)

// Window bounds the history sent with one request.
type Window struct {
	// MaxBytes bounds the rendered history (roughly 4 bytes per token);
	// default 256 KiB. The system prompt and tool definitions are not
	// counted. The newest exchange is always sent.
	MaxBytes int
	// MaxToolResult bounds the external content of one tool result;
	// longer output keeps its beginning and end, with a note; default 16 KiB.
	MaxToolResult int
}

// Defaults of Window.
const (
	DefaultMaxHistory    = 256 << 10
	DefaultMaxToolResult = 16 << 10
)

// Built reports what BuildRequest had to change to fit.
type Built struct {
	// Dropped is how many of the oldest messages were left out.
	Dropped int
	// Truncated is how many tool results were cut to MaxToolResult.
	Truncated int
	// Repaired is how many results were made up for calls that had none
	// (a crash between storing a turn and its results) or dropped for
	// calls that were not there.
	Repaired int
	// Bytes is the rendered size of the history sent.
	Bytes int
}

// BuildRequest renders a stored history into a provider request: external
// content framed, tool names mapped to wire names, every call answered by
// exactly one result, long tool output truncated with a note, and the oldest
// messages left out (with a note) until the rest fits w.MaxBytes. It
// never drops the newest user message or the newest model turn with its
// results. The history is not modified.
func BuildRequest(system string, history []Message, tb *Toolbox, w Window) (*Request, Built) {
	if w.MaxBytes <= 0 {
		w.MaxBytes = DefaultMaxHistory
	}
	if w.MaxToolResult <= 0 {
		w.MaxToolResult = DefaultMaxToolResult
	}
	var built Built
	msgs := repair(history, &built)

	// Render into units: a user message alone, or a model turn with its
	// results. Units are what trimming removes, so a call never loses its
	// result and a request never starts with a result.
	type unit struct {
		user bool
		msgs []RequestMessage
		size int
	}
	var units []unit
	for _, m := range msgs {
		var rm RequestMessage
		switch m.Role {
		case RoleAssistant:
			if m.Text == "" && len(m.Calls) == 0 {
				continue // an empty turn says nothing and some APIs refuse it
			}
			rm = RequestMessage{Role: RoleAssistant, Text: m.Text}
			for _, c := range m.Calls {
				rm.ToolCalls = append(rm.ToolCalls, ToolCall{ID: c.ID, Name: tb.Wire(c.Tool), Arguments: replayArguments(c.Arguments)})
			}
			units = append(units, unit{})
		case RoleTool:
			parts, cut := truncateParts(m.Parts, w.MaxToolResult)
			if cut {
				built.Truncated++
			}
			rm = RequestMessage{Role: RoleTool, Text: nonEmpty(renderParts(parts)), ToolCallID: m.CallID, IsError: m.IsError}
			if len(units) == 0 || units[len(units)-1].user {
				continue // cannot happen after repair; never send an orphan
			}
		default:
			rm = RequestMessage{Role: RoleUser, Text: nonEmpty(renderParts(m.Parts)), Images: imagesOf(m.Parts)}
			units = append(units, unit{user: true})
		}
		u := &units[len(units)-1]
		u.msgs = append(u.msgs, rm)
		u.size += messageSize(rm)
	}

	last := -1 // the newest user unit
	for i := len(units) - 1; i >= 0; i-- {
		if units[i].user {
			last = i
			break
		}
	}
	if last < 0 {
		// A history with no user message (never stored by the loop): open
		// with a note so every provider gets the user turn it requires.
		units = append([]unit{{user: true, msgs: []RequestMessage{{Role: RoleUser, Text: "(The conversation so far:)"}}}}, units...)
		last = 0
	}
	sum := func(us []unit) (n int) {
		for _, u := range us {
			n += u.size
		}
		return n
	}
	var kept []unit
	if cur := sum(units[last:]); cur <= w.MaxBytes {
		from, left := last, w.MaxBytes-cur
		for i := last - 1; i >= 0 && units[i].size <= left; i-- {
			left -= units[i].size
			from = i
		}
		for from < last && !units[from].user {
			from++
		}
		kept = units[from:]
	} else {
		// The current exchange alone is too big: keep its user message
		// and the newest turns that fit, always the newest one.
		tail := units[last+1:]
		left := w.MaxBytes - units[last].size
		from := len(tail) - 1
		if from >= 0 {
			left -= tail[from].size
		}
		for from > 0 && tail[from-1].size <= left {
			left -= tail[from-1].size
			from--
		}
		kept = append([]unit{units[last]}, tail[max(from, 0):]...)
	}
	total := 0
	for _, u := range units {
		total += len(u.msgs)
	}
	req := &Request{System: system, Tools: tb.Defs()}
	for _, u := range kept {
		req.Messages = append(req.Messages, u.msgs...)
	}
	built.Dropped = total - len(req.Messages)
	if built.Dropped > 0 {
		first := &req.Messages[0]
		first.Text = fmt.Sprintf("(opsgate: the %d oldest messages of this conversation were left out to fit the model's context.)\n%s", built.Dropped, first.Text)
	}
	for _, rm := range req.Messages {
		built.Bytes += messageSize(rm)
	}
	return req, built
}

// repair returns the history with every call answered exactly once, right
// after the turn that made it: a missing result (a crash between storing
// the turn and its results) is made up as "outcome unknown", a result for
// no pending call is dropped.
func repair(history []Message, built *Built) []Message {
	out := make([]Message, 0, len(history))
	var pending []Call
	answered := map[string]bool{}
	flush := func() {
		for _, c := range pending {
			if !answered[c.ID] {
				built.Repaired++
				out = append(out, Message{Role: RoleTool, CallID: c.ID, Tool: c.Tool, IsError: true,
					Parts: []Part{Note("No result was recorded for this call: opsgate may have stopped while it ran, so its outcome is unknown.")}})
			}
		}
		pending, answered = nil, map[string]bool{}
	}
	for _, m := range history {
		switch m.Role {
		case RoleTool:
			ok := false
			for _, c := range pending {
				if c.ID == m.CallID && !answered[c.ID] {
					ok = true
					break
				}
			}
			if !ok {
				built.Repaired++
				continue
			}
			answered[m.CallID] = true
			out = append(out, m)
		case RoleAssistant:
			flush()
			out = append(out, m)
			pending = m.Calls
		default:
			flush()
			out = append(out, m)
		}
	}
	flush()
	return out
}

func messageSize(rm RequestMessage) int {
	n := len(rm.Text) + len(rm.ToolCallID) + 16 + len(rm.Images)*imageCost
	for _, c := range rm.ToolCalls {
		n += len(c.ID) + len(c.Name) + len(c.Arguments) + 16
	}
	return n
}

func nonEmpty(s string) string {
	if s == "" {
		return "(empty)"
	}
	return s
}

// truncateParts cuts every external part longer than limit to its
// beginning and end, with a note after it saying so.
func truncateParts(parts []Part, limit int) ([]Part, bool) {
	cut := false
	var out []Part
	for i, p := range parts {
		if p.Note || len(p.Text) <= limit {
			if out != nil {
				out = append(out, p)
			}
			continue
		}
		if out == nil {
			out = append([]Part(nil), parts[:i]...)
		}
		cut = true
		short := p
		short.Text = cutMiddle(p.Text, limit)
		out = append(out, short, Note(fmt.Sprintf("(opsgate: this output was cut to %s of %s; its beginning and end are shown.)", size(len(short.Text)), size(len(p.Text)))))
	}
	if out == nil {
		return parts, false
	}
	return out, cut
}

const cutMarker = "\n[…]\n"

// cutMiddle keeps about two thirds of limit from the start of s and the
// rest from its end (errors are often at the end), on rune boundaries.
func cutMiddle(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	room := max(limit-len(cutMarker), 2)
	head := room * 2 / 3
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	tail := len(s) - (room - head)
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + cutMarker + s[tail:]
}

func size(n int) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 10<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
