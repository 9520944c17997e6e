package approvals

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is a tool's compiled input_schema. Template values come only from
// arguments that passed it, and edited arguments are checked against it
// before any policy re-check.
type Schema struct {
	compiled *jsonschema.Schema
	// doc is the schema as compiled, for JSON (agents read tools' schemas).
	doc      any
	defaults map[string]any
	// types are the declared JSON types of top-level properties, used to
	// read string input from chat surfaces ("replicas: 3") as numbers.
	types map[string]string
}

// ValidationError is arguments failing a tool's schema: the API answers 422
// with Message, chat surfaces show it next to Field.
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return "invalid arguments: " + e.Message
	}
	return fmt.Sprintf("invalid arguments: %s: %s", e.Field, e.Message)
}

// CompileSchema compiles a JSON Schema given as decoded YAML/JSON. A nil
// schema accepts any object.
func CompileSchema(name string, raw map[string]any) (*Schema, error) {
	if raw == nil {
		raw = map[string]any{"type": "object"}
	}
	doc, err := normalize(raw)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	url := "mem://tools/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	compiled, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	s := &Schema{compiled: compiled, doc: doc, defaults: map[string]any{}, types: map[string]string{}}
	if props, ok := doc.(map[string]any)["properties"].(map[string]any); ok {
		for k, p := range props {
			if pm, ok := p.(map[string]any); ok {
				if d, ok := pm["default"]; ok {
					s.defaults[k] = d
				}
				if t, ok := pm["type"].(string); ok {
					s.types[k] = t
				}
			}
		}
	}
	return s, nil
}

// JSON returns the schema as JSON ({"type":"object"} for a nil schema).
func (s *Schema) JSON() json.RawMessage {
	if s == nil || s.doc == nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	b, err := json.Marshal(s.doc)
	if err != nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	return b
}

// Apply fills top-level defaults into a copy of args and validates the
// result. The returned map is what templates may use.
func (s *Schema) Apply(args map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(args)+len(s.defaults))
	for k, v := range s.defaults {
		out[k] = v
	}
	for k, v := range args {
		out[k] = s.coerce(k, v)
	}
	doc, err := normalize(out)
	if err != nil {
		return nil, &ValidationError{Message: err.Error()}
	}
	if err := s.compiled.Validate(doc); err != nil {
		return nil, toValidationError(err)
	}
	return doc.(map[string]any), nil
}

// normalize round-trips a value through JSON so that numbers and nested
// maps have the types the validator expects (json.Number, map[string]any).
func normalize(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

func toValidationError(err error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ValidationError{Message: err.Error()}
	}
	// Report the most specific cause: the deepest leaf is what a person
	// can fix ("service: does not match pattern ...").
	leaf := ve
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	field := strings.Join(leaf.InstanceLocation, ".")
	msg := leaf.ErrorKind.LocalizedString(message.NewPrinter(language.English))
	if msg == "" {
		msg = ve.Error()
	}
	return &ValidationError{Field: field, Message: msg}
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// coerce reads a string as the property's declared non-string type, since
// modals, inline replies and mail carry every value as text. A string that
// does not parse is left as it is for the validator to report.
func (s *Schema) coerce(name string, v any) any {
	str, ok := v.(string)
	if !ok {
		return v
	}
	switch s.types[name] {
	case "integer", "number", "boolean", "object", "array":
		var parsed any
		if err := json.Unmarshal([]byte(strings.TrimSpace(str)), &parsed); err == nil {
			return parsed
		}
	}
	return v
}
