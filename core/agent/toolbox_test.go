package agent_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core/agent"
)

func deploySchema() map[string]any {
	return map[string]any{
		"type": "object", "required": []any{"service"}, "additionalProperties": false,
		"properties": map[string]any{"service": map[string]any{"type": "string"}},
	}
}

func TestToolboxAddsReason(t *testing.T) {
	t.Parallel()
	schema := deploySchema()
	before, _ := json.Marshal(schema)
	tb, err := agent.NewToolbox([]agent.Tool{
		{Name: "deploy", Description: "Deploy", Schema: schema},
		{Name: "silence", Schema: map[string]any{"type": "object", "required": []string{"reason"},
			"properties": map[string]any{"reason": map[string]any{"type": "string"}, "_reason": map[string]any{"type": "string"}}}},
		{Name: "status"}, // no schema: any object
	})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := json.Marshal(schema)
	if string(before) != string(after) {
		t.Errorf("the configured schema was modified: %s", after)
	}
	defs := tb.Defs()
	if len(defs) != 4 || defs[3].Name != agent.AskUserTool {
		t.Fatalf("defs = %+v", defs)
	}
	want := map[string]string{"deploy": "reason", "silence": "__reason", "status": "reason"}
	for _, d := range defs[:3] {
		key := want[d.Name]
		props := d.Schema["properties"].(map[string]any)
		req := d.Schema["required"].([]any)
		if props[key] == nil || req[len(req)-1] != key || d.Schema["type"] != "object" {
			t.Errorf("%s: schema %v lacks required %q", d.Name, d.Schema, key)
		}
		if tb.ReasonKey(d.Name) != key {
			t.Errorf("%s: ReasonKey = %q, want %q", d.Name, tb.ReasonKey(d.Name), key)
		}
	}
	if defs[0].Schema["additionalProperties"] != false {
		t.Error("other schema keywords were lost")
	}
	// The tool's own "reason" argument survives; only the added key is stripped.
	c := tb.Resolve(agent.ToolCall{ID: "1", Name: "silence", Arguments: `{"reason":"noisy alert","__reason":"user asked\nsecond line"}`})
	if c.Problem != "" || c.Reason != "user asked" || !reflect.DeepEqual(c.Args, map[string]any{"reason": "noisy alert"}) {
		t.Errorf("resolved = %+v", c)
	}
}

func TestToolboxRefuses(t *testing.T) {
	t.Parallel()
	for name, tools := range map[string][]agent.Tool{
		"AskUserReserved": {{Name: "ask_user"}},
		"Duplicate":       {{Name: "a"}, {Name: "a"}},
		"NoName":          {{Name: ""}},
		"NotObject":       {{Name: "a", Schema: map[string]any{"type": "string"}}},
		"BadRequired":     {{Name: "a", Schema: map[string]any{"required": "x"}}},
		"BadProperties":   {{Name: "a", Schema: map[string]any{"properties": []any{}}}},
	} {
		if _, err := agent.NewToolbox(tools); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestWireNames(t *testing.T) {
	t.Parallel()
	tb, err := agent.NewToolbox([]agent.Tool{{Name: "github.search"}, {Name: "github__search"}, {Name: "fs.write file"}, {Name: strings.Repeat("x", 70) + ".y"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range tb.Defs() {
		names = append(names, d.Name)
		if len(d.Name) > 64 || strings.ContainsAny(d.Name, ". ") {
			t.Errorf("wire name %q is not wire-safe", d.Name)
		}
	}
	want := []string{"github__search", "github__search_2", "fs__write_file", strings.Repeat("x", 64), "ask_user"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("wire names = %v, want %v", names, want)
	}
	for _, real := range []string{"github.search", "github__search", "fs.write file"} {
		if got := tb.Resolve(agent.ToolCall{Name: tb.Wire(real), Arguments: "{}"}).Tool; got != real {
			t.Errorf("Resolve(Wire(%q)) = %q", real, got)
		}
	}
	if tb.Wire("gone.tool") != "gone__tool" {
		t.Errorf("unknown tool wire = %q", tb.Wire("gone.tool"))
	}
}

func TestResolveProblems(t *testing.T) {
	t.Parallel()
	tb, _ := agent.NewToolbox([]agent.Tool{{Name: "deploy", Schema: deploySchema()}})
	cases := map[string]struct{ args, problem string }{
		"Empty":         {"", ""},
		"Spaces":        {"  \n", ""},
		"Object":        {`{"service":"api"}`, ""},
		"Truncated":     {`{"service":"ap`, "not valid JSON (it ends early)"},
		"Syntax":        {`{"service" "api"}`, "not valid JSON (invalid character"},
		"Array":         {`["api"]`, "must be a JSON object, not an array"},
		"Null":          {`null`, "not null"},
		"String":        {`"api"`, "not a string"},
		"Two":           {`{"a":1} {"b":2}`, "more than one JSON value"},
		"TrailingJunk":  {`{"a":1}xyz`, "more than one JSON value"},
		"TooLarge":      {`{"a":"` + strings.Repeat("x", agent.MaxArguments) + `"}`, "the limit is"},
		"ReasonNotText": {`{"service":"api","reason":7}`, ""},
	}
	for name, tc := range cases {
		c := tb.Resolve(agent.ToolCall{ID: "c", Name: "deploy", Arguments: tc.args})
		if tc.problem == "" {
			if c.Problem != "" || c.Args == nil || c.Args["reason"] != nil {
				t.Errorf("%s: %+v", name, c)
			}
			continue
		}
		if !strings.Contains(c.Problem, tc.problem) || c.Args != nil || c.Tool != "deploy" {
			t.Errorf("%s: problem %q, want %q", name, c.Problem, tc.problem)
		}
	}
	c := tb.Resolve(agent.ToolCall{ID: "c", Name: "wipe", Arguments: "{}"})
	if !strings.Contains(c.Problem, `no tool named "wipe"; the tools are: ask_user, deploy`) || c.Tool != "wipe" {
		t.Errorf("unknown tool: %+v", c)
	}
	long := tb.Resolve(agent.ToolCall{Name: "deploy", Arguments: `{"reason":"` + strings.Repeat("é", 400) + `"}`})
	if n := len([]rune(long.Reason)); n != 301 {
		t.Errorf("reason of %d runes, want 300 and an ellipsis", n)
	}
}

func FuzzParseArguments(f *testing.F) {
	for _, s := range []string{"", "{}", `{"a":1}`, "[", `{"a":`, "null", `{"a":1}{}`, "\xff", `{"reason":"x"}`} {
		f.Add(s)
	}
	tb, _ := agent.NewToolbox([]agent.Tool{{Name: "t"}})
	f.Fuzz(func(t *testing.T, raw string) {
		args, problem := agent.ParseArguments(raw)
		if (args == nil) == (problem == "") {
			t.Fatalf("args %v and problem %q", args, problem)
		}
		if args != nil {
			if _, err := json.Marshal(args); err != nil {
				t.Fatalf("parsed args do not marshal: %v", err)
			}
		}
		c := tb.Resolve(agent.ToolCall{Name: "t", Arguments: raw})
		if c.Problem != problem || (c.Args != nil && c.Args["reason"] != nil) {
			t.Fatalf("Resolve disagrees: %+v", c)
		}
	})
}
