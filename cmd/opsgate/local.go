package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/configs"
)

// The subcommands that work on local files and the store directly, without
// a running server: config check, migrate, audit verify.

// loadConfig resolves and loads the configuration in the order the README documents.
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

// warningLine prints a configuration warning as config check does:
// "file:line: path: warning: message".
func warningLine(file string, w config.Problem) string {
	var b strings.Builder
	b.WriteString(file)
	if w.Line > 0 {
		fmt.Fprintf(&b, ":%d", w.Line)
	}
	b.WriteString(": ")
	if w.Path != "" {
		b.WriteString(w.Path + ": ")
	}
	b.WriteString("warning: " + w.Message)
	return b.String()
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
func parseConfigFlag(name, about, help, hint string, args []string, stdout, stderr io.Writer) (string, error) {
	fs := newFlags(name, name+" [--config FILE]", about, stdout, stderr)
	cfgPath := fs.String("config", "", help)
	pos, err := fs.parse(args)
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
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, "usage: opsgate config check [--config FILE]\n\nsubcommands:\n  check   validate the configuration; print every problem with its file, line and YAML path\n")
		return nil
	}
	if len(args) == 0 || args[0] != "check" {
		return usagef("usage: opsgate config check [--config FILE]")
	}
	cfgPath, err := parseConfigFlag("config check", "Validates the configuration and prints every problem as file:line: path: message;\nexit status 1 if there is any. Exec tools whose command does not exist or is not\nexecutable are problems too.",
		"config file (default $OPSGATE_CONFIG, ./opsgate.yaml, built-in quickstart)",
		" (use --config FILE)", args[1:], stdout, stderr)
	if err != nil {
		return err
	}
	path, cfg, err := loadPrepared(cfgPath, stdout, false, nil)
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stdout, warningLine(describeSource(path), w))
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
// configuration file the server uses, reading only those two values: the
// rest may name secrets this shell does not have.
func clientDefaults(flagPath string) (listen, dataDir string, err error) {
	cs, err := config.ResolveClient(flagPath)
	if err != nil {
		return "", "", fmt.Errorf("read config %s: %w", describeSource(cs.Source), err)
	}
	return cs.Listen, cs.DataDir, nil
}

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfgPath, err := parseConfigFlag("migrate", "Applies the store's migrations and exits (serve migrates first too).", "config file", "", args, stdout, stderr)
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

// cmdAuditVerify is `opsgate audit verify`: it reads the store directly,
// unlike audit list and export (audit.go), which ask the server.
func cmdAuditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "audit verify [--config FILE] [--expect SEQ:HASH]"
	fs := newFlags("audit verify", usage, "Opens the store directly (the server may be down), walks the whole audit chain (keyed with\n"+
		"audit.key_file) and prints the first entry that does not link to the one before, and the chain's\n"+
		"head; exit status 1 if the chain is altered, or if --expect names an entry that is gone or changed.",
		stdout, stderr)
	cfgPath := fs.String("config", "", "config file naming the store and audit.key_file")
	expectFlag := fs.String("expect", "", "a head recorded earlier, SEQ:HASH: fail unless that entry is still in the chain, unchanged")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("audit verify takes no arguments")
	}
	var expect *expectedHead
	if *expectFlag != "" {
		if expect, err = parseExpect(*expectFlag); err != nil {
			return err
		}
	}
	_, cfg, st, err := openConfiguredStore(ctx, *cfgPath, stderr)
	if err != nil {
		return err
	}
	defer st.Close()
	key, err := loadAuditKey(cfg.Audit.KeyFile, false)
	missingKey := errors.Is(err, errAuditKeyMissing)
	if err != nil && !missingKey {
		return fmt.Errorf("audit verify: %w", err)
	}
	st.SetAuditKey(key)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	rep, err := st.AuditVerifyReport(ctx)
	if err != nil {
		return fmt.Errorf("audit verify: %w", err)
	}
	if missingKey && (rep.BadSeq != 0 || approvals.Keyed(rep.HeadHash)) {
		return fmt.Errorf("audit verify: the chain is keyed, and the key is not at %s (audit.key_file): copy the key the servers use, "+
			"or point audit.key_file at it", cfg.Audit.KeyFile)
	}
	// The head is printed either way: a chain cannot show that its newest
	// entries were removed, so operators compare it with the head they
	// recorded last time (--expect).
	head := fmt.Sprintf("head: seq %d, hash %s", rep.HeadSeq, rep.HeadHash)
	if rep.HeadSeq == 0 {
		head = "head: seq 0 (the audit log is empty)"
	}
	if rep.LegacyUntil > 0 {
		head += fmt.Sprintf("\nentries 1-%d were sealed before the chain had a key; the keyed entry after them protects them (this number never grows)", rep.LegacyUntil)
	}
	if !rep.Intact() {
		fmt.Fprintf(stdout, "ALTERED: audit %s\n%s\n", rep.Problem(), head)
		return errSilent
	}
	if expect != nil {
		if problem, err := expect.check(ctx, st); err != nil {
			return fmt.Errorf("audit verify: %w", err)
		} else if problem != "" {
			fmt.Fprintf(stdout, "ALTERED: audit %s\n%s\n", problem, head)
			return errSilent
		}
		head += fmt.Sprintf("\nexpected entry %d is in the chain, unchanged", expect.seq)
	}
	fmt.Fprintf(stdout, "OK: the audit chain is intact\n%s\n", head)
	return nil
}

// expectedHead is a chain head recorded elsewhere (--expect SEQ:HASH).
type expectedHead struct {
	seq  int64
	hash string
}

// parseExpect reads SEQ:HASH (the hash may itself hold a colon: "hmac:…").
func parseExpect(s string) (*expectedHead, error) {
	num, hash, ok := strings.Cut(s, ":")
	seq, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil || seq < 1 || hash == "" || num != strconv.FormatInt(seq, 10) {
		return nil, usagef("--expect %q: want SEQ:HASH as audit verify printed it (e.g. 42:hmac:9f86…)", s)
	}
	return &expectedHead{seq: seq, hash: hash}, nil
}

// check reports what is wrong with the recorded entry, "" when it is in
// the chain unchanged.
func (x *expectedHead) check(ctx context.Context, st store) (string, error) {
	es, err := st.AuditList(ctx, approvals.AuditListParams{After: x.seq - 1, Limit: 1})
	if err != nil {
		return "", err
	}
	switch {
	case len(es) == 0 || es[0].Seq != x.seq:
		return fmt.Sprintf("entry %d, recorded as a head, is no longer in the chain: the newest entries were removed", x.seq), nil
	case es[0].Hash != x.hash:
		return fmt.Sprintf("entry %d is not the one recorded (hash %s, recorded %s): the chain was rewritten", x.seq, es[0].Hash, x.hash), nil
	}
	return "", nil
}
