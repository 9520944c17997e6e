package agent

import (
	"encoding/json"
	"strings"
	"time"
)

// Role is who a stored message is from.
type Role string

// The roles of a conversation.
const (
	RoleUser      Role = "user"      // people and systems outside opsgate (always framed)
	RoleAssistant Role = "assistant" // the model
	RoleTool      Role = "tool"      // the result of one tool call, as opsgate renders it
)

// Message is one entry of a conversation as the store keeps it (JSON). The
// history is the truth: BuildRequest renders it into a provider request on
// every turn, so framing and trimming can change without migrating data.
type Message struct {
	Role Role `json:"role"`
	// Parts are the content of user and tool messages. A part is external
	// content unless it is a Note; see Part.
	Parts []Part `json:"parts,omitempty"`
	// Text is the assistant's text.
	Text string `json:"text,omitempty"`
	// Calls are the tool calls an assistant message made, resolved.
	Calls []Call `json:"calls,omitempty"`
	// CallID and Tool say which call a tool message answers.
	CallID string `json:"call_id,omitempty"`
	Tool   string `json:"tool,omitempty"`
	// IsError marks a tool result that reports a failure, a denial, a
	// rejection or a problem with the call.
	IsError bool `json:"is_error,omitempty"`
	// Usage, Stop and Model describe the model turn of an assistant message.
	Usage *Usage     `json:"usage,omitempty"`
	Stop  StopReason `json:"stop,omitempty"`
	Model string     `json:"model,omitempty"`
	At    time.Time  `json:"at,omitzero"`
}

// Part is one piece of a user or tool message. The zero value is the safe
// one: a part is external content (framed, with its Source and Actor) unless
// Note is set, which only opsgate's own fixed wording may do — never text
// from a chat, a mail, a tool or a person.
type Part struct {
	Text string `json:"text"`
	// Source labels where external content came from: the channel
	// ("slack", "email", "console"), "email.attachment", "tool:<name>",
	// "mcp:<server>.<tool>", "approval", "answer".
	Source string `json:"source,omitempty"`
	// Actor is who sent it ("slack:U1"), when a person did.
	Actor string `json:"actor,omitempty"`
	// Note marks opsgate's own words, shown to the model unframed.
	Note bool `json:"note,omitempty"`
	// File is a file that came with the message: stored as a reference
	// only (its content is fetched on demand, see FilePart); Source and
	// Actor say where it came from, like any external part.
	File *File `json:"file,omitempty"`
	// Content is File's content for this request, filled in memory by the
	// caller before BuildRequest (never stored); nil sends the file by
	// reference.
	Content *FileContent `json:"-"`
}

// External is a part holding outside content.
func External(source, actor, text string) Part {
	return Part{Text: text, Source: source, Actor: actor}
}

// Note is a part holding opsgate's own words. Never pass it outside text.
func Note(text string) Part { return Part{Text: text, Note: true} }

// UserMessage is a message from outside: a chat message, a mail (body and
// attachments as separate parts), a webhook.
func UserMessage(at time.Time, parts ...Part) Message {
	return Message{Role: RoleUser, Parts: parts, At: at}
}

// Call is one tool call of an assistant message, resolved by Toolbox: the
// real tool name, the arguments the gate sees (the reason stripped), and
// the model's reason. A call with a Problem never reaches the gate; its
// result tells the model what was wrong.
type Call struct {
	ID string `json:"id"`
	// Tool is the tool's real name ("deploy", "github.search"), or the
	// name the model used when it named no known tool.
	Tool string `json:"tool"`
	// Arguments is the raw JSON text the model produced, reason included.
	Arguments string `json:"arguments"`
	// Args are the parsed arguments without the reason; nil with a Problem.
	Args map[string]any `json:"args,omitempty"`
	// Reason is the model's one-line reason for the call ("" if none).
	Reason string `json:"reason,omitempty"`
	// Problem says why the call cannot run: unknown tool, arguments that
	// are not a JSON object. Empty for a call that goes to the gate.
	Problem string `json:"problem,omitempty"`
}

// renderParts joins the parts, framing every external one (a file's name
// and fetched text included).
func renderParts(parts []Part) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch {
		case p.Note:
			b.WriteString(p.Text)
		case p.File != nil:
			writeFrame(&b, p.Source, p.Actor, fileText(p))
			if n := fileNote(p); n != "" {
				b.WriteString("\n" + n)
			}
		default:
			writeFrame(&b, p.Source, p.Actor, p.Text)
		}
	}
	return b.String()
}

// replayArguments is what a stored call's arguments look like when the
// history is sent again: servers parse them (Ollama, vLLM) and refuse a
// request with malformed ones, so a call the model botched replays as {}
// (its tool result already told the model what was wrong).
func replayArguments(raw string) string {
	if isJSONObject(raw) {
		return raw
	}
	return "{}"
}

func isJSONObject(raw string) bool {
	raw = strings.TrimSpace(raw)
	if !strings.HasPrefix(raw, "{") || !json.Valid([]byte(raw)) {
		return false
	}
	return true
}

// imagesOf returns the fetched images of parts, in order.
func imagesOf(parts []Part) []Image {
	var out []Image
	for _, p := range parts {
		if p.File != nil && p.Content != nil && len(p.Content.Image) > 0 {
			out = append(out, Image{MimeType: p.Content.MimeType, Data: p.Content.Image})
		}
	}
	return out
}
