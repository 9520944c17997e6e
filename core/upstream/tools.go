package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/tools"
)

// ToolInfo is one tool a server listed, as opsgate treats it: offered (an
// tools.Tool exists) or not, and why not. Description and Schema are the
// server's (masked), for the operator; the tools.Tool a model reads has
// them framed as external content (frame.go).
type ToolInfo struct {
	// Name is opsgate's name, "<server>.<tool>"; Remote the server's.
	Name, Remote string
	Description  string
	Risk         approvals.Risk
	Destructive  bool
	Idempotent   bool
	// Offered is false when the tools globs leave it out or it is unusable.
	Offered bool
	// Problem says why an unusable tool is not offered ("" otherwise).
	Problem string
	// Excluded is true when the server's tools globs leave it out.
	Excluded bool
	// Schema is the input schema as the server sent it.
	Schema map[string]any
	// Overridden lists which fields the configuration overrode.
	Overridden []string
}

// remoteNameRE is MCP's tool name alphabet (SEP-986); opsgate names must be
// safe in rules, flows and chat.
var remoteNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// annotationDefaults maps MCP annotations to opsgate's treatment. With no
// annotation at all, a tool counts as MCP's defaults say: not read-only,
// destructive, open world, not idempotent — risk external and destructive,
// so policy default auto asks. A read-only tool is risk read, not
// destructive, and idempotent (calling it twice changes nothing).
func annotationDefaults(a *mcp.ToolAnnotations) (risk approvals.Risk, destructive, idempotent bool) {
	if a == nil {
		a = &mcp.ToolAnnotations{}
	}
	if a.ReadOnlyHint {
		return approvals.RiskRead, false, true
	}
	destructive = a.DestructiveHint == nil || *a.DestructiveHint
	risk = approvals.RiskExternal
	if a.OpenWorldHint != nil && !*a.OpenWorldHint {
		risk = approvals.RiskReversible
	}
	return risk, destructive, a.IdempotentHint
}

// buildTools turns a tools/list into ToolInfos (every listed tool) and the
// engine tools offered, each calling through c.
func (c *client) buildTools(list []*mcp.Tool) ([]ToolInfo, map[string]*tools.Tool) {
	infos := make([]ToolInfo, 0, len(list))
	offered := map[string]*tools.Tool{}
	seen := map[string]bool{}
	for _, t := range list {
		if t == nil {
			continue
		}
		info := ToolInfo{Remote: c.m.String(t.Name), Name: c.srv.Name + "." + c.m.String(t.Name), Description: c.m.String(describeTool(t))}
		info.Risk, info.Destructive, info.Idempotent = annotationDefaults(t.Annotations)
		if o, ok := c.srv.Overrides[t.Name]; ok {
			if o.Risk != "" {
				info.Risk = o.Risk
				info.Overridden = append(info.Overridden, "risk")
			}
			if o.Destructive != nil {
				info.Destructive = *o.Destructive
				info.Overridden = append(info.Overridden, "destructive")
			}
			if o.Idempotent != nil {
				info.Idempotent = *o.Idempotent
				info.Overridden = append(info.Overridden, "idempotent")
			}
			if o.Description != "" {
				info.Overridden = append(info.Overridden, "description")
			}
		}
		raw, schemaErr := schemaObject(t.InputSchema)
		if schemaErr == nil {
			raw, schemaErr = c.maskSchema(raw)
		}
		info.Schema = raw
		// What a model reads: the server's texts framed (frame.go).
		var modelDoc map[string]any
		if schemaErr == nil {
			if modelDoc, schemaErr = c.frameSchema(raw); schemaErr != nil {
				schemaErr = fmt.Errorf("its texts: %w", schemaErr)
			}
		}
		var schema *approvals.Schema
		switch {
		case !remoteNameRE.MatchString(t.Name):
			info.Problem = "name has characters outside A-Z a-z 0-9 _ . -"
		case seen[t.Name]:
			info.Problem = "listed twice; the first is offered"
		case !c.exposed(t.Name):
			info.Excluded = true
		case schemaErr != nil:
			info.Problem = "input schema: " + c.m.String(schemaErr.Error())
		default:
			var err error
			if schema, err = approvals.CompileSchema(info.Name, modelDoc); err != nil {
				info.Problem = "input schema: " + c.m.String(err.Error())
			}
		}
		seen[t.Name] = true
		if info.Problem == "" && !info.Excluded {
			info.Offered = true
			offered[info.Name] = &tools.Tool{
				Name: info.Name, Description: c.modelDescription(t.Name, info.Description),
				Risk: info.Risk, Destructive: info.Destructive, Idempotent: info.Idempotent,
				Schema: schema, Runner: &runner{c: c, remote: t.Name, name: info.Name},
			}
		}
		infos = append(infos, info)
	}
	slices.SortFunc(infos, func(a, b ToolInfo) int { return strings.Compare(a.Name, b.Name) })
	return infos, offered
}

