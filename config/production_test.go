package config

import (
	"encoding"
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"text/template"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/tools"
	"go.yaml.in/yaml/v3"
)

// TestProductionHasEveryKey keeps configs/production.yaml what the README
// promises, "a complete example with every key": every yaml key of every
// config struct must appear at least once. global is exempt: it is the
// older name of account, and setting both is refused.
func TestProductionHasEveryKey(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../configs/production.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	used := map[reflect.Type]map[string]bool{}
	markKeys(doc.Content[0], reflect.TypeFor[Config](), used)
	var missing []string
	eachKey(reflect.TypeFor[Config](), map[reflect.Type]bool{}, func(owner reflect.Type, key string) {
		if key != "global" && !used[owner][key] {
			missing = append(missing, owner.Name()+"."+key)
		}
	})
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("configs/production.yaml never sets: %s", strings.Join(missing, ", "))
	}
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// structOf returns the struct type config decodes a key into, through
// pointers and lists, or nil for a leaf (scalars, maps, text values).
func structOf(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil
	}
	return t
}

// yamlFields calls fn for each keyed field of t, flattening ",inline" ones;
// owner is the struct the key is declared in.
func yamlFields(t reflect.Type, fn func(owner reflect.Type, key string, ft reflect.Type)) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case opts == "inline":
			yamlFields(f.Type, fn)
		case name != "":
			fn(t, name, f.Type)
		}
	}
}

// eachKey visits every key reachable from t once per declaring struct.
func eachKey(t reflect.Type, seen map[reflect.Type]bool, fn func(owner reflect.Type, key string)) {
	if seen[t] {
		return
	}
	seen[t] = true
	yamlFields(t, func(owner reflect.Type, key string, ft reflect.Type) {
		fn(owner, key)
		if st := structOf(ft); st != nil {
			eachKey(st, seen, fn)
		}
	})
}

// markKeys records the keys a YAML node sets, walking into structs.
func markKeys(n *yaml.Node, t reflect.Type, used map[reflect.Type]map[string]bool) {
	if n.Kind == yaml.SequenceNode {
		for _, c := range n.Content {
			markKeys(c, t, used)
		}
		return
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	fields := map[string]struct {
		owner, typ reflect.Type
	}{}
	yamlFields(t, func(owner reflect.Type, key string, ft reflect.Type) {
		fields[key] = struct{ owner, typ reflect.Type }{owner, ft}
	})
	for i := 0; i+1 < len(n.Content); i += 2 {
		f, ok := fields[n.Content[i].Value]
		if !ok {
			continue
		}
		if used[f.owner] == nil {
			used[f.owner] = map[string]bool{}
		}
		used[f.owner][n.Content[i].Value] = true
		if st := structOf(f.typ); st != nil {
			markKeys(n.Content[i+1], st, used)
		}
	}
}

// TestProductionHTTPBodyIsInjectionSafe renders the example's JSON body with
// the runner's functions and hostile chat text: it must stay valid JSON
// carrying the text as one string value.
func TestProductionHTTPBodyIsInjectionSafe(t *testing.T) {
	t.Parallel()
	cfg, err := Loader{LookupEnv: envOf(productionEnv)}.Load("../configs/production.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := cfg.Tool("silence_alert").HTTP
	tmpl, err := template.New("body").Option("missingkey=error").Funcs(tools.TemplateFuncs()).Parse(h.Body)
	if err != nil {
		t.Fatal(err)
	}
	hostile := `x"}],"matchers":[{"name":"severity","value":".*","isRegex":true}],"y":"`
	var b strings.Builder
	if err := tmpl.Execute(&b, map[string]any{"alertname": hostile, "duration": "1h"}); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Matchers []struct{ Name, Value string } `json:"matchers"`
	}
	if err := json.Unmarshal([]byte(b.String()), &body); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, b.String())
	}
	if len(body.Matchers) != 1 || body.Matchers[0].Value != hostile {
		t.Errorf("matchers = %+v, want the one alertname matcher carrying the text verbatim", body.Matchers)
	}
}

// TestShippedSchemasForbidLeadingDash: every string argument of an exec
// tool in the configs we ship is refused by its schema when it starts with
// "-", so a copied example never hands a program an option (the runner
// refuses such values too; the schema says so on the card's 422 first).
func TestShippedSchemasForbidLeadingDash(t *testing.T) {
	t.Parallel()
	total := 0
	for _, file := range []string{"../configs/quickstart.yaml", "../configs/production.yaml", "../deploy/compose/opsgate.yaml", "../deploy/docker/opsgate.yaml", "../deploy/k8s/configmap.yaml"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Kind string            `yaml:"kind"`
			Data map[string]string `yaml:"data"`
		}
		if err := yaml.Unmarshal(src, &doc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if doc.Kind == "ConfigMap" {
			src = []byte(doc.Data["opsgate.yaml"])
		}
		var cfg struct {
			Tools []struct {
				Name        string         `yaml:"name"`
				InputSchema map[string]any `yaml:"input_schema"`
				Exec        map[string]any `yaml:"exec"`
			} `yaml:"tools"`
		}
		if err := yaml.Unmarshal(src, &cfg); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		checked := 0
		for _, tool := range cfg.Tools {
			if tool.Exec == nil {
				continue
			}
			props, _ := tool.InputSchema["properties"].(map[string]any)
			if len(props) == 0 {
				t.Errorf("%s: exec tool %s has no schema properties", file, tool.Name)
			}
			for name, p := range props {
				if m, _ := p.(map[string]any); m["type"] != "string" {
					continue
				}
				s, err := approvals.CompileSchema(tool.Name, map[string]any{"type": "object", "properties": map[string]any{name: p}})
				if err != nil {
					t.Fatalf("%s: %s: %v", file, tool.Name, err)
				}
				for _, v := range []string{"-x", "--upload-pack=evil"} {
					if _, err := s.Apply(map[string]any{name: v}); err == nil {
						t.Errorf("%s: tool %s argument %s accepts %q", file, tool.Name, name, v)
					}
				}
				checked++
			}
		}
		total += checked
	}
	if total < 10 {
		t.Fatalf("only %d exec arguments checked: the walk lost the configs' tools", total)
	}
}
