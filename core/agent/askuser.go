package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// The ask_user built-in: the model asks the person questions, the run waits
// (status waiting_input), a native question card goes to the thread, and
// the answer comes back to the model in the shape docs/agents.md
// ("ask_user") gives.

// Limits of one ask_user call and its answers.
const (
	MaxQuestions    = 10
	MaxQuestionText = 1000 // runes
	MaxChoices      = 20
	MaxChoiceText   = 200  // runes
	MaxAnswerText   = 4000 // runes
)

// QuestionKind is the kind of one question.
type QuestionKind string

// The question kinds.
const (
	QuestionText    QuestionKind = "text"    // a free answer (a modal, force_reply, a reply mail)
	QuestionChoice  QuestionKind = "choice"  // one of Choices (buttons)
	QuestionConfirm QuestionKind = "confirm" // yes or no (buttons)
)

// Question is one question of an ask_user call.
type Question struct {
	ID      string       `json:"id"`
	Kind    QuestionKind `json:"kind"`
	Text    string       `json:"text"`
	Choices []string     `json:"choices,omitempty"`
	// Optional questions may be skipped.
	Optional bool `json:"optional,omitempty"`
}

// Ask is the validated input of one ask_user call.
type Ask struct {
	Questions []Question `json:"questions"`
}

const askUserDescription = "Ask the person you are working for one or more questions, and wait for the answers. Use it when you need a decision or a value you cannot find with your tools. Kinds: text (a free answer), choice (one of the choices you give), confirm (yes or no). Mark a question optional when the person may skip it."

var questionIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// AskUserSchema is the JSON Schema of ask_user's arguments.
func AskUserSchema() map[string]any {
	return map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"questions"},
		"properties": map[string]any{
			"questions": map[string]any{
				"type": "array", "minItems": 1, "maxItems": MaxQuestions,
				"items": map[string]any{
					"type":                 "object",
					"additionalProperties": false,
					"required":             []any{"id", "kind", "text"},
					"properties": map[string]any{
						"id":       map[string]any{"type": "string", "pattern": questionIDRE.String(), "description": "A short id, unique in this call, e.g. \"env\"."},
						"kind":     map[string]any{"type": "string", "enum": []any{"text", "choice", "confirm"}},
						"text":     map[string]any{"type": "string", "maxLength": MaxQuestionText, "description": "The question, as the person reads it."},
						"choices":  map[string]any{"type": "array", "minItems": 2, "maxItems": MaxChoices, "items": map[string]any{"type": "string", "maxLength": MaxChoiceText}, "description": "For kind choice only: the answers to choose from."},
						"optional": map[string]any{"type": "boolean", "description": "true when the person may skip the question."},
					},
				},
			},
		},
	}
}

// ErrMalformedAnswer is an answer that is not JSON of either shape (HTTP
// 400); ErrInvalidAnswer is well-formed JSON that does not answer the
// questions (HTTP 422). Errors from ParseReply wrap one of them.
var (
	ErrMalformedAnswer = errors.New("malformed answer")
	ErrInvalidAnswer   = errors.New("invalid answer")
)

// ParseAsk validates the raw arguments of an ask_user call. Its error is
// for the model (Outcome{Kind: OutcomeInvalid, Problem: err.Error()}).
func ParseAsk(raw string) (Ask, error) {
	var a Ask
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Ask{}, fmt.Errorf("ask_user arguments: %v", err)
	}
	if dec.More() {
		return Ask{}, errors.New("ask_user arguments: more than one JSON value")
	}
	if len(a.Questions) == 0 {
		return Ask{}, errors.New("ask_user needs at least one question")
	}
	if len(a.Questions) > MaxQuestions {
		return Ask{}, fmt.Errorf("ask_user takes at most %d questions, not %d", MaxQuestions, len(a.Questions))
	}
	seen := map[string]bool{}
	for i := range a.Questions {
		q := &a.Questions[i]
		where := fmt.Sprintf("question %d", i+1)
		if !questionIDRE.MatchString(q.ID) {
			return Ask{}, fmt.Errorf("%s: id must be 1-64 letters, digits, '_' or '-'", where)
		}
		where = fmt.Sprintf("question %q", q.ID)
		if seen[q.ID] {
			return Ask{}, fmt.Errorf("%s: the id is used twice", where)
		}
		seen[q.ID] = true
		q.Text = strings.TrimSpace(q.Text)
		if q.Text == "" || !utf8.ValidString(q.Text) {
			return Ask{}, fmt.Errorf("%s: text must not be empty", where)
		}
		if utf8.RuneCountInString(q.Text) > MaxQuestionText {
			return Ask{}, fmt.Errorf("%s: text is longer than %d characters", where, MaxQuestionText)
		}
		switch q.Kind {
		case QuestionText, QuestionConfirm:
			if len(q.Choices) > 0 {
				return Ask{}, fmt.Errorf("%s: choices are only for kind choice", where)
			}
		case QuestionChoice:
			if len(q.Choices) < 2 || len(q.Choices) > MaxChoices {
				return Ask{}, fmt.Errorf("%s: kind choice needs 2 to %d choices", where, MaxChoices)
			}
			dup := map[string]bool{}
			for j, c := range q.Choices {
				c = strings.TrimSpace(c)
				if c == "" || !utf8.ValidString(c) || utf8.RuneCountInString(c) > MaxChoiceText {
					return Ask{}, fmt.Errorf("%s: choice %d must be 1-%d characters", where, j+1, MaxChoiceText)
				}
				if dup[strings.ToLower(c)] {
					return Ask{}, fmt.Errorf("%s: choice %q is listed twice", where, c)
				}
				dup[strings.ToLower(c)] = true
				q.Choices[j] = c
			}
		default:
			return Ask{}, fmt.Errorf("%s: kind must be text, choice or confirm, not %q", where, q.Kind)
		}
	}
	return a, nil
}