// maskSchema masks credentials in a schema's text (descriptions,
// defaults): the schema reaches cards' edit forms and models.
func (c *client) maskSchema(raw map[string]any) (map[string]any, error) {
	b := string(mustJSON(raw))
	masked := c.m.String(b)
	if masked == b {
		return raw, nil
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(masked), &out); err != nil {
		return nil, errors.New("holds a configured credential")
	}
	return out, nil
}

// exposed reports whether the server's tools globs offer remote.
func (c *client) exposed(remote string) bool {
	if len(c.srv.Tools) == 0 {
		return true
	}
	for _, g := range c.srv.Tools {
		if approvals.Glob(g, remote) {
			return true
		}
	}
	return false
}

func describeTool(t *mcp.Tool) string {
	title := t.Title
	if title == "" && t.Annotations != nil {
		title = t.Annotations.Title
	}
	switch {
	case title == "":
		return t.Description
	case t.Description == "":
		return title
	}
	return title + ": " + t.Description
}

// refuseLoads fails every $ref outside the schema: a server's schema must
// not make opsgate read a local file or reach the network.
type refuseLoads struct{}

func (refuseLoads) Load(u string) (any, error) {
	return nil, fmt.Errorf("external $ref %q is not allowed", u)
}

// schemaObject checks a server's input schema: a JSON object of type
// object (MCP requires it; a missing type is read as object) that compiles
// without loading anything outside itself.
func schemaObject(in any) (map[string]any, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		return nil, errors.New("not a JSON object")
	}
	switch t, ok := raw["type"]; {
	case !ok:
		raw["type"] = "object"
	case t != "object":
		return nil, fmt.Errorf("type is %v, not object", t)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(mustJSON(raw)))
	if err != nil {
		return nil, err
	}
	comp := jsonschema.NewCompiler()
	comp.UseLoader(refuseLoads{})
	const loc = "opsgate:///upstream-input-schema.json"
	if err := comp.AddResource(loc, doc); err != nil {
		return nil, err
	}
	if _, err := comp.Compile(loc); err != nil {
		return nil, errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return raw, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// SchemaSummary renders a schema's top-level properties in one line, e.g.
// "path: string*, head: number" (* marks required), for listings.
func SchemaSummary(schema map[string]any) string {
	props, _ := schema["properties"].(map[string]any)
	if len(props) == 0 {
		return "(no arguments)"
	}
	req := map[string]bool{}
	if rs, ok := schema["required"].([]any); ok {
		for _, r := range rs {
			if s, ok := r.(string); ok {
				req[s] = true
			}
		}
	}
	var names []string
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	var parts []string
	for _, k := range names {
		typ := "any"
		if p, ok := props[k].(map[string]any); ok {
			switch t := p["type"].(type) {
			case string:
				typ = t
			case []any:
				var ts []string
				for _, x := range t {
					ts = append(ts, fmt.Sprint(x))
				}
				typ = strings.Join(ts, "|")
			}
			if _, ok := p["enum"]; ok {
				typ = "enum"
			}
		}
		mark := ""
		if req[k] {
			mark = "*"
		}
		parts = append(parts, k+": "+typ+mark)
	}
	return strings.Join(parts, ", ")
}
