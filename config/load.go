package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/opsgate/opsgate/configs"
	"github.com/opsgate/opsgate/core/router"
)

// EnvConfig is the environment variable naming the config file when
// --config is not given.
const EnvConfig = "OPSGATE_CONFIG"

// DefaultFile is the file looked for in the working directory when neither
// --config nor $OPSGATE_CONFIG names one.
const DefaultFile = "opsgate.yaml"

// Loader reads configurations with injectable access to the environment and
// the file system, so tests need no globals. The zero Loader uses the
// process environment and the OS file system.
type Loader struct {
	// LookupEnv resolves ${VAR}; default os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// ReadFile reads a config file; default os.ReadFile.
	ReadFile func(string) ([]byte, error)
	// Stat checks whether ./opsgate.yaml exists; default os.Stat.
	Stat func(string) (fs.FileInfo, error)
}

func (l Loader) lookupEnv() func(string) (string, bool) {
	if l.LookupEnv != nil {
		return l.LookupEnv
	}
	return os.LookupEnv
}

// Parse decodes and validates data. name is used in problem messages. On
// failure the error is a *Error listing every problem found.
func (l Loader) Parse(name string, data []byte) (*Config, error) {
	d := &decoder{lookup: l.lookupEnv(), lines: map[string]int{}, given: map[string]bool{}}
	cfg := &Config{Source: name}
	root, err := parseYAML(data)
	if err != nil {
		return nil, &Error{File: name, Problems: []Problem{syntaxProblem(err)}}
	}
	if root != nil {
		d.decode(root, reflect.ValueOf(cfg).Elem(), "")
	}
	if d.overflow {
		return nil, &Error{File: name, Problems: d.problems}
	}
	cfg.lines = d.lines
	applyDefaults(cfg, func(p string) bool { return d.given[p] })
	(&checker{decoder: d, cfg: cfg}).run()
	if len(d.problems) > 0 {
		return nil, &Error{File: name, Problems: d.problems}
	}
	return cfg, nil
}

// parseYAML returns the root node of the single document in data, or nil
// for an empty document.
func parseYAML(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("yaml: line %d: only one YAML document is allowed", extra.Line)
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root := doc.Content[0]
		if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
			return nil, nil // a file holding only comments
		}
		return root, nil
	}
	return &doc, nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxProblem turns a YAML parser error into a Problem with its line.
func syntaxProblem(err error) Problem {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return Problem{Line: line, Message: "YAML syntax: " + msg[len(m[0]):]}
	}
	return Problem{Message: "YAML syntax: " + msg}
}

// Load reads and parses the file at path.
func (l Loader) Load(path string) (*Config, error) {
	read := l.ReadFile
	if read == nil {
		read = os.ReadFile
	}
	data, err := read(path)
	if err != nil {
		return nil, fmt.Errorf("config: read %s: %w", path, err)
	}
	return l.Parse(path, data)
}

// Default parses the built-in quickstart configuration.
func (l Loader) Default() (*Config, error) {
	return l.Parse(configs.QuickstartName, configs.Quickstart)
}

// Resolve finds and loads the configuration in the order the README documents: the
// --config flag, then $OPSGATE_CONFIG, then ./opsgate.yaml, then the built-in
// quickstart. A file named by the flag or the variable must exist; a missing
// ./opsgate.yaml just means "use the defaults". path is "" for the defaults.
func (l Loader) Resolve(flagPath string) (path string, cfg *Config, err error) {
	path, err = l.locate(flagPath)
	switch {
	case err != nil:
		return path, nil, err
	case path == "":
		cfg, err = l.Default()
		return "", cfg, err
	}
	cfg, err = l.Load(path)
	return path, cfg, err
}

// locate returns the file Resolve loads, "" for the built-in quickstart.
func (l Loader) locate(flagPath string) (string, error) {
	if flagPath != "" {
		return flagPath, nil
	}
	if p, ok := l.lookupEnv()(EnvConfig); ok && p != "" {
		return p, nil
	}
	stat := l.Stat
	if stat == nil {
		stat = os.Stat
	}
	switch _, err := stat(DefaultFile); {
	case err == nil:
		return DefaultFile, nil
	case !errors.Is(err, fs.ErrNotExist):
		return DefaultFile, fmt.Errorf("config: %w", err)
	}
	return "", nil
}

// Parse is Loader{}.Parse: decode and validate data using the process
// environment.
func Parse(name string, data []byte) (*Config, error) { return Loader{}.Parse(name, data) }

// Default is Loader{}.Default: the built-in quickstart configuration.
func Default() (*Config, error) { return Loader{}.Default() }

// Resolve is Loader{}.Resolve with the process environment and file system.
func Resolve(flagPath string) (path string, cfg *Config, err error) {
	return Loader{}.Resolve(flagPath)
}

// Router builds the command router for the configured flows.
func (c *Config) Router() (*router.Router, error) {
	flows := make([]router.Flow, len(c.Flows))
	for i, f := range c.Flows {
		flows[i] = router.Flow{Name: f.Name, Description: f.Description, Command: f.Command}
	}
	r, err := router.New(flows)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return r, nil
}

// Tool returns the tool named name, or nil.
func (c *Config) Tool(name string) *Tool {
	for i := range c.Tools {
		if c.Tools[i].Name == name {
			return &c.Tools[i]
		}
	}
	return nil
}

// Flow returns the flow named name, or nil.
func (c *Config) Flow(name string) *Flow {
	for i := range c.Flows {
		if c.Flows[i].Name == name {
			return &c.Flows[i]
		}
	}
	return nil
}
