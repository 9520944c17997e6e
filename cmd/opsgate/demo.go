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
				c.abs = c.arg
				if !filepath.IsAbs(c.abs) {
					c.abs = filepath.Join(dir, c.abs)
				}
				if a, err := filepath.Abs(c.abs); err == nil {
					c.abs = a
				}
			}
			out = append(out, c)
		}
	}
	return out
}

// demoDir is where serve installs the demo scripts for cfg.
func demoDir(cfg *config.Config) string {
	d, err := filepath.Abs(filepath.Join(cfg.Server.DataDir, configs.DemoDir))
	if err != nil {
		return filepath.Join(cfg.Server.DataDir, configs.DemoDir)
	}
	return d
}

// isDemoScript reports whether abs is where serve installs an embedded
// demo script for cfg.
func isDemoScript(cfg *config.Config, abs string) bool {
	if abs == "" || filepath.Dir(abs) != demoDir(cfg) {
		return false
	}
	_, err := fs.Stat(configs.Demo, path.Join(configs.DemoDir, filepath.Base(abs)))
	return err == nil
}

// installDemo writes the embedded demo scripts into <data_dir>/demo/ when
// a configured exec tool runs one from there, and does nothing otherwise
// (a production config never gets a demo directory). A script already
// there with the same content is left alone.
func installDemo(cfg *config.Config, log *slog.Logger) error {
	needed := false
	for _, c := range execCommands(cfg) {
		needed = needed || isDemoScript(cfg, c.abs)
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
		if isDemoScript(cfg, c.abs) {
			continue
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

// reportExecProblems prints exec command problems like the loader's own
// and returns errSilent when there is any.
func reportExecProblems(w io.Writer, source string, cfg *config.Config) error {
	ps := checkExecCommands(cfg)
	if len(ps) == 0 {
		return nil
	}
	fmt.Fprintln(w, (&config.Error{File: describeSource(source), Problems: ps}).Error())
	fmt.Fprintf(w, "%d problem(s) in %s\n", len(ps), describeSource(source))
	return errSilent
}
