package webhook

import (
	"fmt"
	"text/template"
	"text/template/parse"

	"github.com/opsgate/opsgate/core/router"
)

// A text template writes a command line that the router splits on spaces,
// and in which name=value binds a placeholder. A value from the body must
// therefore never add words: every value a text template prints is written
// as one token (router.Quote), as if the action ended in "| quote". A
// template opts into raw text for one action by ending it in verbatim
// ({{verbatim .text}}): the value's words then reach the router as
// written. docs/webhooks.md explains both.

// Names of the template functions that end an action.
const (
	fnQuote    = "quote"
	fnVerbatim = "verbatim"
)

// templateFuncs are the functions of webhook templates: quote (one token)
// and verbatim (the value as written).
func templateFuncs() template.FuncMap {
	fm := router.TemplateFuncs()
	fm[fnVerbatim] = func(v any) string {
		if v == nil {
			return ""
		}
		return fmt.Sprint(v)
	}
	return fm
}

// quoteActions makes every printing action of every template in t end in
// quote, unless it already ends in quote or verbatim. It rewrites the parse
// trees in place, the way html/template adds its escapers; actions that
// only declare or assign a variable print nothing and are left alone.
func quoteActions(t *template.Template) {
	for _, tt := range t.Templates() {
		if tt.Tree != nil {
			quoteList(tt.Tree.Root)
		}
	}
}

func quoteList(l *parse.ListNode) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		switch n := n.(type) {
		case *parse.ActionNode:
			quotePipe(n.Pipe)
		case *parse.IfNode:
			quoteList(n.List)
			quoteList(n.ElseList)
		case *parse.RangeNode:
			quoteList(n.List)
			quoteList(n.ElseList)
		case *parse.WithNode:
			quoteList(n.List)
			quoteList(n.ElseList)
		}
	}
}

// quotePipe appends "| quote" to a printing pipeline that does not end in
// quote or verbatim.
func quotePipe(p *parse.PipeNode) {
	if p == nil || len(p.Decl) > 0 || p.IsAssign || len(p.Cmds) == 0 {
		return
	}
	last := p.Cmds[len(p.Cmds)-1]
	if len(last.Args) > 0 {
		if id, ok := last.Args[0].(*parse.IdentifierNode); ok && (id.Ident == fnQuote || id.Ident == fnVerbatim) {
			return
		}
	}
	p.Cmds = append(p.Cmds, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: last.Pos,
		Args: []parse.Node{parse.NewIdentifier(fnQuote).SetPos(last.Pos)}})
}
