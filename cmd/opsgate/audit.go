package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/history"
	"github.com/opsgate/opsgate/internal/client"
)

// `opsgate audit …`: the audit log in words (list), exported (export), and
// verified against its hash chain (verify, in local.go, which reads the
// store itself).

// auditLookups bounds the approvals a page reads to name the calls its
// decisions were about.
const auditLookups = 100

// auditFilters are the filters list and export share.
type auditFilters struct {
	actor, tool, run, kind *string
}

func addAuditFilters(fs *flagSet) auditFilters {
	return auditFilters{
		actor: fs.String("actor", "", "only entries by this identity (slack:U1)"),
		tool:  fs.String("tool", "", "only entries about this tool"),
		run:   fs.String("run", "", "only entries of this run (its whole id)"),
		kind:  fs.String("kind", "", "only entries of this kind (approval.decided, run.cancelled, …)"),
	}
}

func (f auditFilters) query(q client.AuditQuery) client.AuditQuery {
	q.Actor, q.Tool, q.RunID, q.Kind = *f.actor, *f.tool, *f.run, *f.kind
	return q
}

func cmdAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	subs := []adminSub{
		{name: "list", summary: "the newest entries of the audit log, in words", wide: true,
			about: `Prints the newest audit entries, newest first, one sentence each:
  12  2026-03-04T12:00:00Z  alice (slack) rejected deploy env=prod service=api version=1.2.3: not during the freeze
-o wide adds the kind, actor, run and approval; -o json or yaml prints the API's entries.`,
			flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
				limit := fs.Int("limit", 50, "at most this many (up to 1000)")
				f := addAuditFilters(fs)
				return func(ctx context.Context, a *adminCall, _ []string) error {
					c, err := a.terminal()
					if err != nil {
						return err
					}
					entries, _, err := c.Audit(ctx, f.query(client.AuditQuery{Newest: true, Limit: *limit}))
					if err != nil {
						return fmt.Errorf("audit list: %w", err)
					}
					switch a.format() {
					case outputJSON, outputYAML:
						raw, err := json.Marshal(map[string]any{"items": entries})
						if err != nil {
							return fmt.Errorf("audit list: %w", err)
						}
						if a.format() == outputJSON {
							return printJSON(a.stdout, raw)
						}
						return printYAML(a.stdout, raw)
					}
					return printAudit(a.stdout, entries, client.AuditCalls(ctx, c.Approval, entries, auditLookups), a.format() == outputWide)
				}
			}},
		{name: "export", summary: "the whole log (or what the filters keep) as CSV or JSON Lines, oldest first",
			about: `Writes the audit log to stdout, oldest first, as CSV (a header row, then one row per
entry: seq, at, kind, actor, run_id, approval_id, tool, sentence, detail, prev_hash,
hash) or JSON Lines (one entry per line, with its "sentence"). --after SEQ starts after
an entry, to export only what is new since the last export.`,
			flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
				format := fs.String("format", history.FormatCSV, "csv or jsonl")
				after := fs.Int64("after", 0, "start after this entry (its seq)")
				f := addAuditFilters(fs)
				return func(ctx context.Context, a *adminCall, _ []string) error {
					x, err := history.NewExporter(a.stdout, *format)
					if err != nil {
						return usagef("--format %q: want csv or jsonl", *format)
					}
					if *after < 0 {
						return usagef("--after %d: want an entry's seq, 0 or more", *after)
					}
					c, err := a.terminal()
					if err != nil {
						return err
					}
					q := f.query(client.AuditQuery{Limit: 1000, Cursor: fmt.Sprint(*after)})
					for {
						entries, next, err := c.Audit(ctx, q)
						if err != nil {
							return fmt.Errorf("audit export: %w", err)
						}
						if err := x.Write(entries, client.AuditCalls(ctx, c.Approval, entries, auditLookups)); err != nil {
							return err
						}
						if next == "" {
							return x.Flush()
						}
						q.Cursor = next
					}
				}
			}},
		{name: "verify", args: "", summary: "walk the audit chain in the store; print the first altered entry and the head",
			local: cmdAuditVerify},
	}
	return runAdmin(ctx, "audit", "Read the audit log in words (list), export it (export) over the server's API, or check its\n"+
		"hash chain in the store itself (verify).", subs, args, stdout, stderr)
}

// printAudit prints entries one sentence each (wide: with their kind,
// actor, run and approval).
func printAudit(w io.Writer, entries []approvals.AuditEntry, calls history.Calls, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if wide {
		fmt.Fprintln(tw, "SEQ\tAT\tKIND\tACTOR\tRUN\tAPPROVAL\tWHAT HAPPENED")
	} else {
		fmt.Fprintln(tw, "SEQ\tAT\tWHAT HAPPENED")
	}
	for _, e := range entries {
		if wide {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, fmtTime(e.At), cell(string(e.Kind)), cell(e.Actor), cell(e.RunID),
				cell(e.ApprovalID), history.Sentence(e, calls))
		} else {
			fmt.Fprintf(tw, "%d\t%s\t%s\n", e.Seq, fmtTime(e.At), history.Sentence(e, calls))
		}
	}
	return tw.Flush()
}
