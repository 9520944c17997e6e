package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// portabilityProblems walks a schema with the MCP Inspector's --strict
// rules (clients/cli schemaLint): a bare boolean where a schema is
// expected, a type array, a remote $ref, a node that constrains nothing.
// The npm test runs the Inspector itself; this one needs no node.
func portabilityProblems(path string, node any, keyword string) []string {
	boolOK := map[string]bool{"additionalProperties": true, "unevaluatedProperties": true, "additionalItems": true, "unevaluatedItems": true}
	switch n := node.(type) {
	case bool:
		if boolOK[keyword] {
			return nil
		}
		return []string{path + ": bare boolean schema"}
	case map[string]any:
		var out []string
		if _, ok := n["type"].([]any); ok {
			out = append(out, path+": type is an array")
		}
		if ref, ok := n["$ref"].(string); ok && !strings.HasPrefix(ref, "#") {
			out = append(out, path+": remote $ref")
		}
		constrains := false
		for _, k := range []string{"type", "enum", "const", "anyOf", "oneOf", "allOf", "not", "$ref", "properties", "items", "required",
			"minimum", "maximum", "minLength", "maxLength", "pattern", "format", "additionalProperties"} {
			if _, ok := n[k]; ok {
				constrains = true
			}
		}
		if !constrains && keyword != "not" {
			out = append(out, path+": constrains nothing")
		}
		for _, k := range []string{"items", "not", "additionalProperties", "contains", "propertyNames", "if", "then", "else"} {
			if v, ok := n[k]; ok {
				out = append(out, portabilityProblems(path+"."+k, v, k)...)
			}
		}
		for _, k := range []string{"anyOf", "oneOf", "allOf", "prefixItems"} {
			if vs, ok := n[k].([]any); ok {
				for i, v := range vs {
					out = append(out, portabilityProblems(fmt.Sprintf("%s.%s[%d]", path, k, i), v, k)...)
				}
			}
		}
		for _, k := range []string{"properties", "patternProperties", "$defs", "definitions"} {
			if m, ok := n[k].(map[string]any); ok {
				for name, v := range m {
					out = append(out, portabilityProblems(path+"."+k+"."+name, v, k)...)
				}
			}
		}
		return out
	}
	return []string{path + ": not a schema"}
}

func TestSchemasArePortable(t *testing.T) {
	t.Parallel()
	for _, path := range []string{PathExternal, PathInternal} {
		tok := adminToken
		if path == PathInternal {
			tok = studioToken
		}
		c := connect(t, tok, clientOpts{path: path})
		for _, tl := range c.tools() {
			for kind, s := range map[string]any{"inputSchema": tl.InputSchema, "outputSchema": tl.OutputSchema} {
				b, _ := json.Marshal(s)
				var doc any
				_ = json.Unmarshal(b, &doc)
				for _, p := range portabilityProblems(kind, doc, "") {
					t.Errorf("%s %s: %s", path, tl.Name, p)
				}
			}
			if tl.OutputSchema == nil || tl.Description == "" || tl.Annotations == nil {
				t.Errorf("%s: needs an output schema, a description and annotations", tl.Name)
			}
		}
	}
	// The walker itself finds what it looks for.
	bad := map[string]any{"type": "object", "properties": map[string]any{"a": true, "b": map[string]any{"type": []any{"string", "null"}},
		"c": map[string]any{"description": "x"}}}
	if got := portabilityProblems("s", bad, ""); len(got) != 3 {
		t.Fatalf("walker found %v", got)
	}
}