// Answer is the answer to one question, as docs/agents.md ("ask_user") names it. For a
// confirm question Answer is "yes" or "no".
type Answer struct {
	QuestionID string `json:"questionId"`
	IsSkipped  bool   `json:"isSkipped"`
	Answer     string `json:"answer"`
}

// Confirmation is the other answer shape, for an ask of exactly one
// confirm question.
type Confirmation struct {
	IsConfirmed bool   `json:"isConfirmed"`
	Feedback    string `json:"feedback,omitempty"`
}

// Reply is a validated answer: Answers (one per question, in question
// order) or, for a single confirm question answered in that shape,
// Confirmation.
type Reply struct {
	Answers      []Answer
	Confirmation *Confirmation
}

// IsSingleConfirm reports whether the ask is one confirm question, the
// case that also accepts a Confirmation.
func (a Ask) IsSingleConfirm() bool {
	return len(a.Questions) == 1 && a.Questions[0].Kind == QuestionConfirm
}

// ParseReply validates an answer to a: the question array
// [{"questionId","isSkipped","answer"}] (every question answered or, if
// optional, skipped; a choice one of its choices, matched without regard to
// case; a confirm "yes", "no", true or false), or {"isConfirmed","feedback"}
// for a single confirm question.
func (a Ask) ParseReply(raw []byte) (Reply, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) > 0 && raw[0] == '[':
		return a.parseAnswers(raw)
	case len(raw) > 0 && raw[0] == '{':
		return a.parseConfirmation(raw)
	}
	if !json.Valid(raw) {
		return Reply{}, fmt.Errorf("%w: not JSON; send [{\"questionId\",\"isSkipped\",\"answer\"}] or {\"isConfirmed\",\"feedback\"}", ErrMalformedAnswer)
	}
	return Reply{}, fmt.Errorf("%w: send the question array [{\"questionId\",\"isSkipped\",\"answer\"}] or {\"isConfirmed\",\"feedback\"}", ErrInvalidAnswer)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidAnswer, fmt.Sprintf(format, args...))
}

func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: %v", ErrMalformedAnswer, err)
		}
		return invalid("%v", err)
	}
	if dec.More() {
		return fmt.Errorf("%w: more than one JSON value", ErrMalformedAnswer)
	}
	return nil
}

func (a Ask) parseAnswers(raw []byte) (Reply, error) {
	var in []struct {
		QuestionID *string          `json:"questionId"`
		IsSkipped  bool             `json:"isSkipped"`
		Answer     *json.RawMessage `json:"answer"`
	}
	if err := strictDecode(raw, &in); err != nil {
		return Reply{}, err
	}
	byID := map[string]int{}
	for i, q := range a.Questions {
		byID[q.ID] = i
	}
	out := make([]Answer, len(a.Questions))
	got := make([]bool, len(a.Questions))
	for i, x := range in {
		if x.QuestionID == nil {
			return Reply{}, invalid("answer %d has no questionId", i+1)
		}
		qi, ok := byID[*x.QuestionID]
		if !ok {
			return Reply{}, invalid("no question has id %q", clipRunes(*x.QuestionID, 64))
		}
		if got[qi] {
			return Reply{}, invalid("question %q is answered twice", *x.QuestionID)
		}
		got[qi] = true
		q := a.Questions[qi]
		ans := Answer{QuestionID: q.ID, IsSkipped: x.IsSkipped}
		if x.IsSkipped {
			if !q.Optional {
				return Reply{}, invalid("question %q may not be skipped", q.ID)
			}
			if x.Answer != nil && string(*x.Answer) != "null" && string(*x.Answer) != `""` {
				return Reply{}, invalid("question %q is skipped but has an answer", q.ID)
			}
			out[qi] = ans
			continue
		}
		if x.Answer == nil {
			return Reply{}, invalid("question %q has no answer", q.ID)
		}
		v, err := answerValue(q, *x.Answer)
		if err != nil {
			return Reply{}, err
		}
		ans.Answer = v
		out[qi] = ans
	}
	for i, q := range a.Questions {
		if !got[i] {
			return Reply{}, invalid("question %q has no answer", q.ID)
		}
	}
	return Reply{Answers: out}, nil
}

