package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// The admin subcommands: thin, scriptable wrappers over /api/v1. Lists print
// a table, show prints a readable summary; --json prints the API's answer
// unchanged for scripts.

// adminCmd is what the admin subcommands share: the subcommand word, its
// flags (the connection flags, --limit and --json among them), and where
// the answer goes.
type adminCmd struct {
	sub    string
	rest   []string
	fs     *flag.FlagSet
	client clientFlags
	limit  *int
	asJSON *bool
	stdout io.Writer
}

// newAdminCmd splits off the subcommand of `opsgate <name>` and declares the
// flags every admin subcommand takes; the caller adds its own and parses.
func newAdminCmd(name, usage string, args []string, stdout, stderr io.Writer) (*adminCmd, error) {
	if len(args) == 0 {
		return nil, usagef("usage: opsgate %s", usage)
	}
	fs := newFlags(name+" "+args[0], usage, stderr)
	return &adminCmd{
		sub:    args[0],
		rest:   args[1:],
		fs:     fs,
		client: addClientFlags(fs),
		limit:  fs.Int("limit", 50, "list: at most this many"),
		asJSON: fs.Bool("json", false, "print the API's JSON answer"),
		stdout: stdout,
	}, nil
}

// parse parses the flags and returns the positional arguments.
func (a *adminCmd) parse() ([]string, error) { return parseInterleaved(a.fs, a.rest) }

