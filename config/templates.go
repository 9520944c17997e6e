package config

import (
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/opsgate/opsgate/core/tools"
)

// toolFuncs returns the function set the tool runner parses exec and http
// templates with. Checking with the same set means `config check` accepts
// exactly what serve accepts: {{json .x}} passes, an unknown function fails.
// A func, not a package var, so no map is shared between checks.
func toolFuncs() template.FuncMap { return tools.TemplateFuncs() }

// templates checks argv-style tool template lists with funcs.
func (c *checker) templates(p string, list []string, funcs template.FuncMap) {
	for j, s := range list {
		c.template(fmt.Sprintf("%s[%d]", p, j), s, funcs, nil)
	}
}

// template checks that s parses as a text/template whose only functions are
// the builtins plus funcs (the set the consumer parses it with; nil for
// none) and, when vars is not nil, that every {{.name}} it uses is one of
// vars.
func (c *checker) template(p, s string, funcs template.FuncMap, vars map[string]bool) {
	if !strings.Contains(s, "{{") {
		return
	}
	tmpl, err := template.New(p).Option("missingkey=error").Funcs(funcs).Parse(s)
	if err != nil {
		c.problem(p, "invalid template: %v", strings.TrimPrefix(err.Error(), "template: "))
		return
	}
	if vars == nil || tmpl.Tree == nil {
		return
	}
	for _, name := range templateFields(tmpl.Tree.Root) {
		if !vars[name] {
			c.problem(p, "template uses {{.%s}} but the command has no {%s}", name, name)
		}
	}
}

// templateFields lists the top-level fields ({{.name}}) a template reads.
func templateFields(n parse.Node) []string {
	var out []string
	var walk func(parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n != nil {
				for _, x := range n.Nodes {
					walk(x)
				}
			}
		case *parse.ActionNode:
			walk(n.Pipe)
		case *parse.PipeNode:
			if n != nil {
				for _, cmd := range n.Cmds {
					walk(cmd)
				}
			}
		case *parse.CommandNode:
			for _, a := range n.Args {
				walk(a)
			}
		case *parse.FieldNode:
			out = append(out, n.Ident[0])
		case *parse.IfNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			walk(n.Pipe) // inside a with, "." changes meaning; do not descend
		case *parse.RangeNode:
			walk(n.Pipe)
		}
	}
	walk(n)
	return out
}
