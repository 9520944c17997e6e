package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/configs"
)

// The quickstart's demo tools are shell scripts built into the binary
// (configs/demo). A tool whose command is <data_dir>/demo/<script> runs
// the embedded script, written there by serve at start: the quickstart
// then works from any directory and in the container image, with nothing
// next to the binary. serve owns that directory's scripts: it rewrites one
// that differs from the binary's, so an upgrade upgrades the demo.

// execCommand is one argv[0] of an exec tool, with where it came from.
type execCommand struct {
	path string // YAML path, e.g. tools[1].exec.dry_run[0]
	arg  string // as written
	abs  string // resolved against the tool's directory; "" for a PATH lookup
}

// execCommands lists argv[0] of every exec tool's command and dry run.
// Templated ones ({{…}}) are skipped: they are known only at run time.
func execCommands(cfg *config.Config) []execCommand {
	dir := toolDir(cfg)
	var out []execCommand
	for i, t := range cfg.Tools {
		if t.Exec == nil {
			continue
		}
		for _, argv := range []struct {
			key string
			v   []string
		}{{"command", t.Exec.Command}, {"dry_run", t.Exec.DryRun}} {
			if len(argv.v) == 0 || strings.Contains(argv.v[0], "{{") {
				continue
			}
			c := execCommand{path: fmt.Sprintf("tools[%d].exec.%s[0]", i, argv.key), arg: argv.v[0]}
			if strings.ContainsRune(c.arg, '/') {
				c.abs = resolveCommand(dir, c.arg)
			}
			out = append(out, c)
		}
	}
	return out
}

// resolveCommand is the absolute path of a command with a slash in it: a
// relative one is resolved against dir (the tools' directory).
func resolveCommand(dir, arg string) string {
	abs := arg
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(dir, abs)
	}
	if a, err := filepath.Abs(abs); err == nil {
		abs = a
	}
	return abs
}

// demoDir is where serve installs the demo scripts for cfg.
func demoDir(cfg *config.Config) string {
	d, err := filepath.Abs(filepath.Join(cfg.Server.DataDir, configs.DemoDir))
	if err != nil {
		return filepath.Join(cfg.Server.DataDir, configs.DemoDir)
	}
	return d
}

// demoScript reports where the built-in demo script an exec command names
// is installed, if it names one. It names one when its path resolves into
// <data_dir>/demo/ (data_dir resolved against the current directory, like
// every data path), or when it is written as <data_dir>/demo/<script> with
// data_dir as written — the quickstart's "./data/demo/status.sh" beside
// data_dir "./data": a relative command resolves against the config file's
// directory, so with `--config configs/quickstart.yaml` it would miss the
// directory serve writes to. Either way the tool runs the installed script.
func demoScript(cfg *config.Config, c execCommand) (string, bool) {
	var name string
	switch {
	case c.abs != "" && filepath.Dir(c.abs) == demoDir(cfg):
		name = filepath.Base(c.abs)
	case c.abs != "" && !filepath.IsAbs(c.arg) && !filepath.IsAbs(cfg.Server.DataDir) &&
		filepath.Dir(filepath.Clean(c.arg)) == filepath.Join(cfg.Server.DataDir, configs.DemoDir):
		name = filepath.Base(c.arg)
	default:
		return "", false
	}
	if _, err := fs.Stat(configs.Demo, path.Join(configs.DemoDir, name)); err != nil {
		return "", false
	}
	return filepath.Join(demoDir(cfg), name), true
}

// demoArgv returns argv with a demo script's command replaced by where
// serve installs it (see demoScript); other argvs are returned as they are.
func demoArgv(cfg *config.Config, argv []string) []string {
	if len(argv) == 0 || strings.Contains(argv[0], "{{") {
		return argv
	}
	c := execCommand{arg: argv[0]}
	if strings.ContainsRune(c.arg, '/') {
		c.abs = resolveCommand(toolDir(cfg), c.arg)
	}
	p, ok := demoScript(cfg, c)
	if !ok {
		return argv
	}
	return append([]string{p}, argv[1:]...)
}

