package upstream

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/agent"
)

// An upstream server's form elicitation (elicitation/create, or an input
// request of a 2026-07-28 result) becomes an ask_user question to the
// run's people (agent.PeopleAsker): one question per property of the
// requested schema — a string, number or integer is a text question, an
// enum (or oneOf of consts) a choice, a boolean yes or no, an array of an
// enum a comma-separated text — optional unless required. The answer is
// read back as the property's type and validated against the schema the
// server sent; an answer the schema refuses is asked again, saying why,
// a few times at most.

// maxElicitAttempts bounds the questions one elicitation asks.
const maxElicitAttempts = 3

// form is a requested schema as questions, and the way back.
type form struct {
	schema *approvals.Schema
	ask    agent.Ask
	// props maps question ids to property names; kinds to their types.
	props map[string]string
	types map[string]string
	// consts maps a choice's title to the const it stands for (oneOf).
	consts map[string]map[string]any
}

var propertyIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// newForm reads a requested schema: a flat object of primitive
// properties, as the MCP specification allows; anything else is an error
// naming what is not supported.
func newForm(server string, raw any) (*form, error) {
	var doc map[string]any
	if b, err := json.Marshal(raw); err != nil || json.Unmarshal(b, &doc) != nil || doc == nil {
		return nil, errors.New("the requested schema is not an object schema")
	}
	if t, _ := doc["type"].(string); t != "object" {
		return nil, errors.New("the requested schema is not of type object")
	}
	props, _ := doc["properties"].(map[string]any)
	if len(props) == 0 {
		return nil, errors.New("the requested schema has no properties to ask for")
	}
	if len(props) > agent.MaxQuestions {
		return nil, fmt.Errorf("the requested schema has %d properties; opsgate asks at most %d", len(props), agent.MaxQuestions)
	}
	schema, err := approvals.CompileSchema("elicitation-"+server, doc)
	if err != nil {
		return nil, fmt.Errorf("the requested schema does not compile: %w", err)
	}
	required := map[string]bool{}
	if rs, ok := doc["required"].([]any); ok {
		for _, r := range rs {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	f := &form{schema: schema, props: map[string]string{}, types: map[string]string{}, consts: map[string]map[string]any{}}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	// Required first, then by name: the order a person answers in.
	slices.SortFunc(names, func(a, b string) int {
		if required[a] != required[b] {
			if required[a] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	for i, name := range names {
		p, _ := props[name].(map[string]any)
		if p == nil {
			return nil, fmt.Errorf("property %q is not a schema", name)
		}
		id := name
		if !propertyIDRE.MatchString(id) {
			id = fmt.Sprintf("field%d", i+1)
		}
		q, typ, consts, err := question(id, name, p)
		if err != nil {
			return nil, err
		}
		q.Optional = !required[name]
		f.ask.Questions = append(f.ask.Questions, q)
		f.props[id], f.types[id] = name, typ
		if consts != nil {
			f.consts[id] = consts
		}
	}
	// The questions pass ask_user's own checks (choices, lengths), as
	// people will answer them.
	ask, err := agent.ParseAsk(string(mustJSON(f.ask)))
	if err != nil {
		return nil, fmt.Errorf("the form cannot be asked: %w", err)
	}
	f.ask = ask
	return f, nil
}

// question is property name (schema p) as a question with id.
func question(id, name string, p map[string]any) (agent.Question, string, map[string]any, error) {
	text := clipText(strings.ToValidUTF8(cmp.Or(str(p["title"]), strings.TrimSpace(name), id), "?"), agent.MaxQuestionText/2)
	if d := strings.ToValidUTF8(str(p["description"]), "?"); d != "" && d != text {
		text += " — " + d
	}
	typ := str(p["type"])
	q := agent.Question{ID: id, Kind: agent.QuestionText}
	var consts map[string]any
	switch typ {
	case "boolean":
		q.Kind = agent.QuestionConfirm
	case "string":
		choices, titles := enumChoices(p)
		if titles != nil {
			consts = titles
		}
		if len(choices) >= 2 && len(choices) <= agent.MaxChoices {
			q.Kind, q.Choices = agent.QuestionChoice, choices
		} else if len(choices) > 0 {
			text += " (one of: " + strings.Join(choices, ", ") + ")"
		}
	case "number":
		text += " (a number)"
	case "integer":
		text += " (a whole number)"
	case "array":
		items, _ := p["items"].(map[string]any)
		choices, _ := enumChoices(items)
		if len(choices) == 0 {
			return q, "", nil, fmt.Errorf("property %q: an array is asked only as a choice of an enum", name)
		}
		text += " (any of: " + strings.Join(choices, ", ") + "; separate them with commas)"
	default:
		return q, "", nil, fmt.Errorf("property %q: type %q is not one a form may ask (string, number, integer, boolean, or an array of an enum)", name, typ)
	}
	q.Text = clipText(text, agent.MaxQuestionText)
	return q, typ, consts, nil
}

// enumChoices are the values a string property allows: its enum, or the
// titles of its oneOf/anyOf consts (with the const each stands for).
func enumChoices(p map[string]any) ([]string, map[string]any) {
	if p == nil {
		return nil, nil
	}
	if e, ok := p["enum"].([]any); ok {
		var out []string
		for _, v := range e {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
		return out, nil
	}
	for _, key := range []string{"oneOf", "anyOf"} {
		alts, ok := p[key].([]any)
		if !ok {
			continue
		}
		var out []string
		titles := map[string]any{}
		for _, a := range alts {
			m, _ := a.(map[string]any)
			c, ok := m["const"]
			if !ok {
				continue
			}
			t := cmp.Or(str(m["title"]), fmt.Sprint(c))
			out = append(out, t)
			titles[t] = c
		}
		return out, titles
	}
	return nil, nil
}

// content turns a reply into the form's content, validated against the
// requested schema (defaults filled in); the error says what to fix.
func (f *form) content(r agent.Reply) (map[string]any, error) {
	out := map[string]any{}
	if r.Confirmation != nil && len(f.ask.Questions) == 1 {
		out[f.props[f.ask.Questions[0].ID]] = r.Confirmation.IsConfirmed
	}
	for _, a := range r.Answers {
		if a.IsSkipped {
			continue
		}
		name := f.props[a.QuestionID]
		switch f.types[a.QuestionID] {
		case "boolean":
			out[name] = a.Answer == "yes"
		case "array":
			var vs []any
			for part := range strings.SplitSeq(a.Answer, ",") {
				if part = strings.TrimSpace(part); part != "" {
					vs = append(vs, part)
				}
			}
			out[name] = vs
		default:
			if c, ok := f.consts[a.QuestionID][a.Answer]; ok {
				out[name] = c
				continue
			}
			out[name] = a.Answer
		}
	}
	c, err := f.schema.Apply(out)
	if err != nil {
		return nil, err
	}
	// Numbers go as JSON numbers, not the validator's json.Number.
	for k, v := range c {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				c[k] = i
			} else if x, err := n.Float64(); err == nil {
				c[k] = x
			}
		}
	}
	return c, nil
}

// elicitResult is what the server gets back: accept with the content,
// decline when people answered nothing in time, cancel when the run ended.
func elicitResult(ans agent.PeopleAnswer, content map[string]any) *mcp.ElicitResult {
	switch {
	case ans.Answered:
		return &mcp.ElicitResult{Action: "accept", Content: content}
	case ans.Cancelled:
		return &mcp.ElicitResult{Action: "cancel"}
	}
	return &mcp.ElicitResult{Action: "decline"}
}

func str(v any) string {
	s, _ := v.(string)
	return strings.TrimSpace(s)
}
