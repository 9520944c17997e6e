package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core/tools"
	"github.com/opsgate/opsgate/core/upstream"
)

// upstreamServers maps mcp_servers onto the registry's servers. Stdio
// servers run in the config file's directory, like exec tools.
func upstreamServers(cfg *config.Config) []upstream.Server {
	dir := toolDir(cfg)
	var out []upstream.Server
	for i := range cfg.MCPServers {
		s := &cfg.MCPServers[i]
		us := upstream.Server{
			Name: s.Name, Env: s.Env, Dir: dir, Headers: s.Headers, Tools: s.Tools,
			ConnectTimeout: s.ConnectTimeout.D(), CallTimeout: s.Timeout.D(), RefreshInterval: s.RefreshInterval.D(),
			MaxOutput: int64(s.MaxOutput), Secrets: s.Secrets(), Required: s.Required,
		}
		if s.Transport == upstream.TransportHTTP {
			us.URL = s.URL
		} else {
			us.Command = s.Command
		}
		if len(s.Overrides) > 0 {
			us.Overrides = map[string]upstream.Override{}
			for name, o := range s.Overrides {
				us.Overrides[name] = upstream.Override{Risk: approvals.Risk(o.Risk), Destructive: o.Destructive, Idempotent: o.Idempotent,
					Description: o.Description}
			}
		}
		out = append(out, us)
	}
	return out
}

// buildUpstream builds the registry of upstream MCP servers, or returns
// nil when none is configured. The caller starts and closes it.
func buildUpstream(cfg *config.Config, log *slog.Logger) (*upstream.Registry, error) {
	if len(cfg.MCPServers) == 0 {
		return nil, nil
	}
	r, err := upstream.New(upstreamServers(cfg), log)
	if err != nil {
		return nil, fmt.Errorf("mcp_servers: %w", err)
	}
	return r, nil
}

// toolLookup is r as a tools.ToolLookup, nil (not a typed nil) without
// servers.
func toolLookup(r *upstream.Registry) tools.ToolLookup {
	if r == nil {
		return nil
	}
	return r
}

// cmdMCP is `opsgate mcp tools`: connect to every configured upstream
// server (nothing else: no store, no listener), list what each offers as
// opsgate will treat it, and exit 1 when a server cannot be reached.
func cmdMCP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, "usage: opsgate mcp tools [--config FILE] [--json]\n\nsubcommands:\n  tools   connect to each mcp_servers entry and list its tools as opsgate treats them\n")
		return nil
	}
	if len(args) == 0 || args[0] != "tools" {
		return usagef("usage: opsgate mcp tools [--config FILE] [--json]")
	}
	fs := newFlags("mcp tools", "mcp tools [--config FILE] [--json]",
		"Connects to each mcp_servers entry only and lists its tools as opsgate treats them; exit status 1 if one is unreachable.",
		stdout, stderr)
	cfgPath := fs.String("config", "", "config file (default $OPSGATE_CONFIG, ./opsgate.yaml, built-in quickstart)")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := fs.parse(args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("mcp tools takes no arguments (use --config FILE)")
	}
	path, cfg, err := loadConfig(*cfgPath, stderr)
	if err != nil {
		return err
	}
	if len(cfg.MCPServers) == 0 {
		fmt.Fprintf(stdout, "%s: no mcp_servers configured\n", describeSource(path))
		return nil
	}
	// The listing says what failed and why; retries meanwhile are noise.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	r, err := buildUpstream(cfg, log)
	if err != nil {
		return err
	}
	wait := time.Duration(0)
	for _, s := range cfg.MCPServers {
		wait = max(wait, s.ConnectTimeout.D())
	}
	r.Start(ctx)
	rctx, cancel := context.WithTimeout(ctx, wait+5*time.Second)
	reports := r.Reports(rctx)
	cancel()
	_ = r.Close()
	if *asJSON {
		err = printReportsJSON(stdout, reports)
	} else {
		err = printReports(stdout, reports)
	}
	if err != nil {
		return err
	}
	for _, rep := range reports {
		if !rep.Listed {
			return errSilent
		}
	}
	return nil
}

func printReports(w io.Writer, reports []upstream.Report) error {
	for i, rep := range reports {
		if i > 0 {
			fmt.Fprintln(w)
		}
		offered := 0
		for _, t := range rep.Tools {
			if t.Offered {
				offered++
			}
		}
		if !rep.Listed {
			fmt.Fprintf(w, "%s (%s): unavailable: %s\n", rep.Name, rep.Target, rep.Err)
			continue
		}
		fmt.Fprintf(w, "%s (%s): %d tools, %d offered\n", rep.Name, rep.Target, len(rep.Tools), offered)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  TOOL\tRISK\tTREATED AS\tARGUMENTS (* required)")
		for _, t := range rep.Tools {
			if !t.Offered {
				why := t.Problem
				if t.Excluded {
					why = "left out by tools globs"
				}
				fmt.Fprintf(tw, "  %s\t-\tnot offered: %s\t\n", t.Name, why)
				continue
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", t.Name, t.Risk, flags(t), upstream.SchemaSummary(t.Schema))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// flags renders how opsgate treats a tool: destructive, idempotent, and
// which of them (and risk) the configuration overrode.
func flags(t upstream.ToolInfo) string {
	var f []string
	if t.Destructive {
		f = append(f, "destructive")
	}
	if t.Idempotent {
		f = append(f, "idempotent")
	}
	if len(f) == 0 {
		f = append(f, "-")
	}
	if len(t.Overridden) > 0 {
		f = append(f, "(override: "+strings.Join(t.Overridden, ", ")+")")
	}
	return strings.Join(f, " ")
}

func printReportsJSON(w io.Writer, reports []upstream.Report) error {
	type toolView struct {
		Name        string         `json:"name"`
		Remote      string         `json:"remote"`
		Description string         `json:"description,omitempty"`
		Offered     bool           `json:"offered"`
		Problem     string         `json:"problem,omitempty"`
		Risk        string         `json:"risk"`
		Destructive bool           `json:"destructive"`
		Idempotent  bool           `json:"idempotent"`
		Overridden  []string       `json:"overridden,omitempty"`
		InputSchema map[string]any `json:"input_schema,omitempty"`
	}
	type serverView struct {
		Name      string     `json:"name"`
		Transport string     `json:"transport"`
		Target    string     `json:"target"`
		Connected bool       `json:"connected"`
		Error     string     `json:"error,omitempty"`
		Tools     []toolView `json:"tools"`
	}
	out := []serverView{}
	for _, rep := range reports {
		sv := serverView{Name: rep.Name, Transport: rep.Transport, Target: rep.Target, Connected: rep.Connected, Tools: []toolView{}}
		if !rep.Listed {
			sv.Error = rep.Err
		}
		for _, t := range rep.Tools {
			problem := t.Problem
			if t.Excluded {
				problem = "left out by tools globs"
			}
			sv.Tools = append(sv.Tools, toolView{Name: t.Name, Remote: t.Remote, Description: t.Description, Offered: t.Offered,
				Problem: problem, Risk: string(t.Risk), Destructive: t.Destructive, Idempotent: t.Idempotent, Overridden: t.Overridden, InputSchema: t.Schema})
		}
		out = append(out, sv)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