func answerValue(q Question, raw json.RawMessage) (string, error) {
	if q.Kind == QuestionConfirm {
		var b bool
		if json.Unmarshal(raw, &b) == nil {
			return yesNo(b), nil
		}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalid("the answer to %q must be a string", q.ID)
	}
	s = strings.TrimSpace(s)
	if !utf8.ValidString(s) {
		return "", invalid("the answer to %q is not valid UTF-8", q.ID)
	}
	switch q.Kind {
	case QuestionConfirm:
		switch strings.ToLower(s) {
		case "yes", "true":
			return "yes", nil
		case "no", "false":
			return "no", nil
		}
		return "", invalid("the answer to %q must be yes or no", q.ID)
	case QuestionChoice:
		for _, c := range q.Choices {
			if strings.EqualFold(c, s) {
				return c, nil
			}
		}
		return "", invalid("the answer to %q must be one of: %s", q.ID, strings.Join(q.Choices, ", "))
	}
	if s == "" {
		return "", invalid("the answer to %q is empty", q.ID)
	}
	if utf8.RuneCountInString(s) > MaxAnswerText {
		return "", invalid("the answer to %q is longer than %d characters", q.ID, MaxAnswerText)
	}
	return s, nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func (a Ask) parseConfirmation(raw []byte) (Reply, error) {
	var in struct {
		IsConfirmed *bool   `json:"isConfirmed"`
		Feedback    *string `json:"feedback"`
	}
	if err := strictDecode(raw, &in); err != nil {
		return Reply{}, err
	}
	if !a.IsSingleConfirm() {
		return Reply{}, invalid("{\"isConfirmed\",\"feedback\"} answers a single confirm question; answer these with the question array")
	}
	if in.IsConfirmed == nil {
		return Reply{}, invalid("isConfirmed is missing")
	}
	c := &Confirmation{IsConfirmed: *in.IsConfirmed}
	if in.Feedback != nil {
		c.Feedback = strings.TrimSpace(*in.Feedback)
		if !utf8.ValidString(c.Feedback) || utf8.RuneCountInString(c.Feedback) > MaxAnswerText {
			return Reply{}, invalid("feedback must be valid text of at most %d characters", MaxAnswerText)
		}
	}
	return Reply{Confirmation: c}, nil
}

// JSON is the reply in docs/agents.md's shape, as the model receives it.
func (r Reply) JSON() []byte {
	var v any = r.Answers
	if r.Confirmation != nil {
		v = r.Confirmation
	}
	return marshalPlain(v)
}

// marshalPlain is json.Marshal without the HTML escaping of <, > and &:
// the text goes to a model inside a framed block, which escapes them.
func marshalPlain(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte("null")
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Result renders the reply for the model: who answered, then the answer in
// docs/agents.md's shape, framed (a person wrote it).
func (r Reply) Result(call Call, by string, at time.Time) Message {
	who := by
	if who == "" {
		who = "the person"
	}
	return Message{Role: RoleTool, CallID: call.ID, Tool: call.Tool, At: at, Parts: []Part{
		Note(fmt.Sprintf("Answered by %s:", who)),
		External("answer", by, string(r.JSON())),
	}}
}

// Unanswered renders a question that expired (approvals.ttl) unanswered.
func Unanswered(call Call, ttl time.Duration, at time.Time) Message {
	text := "Nobody answered in time; the question expired. Continue without the answer, or say what you need."
	if ttl > 0 {
		text = fmt.Sprintf("Nobody answered within %s; the question expired. Continue without the answer, or say what you need.", ttl)
	}
	return Message{Role: RoleTool, CallID: call.ID, Tool: call.Tool, At: at, IsError: true, Parts: []Part{Note(text)}}
}
