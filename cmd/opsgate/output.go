package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/shortid"
)

// The output formats of the admin subcommands (-o): a table for people
// (the default; lists show short ids), wide (a list with more columns and
// whole ids), and json or yaml for scripts (the API's answer unchanged).
const (
	outputTable = "table"
	outputWide  = "wide"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// outputFlags are -o/--output and the older --json.
type outputFlags struct {
	output string
	json   *bool
}

// addOutputFlags declares -o, --output and --json on fs; lists (wide)
// offer -o wide too.
func addOutputFlags(fs *flagSet, wide bool) *outputFlags {
	o := &outputFlags{}
	formats := "table, json or yaml"
	if wide {
		formats = "table, wide (more columns, whole ids), json or yaml"
	}
	fs.StringVar(&o.output, "o", "", "output format: "+formats+" (default table)")
	fs.StringVar(&o.output, "output", "", "same as -o")
	o.json = fs.Bool("json", false, "same as -o json: print the API's JSON answer unchanged")
	return o
}

// check refuses an unknown format (bad usage, exit 2).
func (o *outputFlags) check(wide bool) error {
	switch o.output {
	case "", outputTable, outputJSON, outputYAML:
	case outputWide:
		if !wide {
			return usagef("-o wide is for lists; use table, json or yaml")
		}
	default:
		return usagef("-o %q: want table, wide, json or yaml", o.output)
	}
	if *o.json && o.output != "" && o.output != outputJSON {
		return usagef("--json and -o %s disagree; use one", o.output)
	}
	return nil
}

// format is the chosen format, outputTable when none was asked for.
func (o *outputFlags) format() string {
	switch {
	case *o.json:
		return outputJSON
	case o.output == "":
		return outputTable
	}
	return o.output
}

func printJSON(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		_, err = w.Write(raw)
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// printYAML prints a JSON answer as YAML (keys sorted, as the JSON
// decoder's maps give them).
func printYAML(w io.Writer, raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("yaml: decode the answer: %w", err)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("yaml: encode: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("yaml: encode: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// shownIDs are the ids a list prints: each one's short id, unique in the
// list (core/shortid), or with -o wide the whole id.
func (a *adminCall) shownIDs(ids []string) map[string]string {
	if a.format() != outputWide {
		return shortid.Shortest(ids...)
	}
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		out[id] = id
	}
	return out
}

// cell makes a value from outside one table cell: one line, no tabs.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(core.OneLine(s), "\t", " ")
}

// compact renders arguments as sorted-key JSON on one line.
func compact(m map[string]any) string {
	if m == nil {
		return "{}"
	}
	b, err := json.Marshal(m) // encoding/json sorts map keys
	if err != nil {
		return fmt.Sprint(m)
	}
	return string(b)
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func errOrNull(err error) string {
	if err == nil {
		return "got null"
	}
	return err.Error()
}
