package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// noRemoteRefs refuses every $ref outside the schema itself: a config check
// must not read local files or reach the network.
type noRemoteRefs struct{}

func (noRemoteRefs) Load(u string) (any, error) {
	return nil, fmt.Errorf("external $ref %q is not allowed; keep input_schema self-contained", u)
}

// compileSchema compiles a tool's input schema. Tool arguments are always a
// JSON object (MCP requires it), so the root must say type: object.
func compileSchema(doc map[string]any) (*jsonschema.Schema, error) {
	if t, ok := doc["type"]; !ok || t != "object" {
		return nil, errors.New(`root must have type: object`)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noRemoteRefs{})
	const loc = "opsgate:///input_schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %v", err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", "; ")
		return nil, fmt.Errorf("invalid JSON Schema: %s", msg)
	}
	return s, nil
}
