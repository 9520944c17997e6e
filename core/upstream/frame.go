package upstream

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	llm "github.com/opsgate/opsgate/core/agent"
)

// A server's tool descriptions and the texts of its input schemas are
// outside content: the server wrote them, not the operator. They reach a
// model (an agent's tool list, an agent task's tools) only framed as
// <external_content source="mcp:<server>"> blocks, escaped so nothing in
// them can close the block, and cut to a bound. The operator replaces a
// tool's description with overrides.<tool>.description, which is used as
// written. docs/mcp-servers.md says what reaches the model.

// Bounds of a server's texts, before framing and escaping.
const (
	// MaxToolDescription cuts a tool's description (title and text).
	MaxToolDescription = 2 << 10
	// MaxSchemaText cuts each description and title inside a schema.
	MaxSchemaText = 512
	// maxSchemaValue bounds a schema's own strings that are not prose:
	// property names, enum and default values, patterns. They are what
	// arguments are checked against, so they cannot be framed or cut; a
	// longer one makes the tool unusable.
	maxSchemaValue = 256
	// maxSchemaBytes bounds a whole schema as a model receives it.
	maxSchemaBytes = 64 << 10
)

// source names a server's texts in their frame.
func (c *client) source() string { return "mcp:" + c.srv.Name }

// modelDescription is the description a model reads for t: the operator's
// override as written, else the server's text framed.
func (c *client) modelDescription(remote, serverText string) string {
	if o, ok := c.srv.Overrides[remote]; ok && o.Description != "" {
		return o.Description
	}
	if serverText == "" {
		return ""
	}
	return llm.Frame(c.source(), "", clipText(serverText, MaxToolDescription))
}

// clipText cuts s to at most n bytes on a rune boundary, marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Schema keywords by what their value holds.
var (
	// textKeywords hold prose for readers: framed.
	textKeywords = map[string]bool{"description": true, "title": true}
	// dropKeywords hold prose no model needs: removed.
	dropKeywords = map[string]bool{"$comment": true, "examples": true}
	// valueKeywords hold argument values: kept, length-checked.
	valueKeywords = map[string]bool{"default": true, "const": true, "enum": true}
	// schemaMapKeywords map names to subschemas.
	schemaMapKeywords = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true,
		"dependentSchemas": true}
	// schemaKeywords hold one subschema or a list of them.
	schemaKeywords = map[string]bool{"items": true, "prefixItems": true, "allOf": true, "anyOf": true, "oneOf": true, "not": true,
		"if": true, "then": true, "else": true, "additionalProperties": true, "contains": true, "propertyNames": true,
		"unevaluatedItems": true, "unevaluatedProperties": true, "additionalItems": true, "contentSchema": true}
)

// frameSchema returns a copy of a server's input schema as a model may
// read it: descriptions and titles framed and cut, comments and examples
// removed, everything else as sent. A value too long to be a name, a
// pattern or an argument value, or a schema too large, is refused.
func (c *client) frameSchema(raw map[string]any) (map[string]any, error) {
	out, err := c.frameNode(raw)
	if err != nil {
		return nil, err
	}
	doc, _ := out.(map[string]any)
	if b, _ := json.Marshal(doc); len(b) > maxSchemaBytes {
		return nil, fmt.Errorf("is %d bytes framed; the limit is %d", len(b), maxSchemaBytes)
	}
	return doc, nil
}

// frameNode frames one schema (an object, or a boolean schema).
func (c *client) frameNode(v any) (any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return checkValue(v)
	}
	out := make(map[string]any, len(m))
	for k, val := range m {
		var err error
		switch s, isText := val.(string); {
		case textKeywords[k] && isText:
			out[k] = llm.Frame(c.source(), "", clipText(s, MaxSchemaText))
		case dropKeywords[k]:
		case valueKeywords[k]:
			out[k], err = checkValue(val)
		case schemaMapKeywords[k]:
			sub, isMap := val.(map[string]any)
			if !isMap {
				out[k], err = checkValue(val)
				break
			}
			framed := make(map[string]any, len(sub))
			for name, s := range sub {
				if len(name) > maxSchemaValue {
					return nil, fmt.Errorf("%s: a name of %d bytes (the limit is %d)", k, len(name), maxSchemaValue)
				}
				if framed[name], err = c.frameNode(s); err != nil {
					return nil, err
				}
			}
			out[k] = framed
		case schemaKeywords[k]:
			if list, isList := val.([]any); isList {
				framed := make([]any, len(list))
				for i, s := range list {
					if framed[i], err = c.frameNode(s); err != nil {
						return nil, err
					}
				}
				out[k] = framed
				break
			}
			out[k], err = c.frameNode(val)
		default:
			out[k], err = checkValue(val)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
	}
	return out, nil
}

// checkValue copies a value the schema checks or fills arguments with,
// refusing any string in it longer than maxSchemaValue.
func checkValue(v any) (any, error) {
	switch x := v.(type) {
	case string:
		if len(x) > maxSchemaValue {
			return nil, fmt.Errorf("a value of %d bytes (the limit is %d)", len(x), maxSchemaValue)
		}
		return x, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			var err error
			if out[i], err = checkValue(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if len(k) > maxSchemaValue {
				return nil, fmt.Errorf("a key of %d bytes (the limit is %d)", len(k), maxSchemaValue)
			}
			var err error
			if out[k], err = checkValue(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v, nil
}
