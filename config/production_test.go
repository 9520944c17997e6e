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
