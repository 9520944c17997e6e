package config

import (
	"encoding"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxNodes bounds the work one document can cause (alias expansion can
// otherwise turn a few lines into billions of nodes).
const maxNodes = 200_000

// decoder walks a yaml.Node tree into Go values, collecting problems instead
// of stopping at the first one.
type decoder struct {
	lookup   func(string) (string, bool)
	problems []Problem
	lines    map[string]int  // YAML path → line, for semantic checks
	given    map[string]bool // paths of struct keys written with a non-null value
	// expanded holds the values of the variables ${VAR} substituted, by
	// path, so credentials taken from the environment can be masked
	// (MCPServer.Secrets).
	expanded map[string][]string
	visited  int
	overflow bool
	// typos are the paths of keys a mistyped key was taken to mean ("tools"
	// for "tols"): problems there or caused by their absence are follow-ons
	// of the one typo and are not reported (checker.problem).
	typos map[string]bool
}

func (d *decoder) add(path string, line int, format string, args ...any) {
	d.problems = append(d.problems, Problem{Path: path, Line: line, Message: fmt.Sprintf(format, args...)})
}

// lineOf returns the line recorded for path or its nearest ancestor.
func (d *decoder) lineOf(path string) int {
	for path != "" {
		if l, ok := d.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

var textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()

// resolve follows aliases and counts nodes against maxNodes.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	for depth := 0; n != nil && n.Kind == yaml.AliasNode && depth < 100; depth++ {
		n = n.Alias
	}
	d.visited++
	if d.visited > maxNodes && !d.overflow {
		d.overflow = true
		d.add("", n.Line, "document is too large or expands too many aliases (limit %d nodes)", maxNodes)
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unexpected node"
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// scalar returns the expanded value of a scalar node.
func (d *decoder) scalar(n *yaml.Node, path, want string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.add(path, n.Line, "must be %s, not %s", want, kindName(n))
		return "", false
	}
	var vars []string
	v, err := expandEnv(n.Value, func(k string) (string, bool) {
		x, ok := d.lookup(k)
		if ok && x != "" {
			vars = append(vars, x)
		}
		return x, ok
	})
	if err != nil {
		d.add(path, n.Line, "%v", err)
		return "", false
	}
	if len(vars) > 0 {
		if d.expanded == nil {
			d.expanded = map[string][]string{}
		}
		d.expanded[path] = vars
	}
	return v, true
}

// decode stores node n into v (addressable), recording problems under path.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if d.overflow {
		return
	}
	n = d.resolve(n)
	if n == nil {
		return
	}
	if _, ok := d.lines[path]; !ok {
		d.lines[path] = n.Line
	}
	if isNull(n) {
		return // an explicit null leaves the zero value; required checks catch it
	}
	if v.CanAddr() && v.Addr().Type().Implements(textUnmarshalerType) {
		s, ok := d.scalar(n, path, "a string")
		if !ok {
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			d.add(path, n.Line, "%v", err)
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.String:
		if s, ok := d.scalar(n, path, "a string"); ok {
			v.SetString(s)
		}
	case reflect.Bool:
		s, ok := d.scalar(n, path, "true or false")
		if !ok {
			return
		}
		switch strings.ToLower(s) {
		case "true", "yes", "on":
			v.SetBool(true)
		case "false", "no", "off":
			v.SetBool(false)
		default:
			d.add(path, n.Line, "must be true or false, not %q", s)
		}
	case reflect.Int, reflect.Int64:
		s, ok := d.scalar(n, path, "an integer")
		if !ok {
			return
		}
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			d.add(path, n.Line, "must be an integer, not %q", s)
			return
		}
		v.SetInt(i)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.add(path, n.Line, "must be a list, not %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.add(path, n.Line, "must be a mapping, not %s", kindName(n))
			return
		}
		m := reflect.MakeMap(v.Type())
		for _, kv := range d.pairs(n, path) {
			key := kv.key
			elem := reflect.New(v.Type().Elem()).Elem()
			d.decode(kv.value, elem, joinKey(path, key))
			m.SetMapIndex(reflect.ValueOf(key), elem)
		}
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf(d.plain(n, path)))
	default:
		d.add(path, n.Line, "internal error: cannot decode into %s", v.Type())
	}
}

type pair struct {
	key   string
	line  int
	value *yaml.Node
}

// pairs returns the entries of a mapping with merge keys ("<<") applied and
// duplicate keys reported. Explicit keys override merged ones.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var merged, own []pair
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := d.resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.add(path, k.Line, "keys must be strings, not %s", kindName(k))
			continue
		}
		if k.Tag == "!!merge" {
			merged = append(merged, d.mergePairs(val, path)...)
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.add(joinKey(path, k.Value), k.Line, "duplicate key (first at line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		own = append(own, pair{key: k.Value, line: k.Line, value: val})
	}
	out := own
	for _, p := range merged {
		if _, ok := seen[p.key]; !ok {
			seen[p.key] = p.line
			out = append(out, p)
		}
	}
	return out
}

