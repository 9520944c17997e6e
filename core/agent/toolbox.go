package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tool is one tool an agent may call, as the loop knows it: the real name
// (a configured tool, or "<server>.<tool>" of an upstream MCP server), what
// it does, and its argument schema.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the arguments; nil means any object.
	Schema map[string]any
}

// AskUserTool is the name of the built-in question tool; no configured
// tool may take it.
const AskUserTool = "ask_user"

// MaxArguments bounds the raw arguments of one call; larger ones are a
// Problem, not something to parse.
const MaxArguments = 256 << 10

// maxReason bounds the reason shown on a card.
const maxReason = 300

// Toolbox is the tool set of one agent as the model sees it. It owns the
// tool-call convention:
//
//   - Every tool's schema gets a required string property "reason": one line
//     saying why the model makes the call, shown on the approval card. When a
//     tool already has a "reason" argument of its own the property is
//     "_reason" (then "__reason", …), so no argument is ever shadowed.
//     Resolve strips it: the gate, the card's arguments and the tool see
//     only the tool's own arguments.
//   - Names the providers refuse (both allow only [A-Za-z0-9_-]{1,64}) are
//     mapped to wire names: "github.search" is "github__search", other
//     characters become '_', and a collision gets a numeric suffix. Resolve
//     maps back, so stored calls always carry the real name.
//   - ask_user is always present (see Ask).
type Toolbox struct {
	defs   []ToolDef
	byWire map[string]boxEntry
	wireOf map[string]string
}

type boxEntry struct {
	real      string
	reasonKey string // "" for ask_user, which takes no reason
}

// NewToolbox builds the toolbox for tools plus ask_user.
func NewToolbox(tools []Tool) (*Toolbox, error) {
	tb := &Toolbox{byWire: map[string]boxEntry{}, wireOf: map[string]string{}}
	used := map[string]bool{AskUserTool: true}
	for _, t := range tools {
		if t.Name == "" {
			return nil, errors.New("agent: a tool has no name")
		}
		if t.Name == AskUserTool {
			return nil, fmt.Errorf("agent: %q is the built-in question tool; rename the configured one", AskUserTool)
		}
		if _, dup := tb.wireOf[t.Name]; dup {
			return nil, fmt.Errorf("agent: tool %q listed twice", t.Name)
		}
		wire := uniqueWire(WireName(t.Name), used)
		used[wire] = true
		schema, key, err := withReason(t.Schema)
		if err != nil {
			return nil, fmt.Errorf("agent: tool %q: %w", t.Name, err)
		}
		tb.wireOf[t.Name] = wire
		tb.byWire[wire] = boxEntry{real: t.Name, reasonKey: key}
		tb.defs = append(tb.defs, ToolDef{Name: wire, Description: t.Description, Schema: schema})
	}
	tb.wireOf[AskUserTool] = AskUserTool
	tb.byWire[AskUserTool] = boxEntry{real: AskUserTool}
	tb.defs = append(tb.defs, ToolDef{Name: AskUserTool, Description: askUserDescription, Schema: AskUserSchema()})
	return tb, nil
}

// Defs are the tool definitions to send with every request.
func (tb *Toolbox) Defs() []ToolDef { return tb.defs }

// Names are the real names of the tools, ask_user last.
func (tb *Toolbox) Names() []string {
	out := make([]string, 0, len(tb.defs))
	for _, d := range tb.defs {
		out = append(out, tb.byWire[d.Name].real)
	}
	return out
}

// Wire returns the wire name of a real tool name; a name the toolbox does
// not hold (a tool removed from the config since the call was stored) gets
// the same sanitizing, so old history still renders.
func (tb *Toolbox) Wire(real string) string {
	if w, ok := tb.wireOf[real]; ok {
		return w
	}
	return WireName(real)
}

// ReasonKey is the argument name that carries the reason for a tool ("" for
// ask_user or a tool the toolbox does not hold).
func (tb *Toolbox) ReasonKey(real string) string {
	return tb.byWire[tb.Wire(real)].reasonKey
}

var wireRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// WireName maps a tool name to one every provider accepts: '.' becomes
// "__", any other character outside [A-Za-z0-9_-] becomes '_', and the
// result is cut to 64 bytes.
func WireName(name string) string {
	if wireRE.MatchString(name) {
		return name
	}
	var b strings.Builder
	for _, r := range name {
		switch {
		case r == '.':
			b.WriteString("__")
		case r < utf8.RuneSelf && (r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" {
		s = "tool"
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

func uniqueWire(w string, used map[string]bool) string {
	if !used[w] {
		return w
	}
	for i := 2; ; i++ {
		suf := "_" + strconv.Itoa(i)
		base := w
		if len(base)+len(suf) > 64 {
			base = base[:64-len(suf)]
		}
		if c := base + suf; !used[c] {
			return c
		}
	}
}

const reasonDescription = "One short line: why you are making this call. The person who approves it reads this."

// withReason returns a copy of schema with the required reason property
// added, and the property's name.
func withReason(schema map[string]any) (map[string]any, string, error) {
	out, err := deepCopy(schema)
	if err != nil {
		return nil, "", err
	}
	if out == nil {
		out = map[string]any{}
	}
	if t, ok := out["type"]; !ok {
		out["type"] = "object"
	} else if t != "object" {
		return nil, "", fmt.Errorf("input schema must be of type object, not %v", t)
	}
	props, _ := out["properties"].(map[string]any)
	if props == nil {
		if _, exists := out["properties"]; exists {
			return nil, "", errors.New("input schema properties must be an object")
		}
		props = map[string]any{}
		out["properties"] = props
	}
	key := "reason"
	for {
		if _, taken := props[key]; !taken {
			break
		}
		key = "_" + key
	}
	props[key] = map[string]any{"type": "string", "description": reasonDescription}
	var req []any
	switch r := out["required"].(type) {
	case nil:
	case []any:
		req = r
	case []string:
		for _, s := range r {
			req = append(req, s)
		}
	default:
		return nil, "", errors.New("input schema required must be a list")
	}
	out["required"] = append(req, key)
	return out, key, nil
}

// deepCopy copies a JSON-shaped value through encoding/json, which also
// normalizes YAML-decoded numbers and rejects values JSON cannot carry.
func deepCopy(m map[string]any) (map[string]any, error) {
	if m == nil {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("input schema is not JSON: %w", err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Resolve turns a call the model made into a Call: the real tool name, the
// parsed arguments with the reason stripped, and the reason. It never fails:
// whatever is wrong (an unknown tool, arguments that are not a JSON object,
// arguments too large) is the Call's Problem, which becomes an error result
// for the model (Outcome{Kind: OutcomeInvalid}).
func (tb *Toolbox) Resolve(tc ToolCall) Call {
	c := Call{ID: tc.ID, Tool: tc.Name, Arguments: tc.Arguments}
	e, ok := tb.byWire[tc.Name]
	if !ok {
		c.Problem = fmt.Sprintf("there is no tool named %q; the tools are: %s", clipRunes(tc.Name, 64), strings.Join(tb.wireNames(), ", "))
		return c
	}
	c.Tool = e.real
	args, problem := ParseArguments(tc.Arguments)
	if problem != "" {
		c.Problem = problem
		return c
	}
	if e.reasonKey != "" {
		if r, ok := args[e.reasonKey].(string); ok {
			c.Reason = oneLine(r)
		}
		delete(args, e.reasonKey)
	}
	c.Args = args
	return c
}

func (tb *Toolbox) wireNames() []string {
	out := make([]string, 0, len(tb.defs))
	for _, d := range tb.defs {
		out = append(out, d.Name)
	}
	sort.Strings(out)
	return out
}

// ParseArguments parses a model's raw tool-call arguments. Empty text is
// {} (some servers send "" for a call without arguments); anything that is
// not one JSON object is a problem, described for the model to correct.
func ParseArguments(raw string) (map[string]any, string) {
	if len(raw) > MaxArguments {
		return nil, fmt.Sprintf("the arguments are %d bytes; the limit is %d", len(raw), MaxArguments)
	}
	trimmed := strings.TrimSpace(raw)
	if trimmed == "" {
		return map[string]any{}, ""
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, "the arguments are not valid JSON (" + jsonProblem(err) + "); call the tool again with one JSON object"
	}
	if dec.More() || trailing(dec) {
		return nil, "the arguments hold more than one JSON value; call the tool again with one JSON object"
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Sprintf("the arguments must be a JSON object, not %s; call the tool again with one JSON object", jsonKind(v))
	}
	return m, ""
}

func trailing(dec *json.Decoder) bool {
	var rest bytes.Buffer
	_, _ = rest.ReadFrom(dec.Buffered())
	return strings.TrimSpace(rest.String()) != ""
}

func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s at byte %d", se.Error(), se.Offset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "it ends early"
	}
	return err.Error()
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "another value"
}

// oneLine keeps the first non-empty line of s, trimmed and bounded.
func oneLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return clipRunes(strings.ToValidUTF8(line, "\uFFFD"), maxReason)
		}
	}
	return ""
}

func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
