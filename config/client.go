package config

import (
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/opsgate/opsgate/configs"
)

// ClientSettings is what the admin command line needs of a configuration:
// where the server listens and where its data directory (with the
// generated admin token) is.
type ClientSettings struct {
	// Source is the file read, or configs.QuickstartName.
	Source  string
	Listen  string
	DataDir string
}

// ResolveClient finds the configuration as Resolve does but reads only
// server.listen and server.data_dir, expanding ${VAR} in those two values
// alone. The CLI on a production host must work without the secrets the
// rest of the file names (a webhook secret, a bot token), and must not
// fail on a section it never uses; `opsgate config check` is where the
// whole file is judged.
func (l Loader) ResolveClient(flagPath string) (ClientSettings, error) {
	path, err := l.locate(flagPath)
	if err != nil {
		return ClientSettings{Source: path}, err
	}
	data, name := configs.Quickstart, configs.QuickstartName
	if path != "" {
		read := l.ReadFile
		if read == nil {
			read = os.ReadFile
		}
		if data, err = read(path); err != nil {
			return ClientSettings{Source: path}, fmt.Errorf("config: read %s: %w", path, err)
		}
		name = path
	}
	cs := ClientSettings{Source: name}
	var doc struct {
		Server struct {
			Listen  yaml.Node `yaml:"listen"`
			DataDir yaml.Node `yaml:"data_dir"`
		} `yaml:"server"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return cs, fmt.Errorf("config %s: %w", name, err)
	}
	for _, f := range []struct {
		n    *yaml.Node
		path string
		out  *string
		def  string
	}{
		{&doc.Server.Listen, "server.listen", &cs.Listen, DefaultListen},
		{&doc.Server.DataDir, "server.data_dir", &cs.DataDir, DefaultDataDir},
	} {
		*f.out = f.def
		if f.n.Kind == 0 || f.n.Tag == "!!null" {
			continue
		}
		if f.n.Kind != yaml.ScalarNode {
			return cs, fmt.Errorf("%s:%d: %s: must be a string", name, f.n.Line, f.path)
		}
		v, err := expandEnv(f.n.Value, l.lookupEnv())
		if err != nil {
			return cs, fmt.Errorf("%s:%d: %s: %w", name, f.n.Line, f.path, err)
		}
		if v != "" {
			*f.out = v
		}
	}
	return cs, nil
}

// ResolveClient is Loader{}.ResolveClient with the process environment and
// file system.
func ResolveClient(flagPath string) (ClientSettings, error) { return Loader{}.ResolveClient(flagPath) }

// Line returns the line of the YAML path (e.g. "tools[1].exec.command") or
// of its nearest ancestor that was written, 0 when unknown: checks made
// outside this package (`config check` on the file system) report
// problems with a position like the ones made here.
func (c *Config) Line(path string) int {
	d := decoder{lines: c.lines}
	return d.lineOf(path)
}