func (d *decoder) mergePairs(v *yaml.Node, path string) []pair {
	v = d.resolve(v)
	switch v.Kind {
	case yaml.MappingNode:
		return d.pairs(v, path)
	case yaml.SequenceNode:
		var out []pair
		for _, item := range v.Content {
			if d.overflow {
				break
			}
			out = append(out, d.mergePairs(item, path)...)
		}
		return out
	}
	d.add(path, v.Line, "merge key (<<) needs a mapping or a list of mappings")
	return nil
}

// joinKey appends a mapping key to a path, quoting keys that would make the
// path ambiguous.
func joinKey(path, key string) string {
	if key == "" || strings.ContainsAny(key, ".[]\" ") {
		key = "[" + strconv.Quote(key) + "]"
		return path + key
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

type field struct {
	index    []int
	required bool
	enum     []string
}

// structFields maps YAML keys to fields, flattening `yaml:",inline"`.
func structFields(t reflect.Type) (map[string]field, []string) {
	fields := map[string]field{}
	var order []string
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("yaml")
			if !sf.IsExported() || tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(append([]int(nil), prefix...), i)
			if opts == "inline" {
				walk(sf.Type, idx)
				continue
			}
			f := field{index: idx, required: sf.Tag.Get("cfg") == "required"}
			if e := sf.Tag.Get("enum"); e != "" {
				f.enum = strings.Split(e, "|")
			}
			fields[name] = f
			order = append(order, name)
		}
	}
	walk(t, nil)
	return fields, order
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.add(path, n.Line, "must be a mapping, not %s", kindName(n))
		return
	}
	fields, order := structFields(v.Type())
	present := map[string]bool{} // key given with a non-null value
	broken := map[string]bool{}  // key given but its value had a problem
	for _, kv := range d.pairs(n, path) {
		p := joinKey(path, kv.key)
		f, ok := fields[kv.key]
		if !ok {
			msg := "unknown key"
			if s := suggest(kv.key, order); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
				if d.typos == nil {
					d.typos = map[string]bool{}
				}
				d.typos[joinKey(path, s)] = true
			} else {
				msg += fmt.Sprintf(" (known: %s)", strings.Join(sorted(order), ", "))
			}
			d.add(p, kv.line, "%s", msg)
			continue
		}
		d.lines[p] = kv.line
		present[kv.key] = !isNull(d.resolve(kv.value))
		if present[kv.key] {
			d.given[p] = true
		}
		fv := v.FieldByIndex(f.index)
		before := len(d.problems)
		d.decode(kv.value, fv, p)
		broken[kv.key] = len(d.problems) > before
		if len(f.enum) > 0 && fv.Kind() == reflect.String && fv.String() != "" && !contains(f.enum, fv.String()) {
			d.add(p, kv.line, "must be one of %s, not %q", strings.Join(f.enum, ", "), fv.String())
		}
	}
	for _, name := range order {
		f := fields[name]
		if !f.required {
			continue
		}
		switch fv := v.FieldByIndex(f.index); {
		case broken[name], d.typos[joinKey(path, name)]:
		case !present[name]:
			d.add(joinKey(path, name), d.lineOf(path), "missing required value")
		case fv.IsZero() || fv.Kind() == reflect.Slice && fv.Len() == 0:
			d.add(joinKey(path, name), d.lines[joinKey(path, name)], "must not be empty")
		}
	}
}

// plain converts a node into JSON-compatible Go values (map[string]any,
// []any, string, int64, float64, bool, nil), expanding ${VAR} in strings.
func (d *decoder) plain(n *yaml.Node, path string) any {
	if d.overflow {
		return nil
	}
	n = d.resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for _, kv := range d.pairs(n, path) {
			m[kv.key] = d.plain(kv.value, joinKey(path, kv.key))
		}
		return m
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			s = append(s, d.plain(item, fmt.Sprintf("%s[%d]", path, i)))
		}
		return s
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil
		case "!!bool", "!!int", "!!float":
			var x any
			if err := n.Decode(&x); err != nil {
				d.add(path, n.Line, "%v", err)
				return nil
			}
			if u, ok := x.(uint64); ok { // JSON has no unsigned type
				return float64(u)
			}
			return x
		}
		s, _ := d.scalar(n, path, "a value")
		return s
	}
	d.add(path, n.Line, "unsupported YAML node")
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// suggest returns the known key closest to key, if it is a plausible typo.
func suggest(key string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		dist := levenshtein(strings.ToLower(key), k)
		if dist < bestDist || (dist == bestDist && best != "" && k < best) {
			best, bestDist = k, dist
		}
	}
	if best != "" && bestDist > len(key)/2 {
		return ""
	}
	return best
}

func levenshtein(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64 // long keys are not typos of short ones; keep this cheap
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