// call connects, makes one API request and, with --json, prints the
// answer as it came (done is then true); otherwise it decodes the answer
// into out for the caller to render. what prefixes errors. An error always
// comes with done.
func (a *adminCmd) call(ctx context.Context, what, method, path string, q url.Values, body, out any) (done bool, err error) {
	c, err := newClient(a.client)
	if err != nil {
		return true, err
	}
	var raw json.RawMessage
	if err := c.do(ctx, method, path, q, body, &raw); err != nil {
		return true, fmt.Errorf("%s: %w", what, err)
	}
	if *a.asJSON {
		return true, printJSON(a.stdout, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return true, fmt.Errorf("%s: decode: %w", what, err)
	}
	return false, nil
}

func cmdApprovals(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "approvals list|show ID|approve ID [--scope call|session|forever] [--pattern JSON]|reject ID [--reason R]|edit ID --args JSON"
	cmd, err := newAdminCmd("approvals", usage, args, stdout, stderr)
	if err != nil {
		return err
	}
	sub := cmd.sub
	status := cmd.fs.String("status", "pending", "list: approval status to show (pending, approved, rejected, edited, expired, all)")
	reason := cmd.fs.String("reason", "", "approve/reject/edit: why (a reject's reason is returned to the run)")
	scope := cmd.fs.String("scope", "call", "approve/edit: call; session (later calls of the same rule by the same requester in the thread, "+
		"for approvals.session_ttl); or forever (a stored allow rule for these exact arguments, or --pattern)")
	pattern := cmd.fs.String("pattern", "", "with --scope forever: per-argument globs to save instead of the exact arguments, as a JSON object naming every argument")
	argsJSON := cmd.fs.String("args", "", "edit: the new arguments as a JSON object (replaces the proposed ones)")
	pos, err := cmd.parse()
	if err != nil {
		return err
	}

	switch sub {
	case "list":
		if len(pos) != 0 {
			return usagef("approvals list takes no arguments")
		}
		q := url.Values{"limit": {strconv.Itoa(*cmd.limit)}}
		if *status != "all" && *status != "" {
			q.Set("status", *status)
		}
		var page struct {
			Items []approvals.Approval `json:"items"`
		}
		if done, err := cmd.call(ctx, "approvals list", "GET", "/api/v1/approvals", q, nil, &page); done {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATUS\tTOOL\tRISK\tREQUESTER\tTHREAD\tCREATED\tEXPIRES")
		for _, a := range page.Items {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Status, a.Tool, a.Risk, a.Requester,
				a.Thread, fmtTime(a.CreatedAt), fmtTime(a.ExpiresAt))
		}
		return tw.Flush()

	case "show", "approve", "reject", "edit":
		if len(pos) != 1 {
			return usagef("usage: opsgate approvals %s ID", sub)
		}
		id := pos[0]
		var body map[string]any
		switch sub {
		case "approve", "reject", "edit":
			if *scope != "call" && *scope != "session" && *scope != "forever" {
				return usagef("--scope %q: want call, session or forever", *scope)
			}
			body = map[string]any{"action": sub, "reason": *reason, "scope": *scope}
			if *pattern != "" {
				var p map[string]string
				if *scope != "forever" || sub == "reject" {
					return usagef("--pattern goes with --scope forever on approve or edit")
				}
				if err := json.Unmarshal([]byte(*pattern), &p); err != nil || p == nil {
					return usagef("--pattern: want a JSON object of globs like '{\"service\":\"api\",\"version\":\"1.2.*\"}': %v", errOrNull(err))
				}
				body["pattern"] = p
			}
			if sub == "edit" {
				if *argsJSON == "" {
					return usagef("approvals edit needs --args JSON (a JSON object of the new arguments)")
				}
				var a map[string]any
				if err := json.Unmarshal([]byte(*argsJSON), &a); err != nil || a == nil {
					return usagef("--args: want a JSON object like '{\"version\":\"1.2.4\"}': %v", errOrNull(err))
				}
				body["args"] = a
			} else if *argsJSON != "" {
				return usagef("--args is only for approvals edit")
			}
		}
		method, path, reqBody := "GET", "/api/v1/approvals/"+url.PathEscape(id), any(nil)
		if body != nil { // a decision; a nil map in reqBody would be sent as null
			method, path, reqBody = "POST", path+"/decision", body
		}
		var a approvals.Approval
		if done, err := cmd.call(ctx, fmt.Sprintf("approvals %s %s", sub, id), method, path, nil, reqBody, &a); done {
			return err
		}
		if sub != "show" {
			fmt.Fprintf(stdout, "approval %s is now %s (run %s)\n", a.ID, a.Status, a.RunID)
			if a.Status == approvals.StatusPending && a.Quorum > 1 {
				fmt.Fprintf(stdout, "%d of %d approvals so far\n", a.CountedApprovals(), a.Quorum)
			}
			return nil
		}
		printApproval(stdout, &a)
		return nil
	default:
		return usagef("unknown approvals subcommand %q; usage: opsgate %s", sub, usage)
	}
}

// grantView is a grant as GET /api/v1/grants returns it.
type grantView struct {
	ID         string            `json:"id"`
	Scope      string            `json:"scope"`
	Tool       string            `json:"tool"`
	Thread     string            `json:"thread"`
	Requester  string            `json:"requester"`
	Args       map[string]any    `json:"args"`
	Pattern    map[string]string `json:"pattern"`
	ApprovalID string            `json:"approval_id"`
	GrantedBy  string            `json:"granted_by"`
	CreatedAt  time.Time         `json:"created_at"`
	ExpiresAt  *time.Time        `json:"expires_at"`
	RevokedAt  *time.Time        `json:"revoked_at"`
	RevokedBy  string            `json:"revoked_by"`
	Active     bool              `json:"active"`
}

func cmdGrants(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "grants list [--all] [--json] | revoke ID"
	cmd, err := newAdminCmd("grants", usage, args, stdout, stderr)
	if err != nil {
		return err
	}
	all := cmd.fs.Bool("all", false, "list: revoked and expired grants too")
	pos, err := cmd.parse()
	if err != nil {
		return err
	}
	switch cmd.sub {
	case "list":
		if len(pos) != 0 {
			return usagef("grants list takes no arguments")
		}
		q := url.Values{"limit": {strconv.Itoa(*cmd.limit)}}
		if *all {
			q.Set("status", "all")
		}
		var page struct {
			Items []grantView `json:"items"`
		}
		if done, err := cmd.call(ctx, "grants list", "GET", "/api/v1/grants", q, nil, &page); done {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSCOPE\tTOOL\tCOVERS\tFOR\tGRANTED BY\tCREATED\tENDS")
		for _, g := range page.Items {
			covers := "rule of approval " + g.ApprovalID
			switch {
			case g.Pattern != nil:
				b, _ := json.Marshal(g.Pattern)
				covers = "pattern " + string(b)
			case g.Args != nil:
				covers = "exactly " + compact(g.Args)
			}
			who := "anyone"
			if g.Requester != "" {
				who = g.Requester + " in " + g.Thread
			}
			ends := "when revoked"
			switch {
			case g.RevokedAt != nil:
				ends = "revoked " + fmtTime(*g.RevokedAt) + " by " + g.RevokedBy
			case g.ExpiresAt != nil:
				ends = fmtTime(*g.ExpiresAt)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.ID, g.Scope, g.Tool, covers, who, g.GrantedBy, fmtTime(g.CreatedAt), ends)
		}
		return tw.Flush()
	case "revoke":
		if len(pos) != 1 {
			return usagef("usage: opsgate grants revoke ID")
		}
		var g grantView
		if done, err := cmd.call(ctx, "grants revoke "+pos[0], "DELETE", "/api/v1/grants/"+url.PathEscape(pos[0]), nil, nil, &g); done {
			return err
		}
		fmt.Fprintf(stdout, "grant %s (%s, %s) is revoked\n", g.ID, g.Scope, g.Tool)
		return nil
	default:
		return usagef("unknown grants subcommand %q; usage: opsgate %s", cmd.sub, usage)
	}
}

func cmdRuns(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "runs list|show ID|cancel ID"
	cmd, err := newAdminCmd("runs", usage, args, stdout, stderr)
	if err != nil {
		return err
	}
	sub := cmd.sub
	status := cmd.fs.String("status", "", "list: only runs in this status")
	pos, err := cmd.parse()
	if err != nil {
		return err
	}
	switch sub {
	case "list":
		if len(pos) != 0 {
			return usagef("runs list takes no arguments")
		}
		q := url.Values{"limit": {strconv.Itoa(*cmd.limit)}}
		if *status != "" {
			q.Set("status", *status)
		}
		var page struct {
			Items []core.Run `json:"items"`
		}
		if done, err := cmd.call(ctx, "runs list", "GET", "/api/v1/runs", q, nil, &page); done {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATUS\tFLOW\tTHREAD\tREQUESTER\tCREATED\tUPDATED")
		for _, r := range page.Items {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, r.Flow, r.Thread, r.Requester,
				fmtTime(r.CreatedAt), fmtTime(r.UpdatedAt))
		}
		return tw.Flush()
	case "show", "cancel":
		if len(pos) != 1 {
			return usagef("usage: opsgate runs %s ID", sub)
		}
		id := pos[0]
		method, path, body := "GET", "/api/v1/runs/"+url.PathEscape(id), any(nil)
		if sub == "cancel" {
			method, path, body = "POST", path+"/cancel", map[string]any{}
		}
		var r core.Run
		if done, err := cmd.call(ctx, fmt.Sprintf("runs %s %s", sub, id), method, path, nil, body, &r); done {
			return err
		}
		if sub == "cancel" {
			fmt.Fprintf(stdout, "run %s is now %s\n", r.ID, r.Status)
			return nil
		}
		printRun(stdout, &r)
		return nil
	default:
		return usagef("unknown runs subcommand %q; usage: opsgate %s", sub, usage)
	}
}

func printApproval(w io.Writer, a *approvals.Approval) {
	fmt.Fprintf(w, "approval  %s\nstatus    %s\ntool      %s (risk %s%s)\nrun       %s\nthread    %s\nrequester %s\n",
		a.ID, a.Status, a.Tool, a.Risk, map[bool]string{true: ", destructive"}[a.Destructive], a.RunID, a.Thread, a.Requester)
	fmt.Fprintf(w, "approvers %s (quorum %d)\ncreated   %s\nexpires   %s\n", strings.Join(a.Approvers, ", "), a.Quorum,
		fmtTime(a.CreatedAt), fmtTime(a.ExpiresAt))
	if a.Reason != "" {
		fmt.Fprintf(w, "reason    %s\n", a.Reason)
	}
	fmt.Fprintf(w, "proposed  %s\n", compact(a.ProposedArgs))
	if a.ApprovedArgs != nil {
		fmt.Fprintf(w, "approved  %s\n", compact(a.ApprovedArgs))
	}
	if a.ExecutedArgs != nil {
		fmt.Fprintf(w, "executed  %s\n", compact(a.ExecutedArgs))
	}
	if a.Preview != "" {
		fmt.Fprintf(w, "dry run:\n%s\n", indent(a.Preview))
	}
	for _, d := range a.Decisions {
		line := fmt.Sprintf("decision  %s by %s via %s at %s", d.Action, d.Actor, d.Channel, fmtTime(d.At))
		if d.Reason != "" {
			line += ": " + d.Reason
		}
		if d.Superseded {
			line += " (superseded by an edit)"
		}
		fmt.Fprintln(w, line)
	}
}

func printRun(w io.Writer, r *core.Run) {
	fmt.Fprintf(w, "run       %s\nstatus    %s\nflow      %s\nthread    %s\nrequester %s\ncreated   %s\nupdated   %s\n",
		r.ID, r.Status, r.Flow, r.Thread, r.Requester, fmtTime(r.CreatedAt), fmtTime(r.UpdatedAt))
	if len(r.Args) > 0 {
		fmt.Fprintf(w, "args      %s\n", compact(r.Args))
	}
	if r.ErrorCode != "" || r.ErrorMessage != "" {
		fmt.Fprintf(w, "error     %s: %s\n", r.ErrorCode, r.ErrorMessage)
	}
	for _, s := range r.Steps {
		fmt.Fprintf(w, "\nstep %d    %s: %s\n", s.Index, s.Tool, s.Status)
		fmt.Fprintf(w, "  args    %s\n", compact(s.Args))
		if s.ApprovalID != "" {
			fmt.Fprintf(w, "  approval %s\n", s.ApprovalID)
		}
		if s.Error != "" {
			fmt.Fprintf(w, "  error   %s\n", s.Error)
		}
		if s.Output != "" {
			fmt.Fprintf(w, "  output:\n%s\n", indent(s.Output))
		}
	}
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
