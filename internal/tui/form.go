package tui

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/textinput"
)

// field is one argument of the edit form: its input and what the tool's
// schema says it takes, so a wrong value is caught next to the field
// before the server's 422 would say the same.
type field struct {
	name     string
	input    textinput.Model
	typ      string // string, integer, number, boolean, object, array, or "" (any)
	required bool
	enum     []string
	pattern  *regexp.Regexp
	patSrc   string
	def      any
	desc     string
	err      string
}

// editForm edits an approval's arguments as a whole: every schema
// property and every proposed argument gets a field, pre-filled with the
// proposed value.
type editForm struct {
	approvalID string
	tool       string
	fields     []*field
	focus      int
	err        string // an error not tied to one field
	strict     bool   // additionalProperties: false
}

// newEditForm builds the form from the approval's input schema (nil when
// the server did not send one: every proposed argument becomes a free
// field) and its proposed arguments.
func newEditForm(id, tool string, schema map[string]any, proposed map[string]any) *editForm {
	f := &editForm{approvalID: id, tool: tool}
	props, _ := schema["properties"].(map[string]any)
	required := map[string]bool{}
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	if ap, ok := schema["additionalProperties"].(bool); ok && !ap {
		f.strict = true
	}
	names := map[string]bool{}
	for k := range props {
		names[k] = true
	}
	for k := range proposed {
		names[k] = true
	}
	sorted := make([]string, 0, len(names))
	for k := range names {
		sorted = append(sorted, k)
	}
	// Required first, then by name: what must be right comes first.
	sort.Slice(sorted, func(i, j int) bool {
		if required[sorted[i]] != required[sorted[j]] {
			return required[sorted[i]]
		}
		return sorted[i] < sorted[j]
	})
	for _, name := range sorted {
		fd := &field{name: name, required: required[name]}
		if p, ok := props[name].(map[string]any); ok {
			fd.typ, _ = p["type"].(string)
			fd.desc, _ = p["description"].(string)
			fd.def = p["default"]
			if en, ok := p["enum"].([]any); ok {
				for _, v := range en {
					fd.enum = append(fd.enum, valueText(v))
				}
			}
			if pat, ok := p["pattern"].(string); ok {
				fd.patSrc = pat
				// JSON Schema patterns are ECMA-262; the common ones are
				// also RE2. One that is not is left to the server.
				fd.pattern, _ = regexp.Compile(pat)
			}
		}
		in := textinput.New()
		in.Prompt = ""
		in.CharLimit = 4096
		if v, ok := proposed[name]; ok {
			in.SetValue(valueText(v))
		}
		if fd.def != nil {
			in.Placeholder = valueText(fd.def)
		}
		fd.input = in
		f.fields = append(f.fields, fd)
	}
	if len(f.fields) > 0 {
		f.fields[0].input.Focus()
	}
	return f
}

// valueText shows a JSON value in an input: strings as they are, the
// rest as compact JSON.
func valueText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// hint says what a field takes, for the line beside it.
func (fd *field) hint() string {
	var parts []string
	if fd.typ != "" {
		parts = append(parts, fd.typ)
	}
	if len(fd.enum) > 0 {
		parts = append(parts, "one of "+strings.Join(fd.enum, ", "))
	}
	if fd.patSrc != "" {
		parts = append(parts, "pattern "+fd.patSrc)
	}
	if fd.def != nil {
		parts = append(parts, "default "+valueText(fd.def))
	}
	if fd.desc != "" {
		parts = append(parts, fd.desc)
	}
	return strings.Join(parts, "; ")
}

// value reads the field as a JSON value of its type; omit is true for an
// empty optional field (the schema default then applies).
func (fd *field) value() (v any, omit bool, err error) {
	s := fd.input.Value()
	if strings.TrimSpace(s) == "" && fd.typ != "string" || s == "" {
		if fd.required {
			return nil, false, fmt.Errorf("required")
		}
		return nil, true, nil
	}
	switch fd.typ {
	case "string":
		v = s
	case "integer":
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, false, fmt.Errorf("want a whole number")
		}
		v = n
	case "number":
		n, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, false, fmt.Errorf("want a number")
		}
		v = n
	case "boolean":
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, false, fmt.Errorf("want true or false")
		}
		v = b
	case "object", "array":
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return nil, false, fmt.Errorf("want JSON (%s)", fd.typ)
		}
		if _, isObj := v.(map[string]any); (fd.typ == "object") != isObj {
			return nil, false, fmt.Errorf("want a JSON %s", fd.typ)
		}
	default:
		// No declared type: JSON when it reads as JSON, else the text.
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			v = s
		}
	}
	if len(fd.enum) > 0 {
		ok := false
		for _, e := range fd.enum {
			ok = ok || e == valueText(v)
		}
		if !ok {
			return nil, false, fmt.Errorf("want one of %s", strings.Join(fd.enum, ", "))
		}
	}
	if str, isStr := v.(string); isStr && fd.pattern != nil && !fd.pattern.MatchString(str) {
		return nil, false, fmt.Errorf("does not match pattern %s", fd.patSrc)
	}
	return v, false, nil
}

// args validates every field and returns the new arguments; on a problem
// each bad field has its err set and ok is false.
func (f *editForm) args() (map[string]any, bool) {
	out := map[string]any{}
	ok := true
	f.err = ""
	for _, fd := range f.fields {
		fd.err = ""
		v, omit, err := fd.value()
		if err != nil {
			fd.err, ok = err.Error(), false
			continue
		}
		if !omit {
			out[fd.name] = v
		}
	}
	return out, ok
}

// serverError places the API's 422 next to its field ("version", or a
// nested path whose first part is the field); anything else is the
// form's own error line.
func (f *editForm) serverError(fieldPath, msg string) {
	name, _, _ := strings.Cut(fieldPath, ".")
	name, _, _ = strings.Cut(name, "/")
	for i, fd := range f.fields {
		if fd.name == name && name != "" {
			fd.err = msg
			f.setFocus(i)
			return
		}
	}
	f.err = msg
}

func (f *editForm) setFocus(i int) {
	if len(f.fields) == 0 {
		return
	}
	i = (i + len(f.fields)) % len(f.fields)
	f.fields[f.focus].input.Blur()
	f.focus = i
	f.fields[i].input.Focus()
}