// installDemo writes the embedded demo scripts into <data_dir>/demo/ when
// a configured exec tool runs one from there, and does nothing otherwise
// (a production config never gets a demo directory). A script already
// there with the same content is left alone.
func installDemo(cfg *config.Config, log *slog.Logger) error {
	needed := false
	for _, c := range execCommands(cfg) {
		_, ok := demoScript(cfg, c)
		needed = needed || ok
	}
	if !needed {
		return nil
	}
	dir := demoDir(cfg)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("install the demo tools: %w", err)
	}
	ents, err := fs.ReadDir(configs.Demo, configs.DemoDir)
	if err != nil {
		return fmt.Errorf("install the demo tools: %w", err)
	}
	for _, ent := range ents {
		want, err := fs.ReadFile(configs.Demo, path.Join(configs.DemoDir, ent.Name()))
		if err != nil {
			return fmt.Errorf("install the demo tools: %w", err)
		}
		p := filepath.Join(dir, ent.Name())
		if have, err := os.ReadFile(p); err == nil && bytes.Equal(have, want) {
			if err := os.Chmod(p, 0o755); err != nil {
				return fmt.Errorf("install the demo tools: %w", err)
			}
			continue
		}
		if err := writeFileAtomic(p, want, 0o755); err != nil {
			return fmt.Errorf("install the demo tools: %w", err)
		}
		log.Info("installed a demo tool", "file", p)
	}
	return nil
}

// writeFileAtomic writes data to p through a temporary file and a rename,
// so a tool starting meanwhile never runs half a script.
func writeFileAtomic(p string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

// checkExecCommands reports exec tools whose command (or dry run) does not
// exist or is not executable on this machine, as `config check` problems:
// a relative path is resolved against the tool's directory (the config
// file's), a bare name through $PATH. A demo script serve installs at
// start is fine before it exists.
func checkExecCommands(cfg *config.Config) []config.Problem {
	var out []config.Problem
	dir := toolDir(cfg)
	if dir == "" {
		dir = "the current directory"
	}
	for _, c := range execCommands(cfg) {
		p := config.Problem{Path: c.path, Line: cfg.Line(c.path)}
		if c.abs == "" {
			if _, err := exec.LookPath(c.arg); err != nil {
				p.Message = fmt.Sprintf("command %q is not found in $PATH", c.arg)
				out = append(out, p)
			}
			continue
		}
		if _, ok := demoScript(cfg, c); ok {
			continue // serve writes it before anything runs
		}
		info, err := os.Stat(c.abs)
		where := ""
		if !filepath.IsAbs(c.arg) {
			where = " (resolved against " + dir + ")"
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			p.Message = fmt.Sprintf("command %s does not exist%s", c.abs, where)
		case err != nil:
			p.Message = fmt.Sprintf("command %s: %v", c.abs, err)
		case info.IsDir():
			p.Message = fmt.Sprintf("command %s is a directory%s", c.abs, where)
		case info.Mode().Perm()&0o111 == 0:
			p.Message = fmt.Sprintf("command %s is not executable (mode %v; chmod +x it)", c.abs, info.Mode().Perm())
		default:
			continue
		}
		out = append(out, p)
	}
	return out
}

// loadPrepared is the one path from --config to a configuration ready to
// run, shared by `config check` and `serve` so the two never disagree:
// load and validate the file; for serve (install), create data_dir and
// write the demo scripts the tools name; then check every exec command (a
// demo script counts as there: serve writes it before anything runs).
// Problems go to w as file:line: path: message, and errSilent is returned.
func loadPrepared(flagPath string, w io.Writer, install bool, log *slog.Logger) (string, *config.Config, error) {
	path, cfg, err := loadConfig(flagPath, w)
	if err != nil {
		return path, nil, err
	}
	if install {
		if err := makePrivateDir(cfg.Server.DataDir); err != nil {
			return path, nil, fmt.Errorf("create data_dir: %w", err)
		}
		if err := installDemo(cfg, log); err != nil {
			return path, nil, err
		}
	}
	if ps := checkExecCommands(cfg); len(ps) > 0 {
		fmt.Fprintln(w, (&config.Error{File: describeSource(path), Problems: ps}).Error())
		fmt.Fprintf(w, "%d problem(s) in %s\n", len(ps), describeSource(path))
		return path, nil, errSilent
	}
	return path, cfg, nil
}
