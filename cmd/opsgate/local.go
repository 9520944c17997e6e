package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/configs"
)

// The subcommands that work on local files and the store directly, without
// a running server: config check, migrate, audit verify.

// loadConfig resolves and loads the configuration as CONTRACT.md orders it.
// A *config.Error is printed one problem per line (file:line: path:
// message) to w and returned as errSilent, so the operator sees every
// problem at once without a second copy in the final error line.
func loadConfig(flagPath string, w io.Writer) (string, *config.Config, error) {
	path, cfg, err := config.Resolve(flagPath)
	if err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			fmt.Fprintln(w, ce.Error())
			fmt.Fprintf(w, "%d problem(s) in %s\n", len(ce.Problems), ce.File)
			return path, nil, errSilent
		}
		return path, nil, err
	}
	return path, cfg, nil
}

// describeSource names where the configuration came from, for logs and
// messages.
func describeSource(path string) string {
	if path == "" {
		return configs.QuickstartName
	}
	return path
}

// parseConfigFlag parses the one flag a local subcommand takes, --config
// (described by help), and refuses positional arguments, adding hint to
// the refusal.
func parseConfigFlag(name, help, hint string, args []string, stderr io.Writer) (string, error) {
	fs := newFlags(name, name+" [--config FILE]", stderr)
	cfgPath := fs.String("config", "", help)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) != 0 {
		return "", usagef("%s takes no arguments%s", name, hint)
	}
	return *cfgPath, nil
}

// openConfiguredStore loads the configuration (its problems printed to
// stderr) and opens the store it names, for the subcommands that work on
// the store without a server. The caller closes the store.
func openConfiguredStore(ctx context.Context, cfgPath string, stderr io.Writer) (string, *config.Config, store, error) {
	path, cfg, err := loadConfig(cfgPath, stderr)
	if err != nil {
		return path, nil, nil, err
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return path, cfg, nil, err
	}
	return path, cfg, st, nil
}

func cmdConfig(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		return usagef("usage: opsgate config check [--config FILE]")
	}
	cfgPath, err := parseConfigFlag("config check", "config file (default $OPSGATE_CONFIG, ./opsgate.yaml, built-in quickstart)",
		" (use --config FILE)", args[1:], stderr)
	if err != nil {
		return err
	}
	path, cfg, err := loadConfig(cfgPath, stdout)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: OK (store %s, %d tools, %d flows, %d policy rules)\n",
		describeSource(path), cfg.Store.Driver, len(cfg.Tools), len(cfg.Flows), len(cfg.Policy.Rules))
	if n := len(cfg.MCPServers); n > 0 {
		fmt.Fprintf(stdout, "%d mcp_servers: their tools are known once connected; list them with `opsgate mcp tools`\n", n)
	}
	return nil
}

// clientDefaults tells the admin client where the server listens and where
// its data directory (and generated admin token) is, from the same
// configuration the server uses.
func clientDefaults(flagPath string) (listen, dataDir string, err error) {
	path, cfg, err := config.Resolve(flagPath)
	if err != nil {
		return "", "", fmt.Errorf("load config %s: %w", describeSource(path), err)
	}
	return cfg.Server.Listen, cfg.Server.DataDir, nil
}

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfgPath, err := parseConfigFlag("migrate", "config file", "", args, stderr)
	if err != nil {
		return err
	}
	path, cfg, st, err := openConfiguredStore(ctx, cfgPath, stderr)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate %s store (config %s): %w", cfg.Store.Driver, describeSource(path), err)
	}
	fmt.Fprintf(stdout, "%s store migrated (%s)\n", cfg.Store.Driver, redactDSN(cfg.Store.DSN))
	return nil
}

func cmdAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "verify" {
		return usagef("usage: opsgate audit verify [--config FILE]")
	}
	cfgPath, err := parseConfigFlag("audit verify", "config file naming the store", "", args[1:], stderr)
	if err != nil {
		return err
	}
	_, _, st, err := openConfiguredStore(ctx, cfgPath, stderr)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	rep, err := st.AuditVerifyReport(ctx)
	if err != nil {
		return fmt.Errorf("audit verify: %w", err)
	}
	// The head is printed either way: a chain cannot show that its newest
	// entries were removed, so operators compare it with the head they
	// recorded last time.
	head := fmt.Sprintf("head: seq %d, hash %s", rep.HeadSeq, rep.HeadHash)
	if rep.HeadSeq == 0 {
		head = "head: seq 0 (the audit log is empty)"
	}
	if !rep.Intact() {
		fmt.Fprintf(stdout, "ALTERED: audit %s\n%s\n", rep.Problem(), head)
		return errSilent
	}
	fmt.Fprintf(stdout, "OK: the audit chain is intact\n%s\n", head)
	return nil
}
