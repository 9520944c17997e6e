package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// adminSub is one admin subcommand: its synopsis and description for
// --help, the flags it takes beyond the connection flags, and what it
// does. flags declares them on fs and returns the function to run.
type adminSub struct {
	name, args, summary, about string
	flags                      func(fs *flagSet) func(ctx context.Context, a *adminCall, pos []string) error
}

// adminCall is what a running admin subcommand has: the connection flags,
// --json, and where the answer goes.
type adminCall struct {
	client clientFlags
	asJSON *bool
	stdout io.Writer
	stderr io.Writer
	c      *apiClient
}

// api connects on first use.
func (a *adminCall) api() (*apiClient, error) {
	if a.c == nil {
		c, err := newClient(a.client)
		if err != nil {
			return nil, err
		}
		a.c = c
	}
	return a.c, nil
}

// call makes one API request and, with --json, prints the answer as it
// came (done is then true); otherwise it decodes the answer into out for
// the caller to render. what prefixes errors. An error always comes with
// done.
func (a *adminCall) call(ctx context.Context, what, method, path string, q url.Values, body, out any) (done bool, err error) {
	c, err := a.api()
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

// runAdmin dispatches `opsgate <group> <sub> …` over subs: the group's
// --help lists the subcommands, each subcommand's --help its own flags.
func runAdmin(ctx context.Context, group, about string, subs []adminSub, args []string, stdout, stderr io.Writer) error {
	groupHelp := func(w io.Writer) {
		fmt.Fprintf(w, "usage: opsgate %s <subcommand> [flags]\n\n%s\n\nsubcommands:\n", group, about)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, s := range subs {
			fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(s.name+" "+s.args), s.summary)
		}
		_ = tw.Flush()
		fmt.Fprintf(w, "\nRun `opsgate %s <subcommand> --help` for its flags.\n", group)
	}
	if len(args) == 0 {
		var b strings.Builder
		groupHelp(&b)
		return usagef("%s needs a subcommand\n%s", group, strings.TrimRight(b.String(), "\n"))
	}
	if isHelp(args[0]) {
		groupHelp(stdout)
		return nil
	}
	var sub *adminSub
	var names []string
	for i := range subs {
		names = append(names, subs[i].name)
		if subs[i].name == args[0] {
			sub = &subs[i]
		}
	}
	if sub == nil {
		return usagef("unknown %s subcommand %q: want one of %s (see `opsgate %s --help`)", group, args[0], strings.Join(names, ", "), group)
	}
	synopsis := strings.Join(strings.Fields(group+" "+sub.name+" "+sub.args+" [flags]"), " ")
	fs := newFlags(group+" "+sub.name, synopsis, sub.about, stdout, stderr)
	a := &adminCall{stdout: stdout, stderr: stderr}
	do := sub.flags(fs)
	a.asJSON = fs.Bool("json", false, "print the API's JSON answer unchanged")
	a.client = addClientFlags(fs)
	pos, err := fs.parse(args[1:])
	if err != nil {
		return err
	}
	want := 0
	if sub.args != "" {
		want = len(strings.Fields(sub.args))
	}
	if len(pos) != want {
		if want == 0 {
			return usagef("%s %s takes no arguments; usage: opsgate %s", group, sub.name, synopsis)
		}
		return usagef("usage: opsgate %s", synopsis)
	}
	return do(ctx, a, pos)
}

const idNote = "\nID may be any unique prefix of the id, as with git (opsgate %s %s 0199c3a4)."

func cmdApprovals(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	decide := func(action string) func(fs *flagSet) func(context.Context, *adminCall, []string) error {
		return func(fs *flagSet) func(context.Context, *adminCall, []string) error {
			reasonHelp := "why; recorded with the decision"
			if action == "reject" {
				reasonHelp = "why; returned to the run as the step's output, and shown to the requester"
			}
			reason := fs.String("reason", "", reasonHelp)
			var scope, argsJSON, pattern *string
			if action != "reject" {
				scope = fs.String("scope", "call", "call; session (later calls of the same rule by the same requester in the thread, "+
					"for approvals.session_ttl); or forever (a stored allow rule for these exact arguments, or --pattern)")
				pattern = fs.String("pattern", "", "with --scope forever: per-argument globs to save instead of the exact arguments, "+
					"as a JSON object naming every argument")
			}
			if action == "edit" {
				argsJSON = fs.String("args", "", "the new arguments as one JSON object; it replaces the proposed ones as a whole (required)")
			}
			return func(ctx context.Context, a *adminCall, pos []string) error {
				// Bad usage is reported before the server is asked anything.
				body := map[string]any{"action": action, "reason": *reason}
				if scope != nil {
					if !approvals.Scope(*scope).Valid() {
						return usagef("--scope %q: want call, session or forever", *scope)
					}
					body["scope"] = *scope
				}
				if pattern != nil && *pattern != "" {
					if *scope != "forever" {
						return usagef("--pattern goes with --scope forever")
					}
					var p map[string]string
					if err := json.Unmarshal([]byte(*pattern), &p); err != nil || p == nil {
						return usagef("--pattern: want a JSON object of globs like '{\"service\":\"api\",\"version\":\"1.2.*\"}': %v", errOrNull(err))
					}
					body["pattern"] = p
				}
				if action == "edit" {
					args, err := parseArgsFlag(*argsJSON)
					if err != nil {
						return usagef("%v\n%s", err, a.editHint(ctx, pos[0]))
					}
					body["args"] = args
				}
				id, err := a.resolveID(ctx, "approval", pos[0])
				if err != nil {
					return err
				}
				var ap approvals.Approval
				if done, err := a.call(ctx, fmt.Sprintf("approvals %s %s", action, id), "POST",
					"/api/v1/approvals/"+url.PathEscape(id)+"/decision", nil, body, &ap); done {
					return err
				}
				fmt.Fprintf(a.stdout, "approval %s is now %s (run %s)\n", ap.ID, ap.Status, ap.RunID)
				if ap.Status == approvals.StatusPending && ap.Quorum > 1 {
					fmt.Fprintf(a.stdout, "%d of %d approvals so far\n", ap.CountedApprovals(), ap.Quorum)
				}
				return nil
			}
		}
	}
	subs := []adminSub{
		{name: "list", summary: "approvals waiting for a decision (or --status S)",
			about: "Lists approvals, newest first: pending ones unless --status says otherwise.",
			flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
				status := fs.String("status", "pending", "pending, approved, rejected, edited, expired, or all")
				limit := fs.Int("limit", 50, "at most this many")
				return func(ctx context.Context, a *adminCall, _ []string) error {
					q := url.Values{"limit": {strconv.Itoa(*limit)}}
					if *status != "all" && *status != "" {
						q.Set("status", *status)
					}
					var page struct {
						Items []approvals.Approval `json:"items"`
					}
					if done, err := a.call(ctx, "approvals list", "GET", "/api/v1/approvals", q, nil, &page); done {
						return err
					}
					tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "ID\tSTATUS\tTOOL\tRISK\tREQUESTER\tTHREAD\tCREATED\tEXPIRES")
					for _, ap := range page.Items {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ap.ID, ap.Status, ap.Tool, ap.Risk, ap.Requester,
							ap.Thread, fmtTime(ap.CreatedAt), fmtTime(ap.ExpiresAt))
					}
					return tw.Flush()
				}
			}},
		{name: "show", args: "ID", summary: "one approval: tool, arguments, reason, risk, dry run, decisions",
			about: fmt.Sprintf(idNote, "approvals", "show"),
			flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
				return func(ctx context.Context, a *adminCall, pos []string) error {
					id, err := a.resolveID(ctx, "approval", pos[0])
					if err != nil {
						return err
					}
					var ap approvals.Approval
					if done, err := a.call(ctx, "approvals show "+id, "GET", "/api/v1/approvals/"+url.PathEscape(id), nil, nil, &ap); done {
						return err
					}
					printApproval(a.stdout, &ap)
					return nil
				}
			}},
		{name: "approve", args: "ID", summary: "approve the call as proposed",
			about: "Approves the call with its proposed arguments." + fmt.Sprintf(idNote, "approvals", "approve"), flags: decide("approve")},
		{name: "reject", args: "ID", summary: "reject the call; --reason goes back to the requester",
			about: "Rejects the call; the run ends rejected." + fmt.Sprintf(idNote, "approvals", "reject"), flags: decide("reject")},
		{name: "edit", args: "ID", summary: "approve with new arguments (--args JSON)",
			about: "Approves the call with new arguments: --args is the whole new object (omitted keys take the\n" +
				"schema's default), validated and re-checked by the policy." + fmt.Sprintf(idNote, "approvals", "edit"),
			flags: decide("edit")},
		approvalsDelegateSub(),
		approvalsReceiptSub(),
		watchSub(),
		waitSub(),
	}
	return runAdmin(ctx, "approvals", "Decide the calls that wait for a human, over the server's API.", subs, args, stdout, stderr)
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
	subs := []adminSub{
		{name: "list", summary: "session and forever grants in force (or --all)",
			about: "Lists grants, newest first: what each covers, for whom, who granted it, when it ends.",
			flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
				all := fs.Bool("all", false, "revoked and expired grants too")
				limit := fs.Int("limit", 50, "at most this many")
				return func(ctx context.Context, a *adminCall, _ []string) error {
					q := url.Values{"limit": {strconv.Itoa(*limit)}}
					if *all {
						q.Set("status", "all")
					}
					var page struct {
						Items []grantView `json:"items"`
					}
					if done, err := a.call(ctx, "grants list", "GET", "/api/v1/grants", q, nil, &page); done {
						return err
					}
					tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
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
				}
			}},
		{name: "revoke", args: "ID", summary: "revoke a grant (audited)",
			about: "Revokes the grant: the calls it covered ask again. Needs scope decide or admin.",
			flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
				return func(ctx context.Context, a *adminCall, pos []string) error {
					var g grantView
					if done, err := a.call(ctx, "grants revoke "+pos[0], "DELETE", "/api/v1/grants/"+url.PathEscape(pos[0]), nil, nil, &g); done {
						return err
					}
					fmt.Fprintf(a.stdout, "grant %s (%s, %s) is revoked\n", g.ID, g.Scope, g.Tool)
					return nil
				}
			}},
	}
	return runAdmin(ctx, "grants", "List and revoke session and forever grants, over the server's API.", subs, args, stdout, stderr)
}

// parseArgsFlag reads --args: one JSON object.
func parseArgsFlag(s string) (map[string]any, error) {
	if s == "" {
		return nil, errors.New("approvals edit needs --args: the whole new argument object as JSON")
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil || m == nil {
		return nil, fmt.Errorf("--args: want one JSON object: %v", errOrNull(err))
	}
	return m, nil
}

// editHint shows an --args that validates: the approval's own proposed
// arguments, ready to change, or a generic example when the server cannot
// be asked.
func (a *adminCall) editHint(ctx context.Context, arg string) string {
	generic := fmt.Sprintf("example: opsgate approvals edit %s --args '{\"service\":\"api\",\"version\":\"1.2.4\",\"env\":\"staging\"}'", arg)
	c, err := a.api()
	if err != nil {
		return generic
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	id, err := a.resolveID(ctx, "approval", arg)
	if err != nil {
		return generic
	}
	var ap approvals.Approval
	if err := c.do(ctx, "GET", "/api/v1/approvals/"+url.PathEscape(id), nil, nil, &ap); err != nil {
		return generic
	}
	return fmt.Sprintf("its arguments now (edit and pass them all):\n  opsgate approvals edit %s --args %s", id, shellQuote(compact(ap.ProposedArgs)))
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func cmdRuns(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	subs := []adminSub{
		{name: "list", summary: "runs, newest first (or --status S)", about: "Lists runs, newest first.",
			flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
				status := fs.String("status", "", "only runs in this status (queued, running, waiting_approval, waiting_input, succeeded, failed, rejected, cancelled, interrupted)")
				limit := fs.Int("limit", 50, "at most this many")
				return func(ctx context.Context, a *adminCall, _ []string) error {
					q := url.Values{"limit": {strconv.Itoa(*limit)}}
					if *status != "" {
						q.Set("status", *status)
					}
					var page struct {
						Items []core.Run `json:"items"`
					}
					if done, err := a.call(ctx, "runs list", "GET", "/api/v1/runs", q, nil, &page); done {
						return err
					}
					tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "ID\tSTATUS\tFLOW\tTHREAD\tREQUESTER\tCREATED\tUPDATED")
					for _, r := range page.Items {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, r.Flow, r.Thread, r.Requester,
							fmtTime(r.CreatedAt), fmtTime(r.UpdatedAt))
					}
					return tw.Flush()
				}
			}},
		{name: "show", args: "ID", summary: "one run: its steps, arguments and output", about: fmt.Sprintf(idNote, "runs", "show"),
			flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
				return func(ctx context.Context, a *adminCall, pos []string) error {
					id, err := a.resolveID(ctx, "run", pos[0])
					if err != nil {
						return err
					}
					var r core.Run
					if done, err := a.call(ctx, "runs show "+id, "GET", "/api/v1/runs/"+url.PathEscape(id), nil, nil, &r); done {
						return err
					}
					printRun(a.stdout, &r)
					return nil
				}
			}},
		{name: "cancel", args: "ID", summary: "cancel a run that has not ended",
			about: "Cancels the run; a waiting run's approval expires with it." + fmt.Sprintf(idNote, "runs", "cancel"),
			flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
				return func(ctx context.Context, a *adminCall, pos []string) error {
					id, err := a.resolveID(ctx, "run", pos[0])
					if err != nil {
						return err
					}
					var r core.Run
					if done, err := a.call(ctx, "runs cancel "+id, "POST", "/api/v1/runs/"+url.PathEscape(id)+"/cancel", nil,
						map[string]any{}, &r); done {
						return err
					}
					fmt.Fprintf(a.stdout, "run %s is now %s\n", r.ID, r.Status)
					return nil
				}
			}},
	}
	return runAdmin(ctx, "runs", "Follow and cancel runs, over the server's API.", subs, args, stdout, stderr)
}

// fullIDLen is the length of the ids the server makes (UUIDs): an argument
// this long is taken as a whole id, never as a prefix.
const fullIDLen = 36

// maxCandidates is how many matches an ambiguous prefix lists.
const maxCandidates = 10

// resolveID turns what the operator typed into one id, like git and
// docker: a whole id is used as is; anything shorter is a prefix, looked
// up with the list's id_prefix filter, and must match exactly one
// (kind "approval" or "run"). The CLI resolves, not the server: a decision
// is only ever posted to a whole id the operator's prefix named
// unambiguously a moment before, and scripts calling the API keep exact
// ids.
func (a *adminCall) resolveID(ctx context.Context, kind, arg string) (string, error) {
	if len(arg) >= fullIDLen || !prefixChars(arg) {
		return arg, nil
	}
	c, err := a.api()
	if err != nil {
		return "", err
	}
	var page struct {
		Items []struct {
			ID        string    `json:"id"`
			Status    string    `json:"status"`
			Tool      string    `json:"tool"`
			Flow      string    `json:"flow"`
			CreatedAt time.Time `json:"created_at"`
		} `json:"items"`
	}
	q := url.Values{"id_prefix": {arg}, "limit": {strconv.Itoa(maxCandidates + 1)}}
	if err := c.do(ctx, "GET", "/api/v1/"+kind+"s", q, nil, &page); err != nil {
		return "", fmt.Errorf("find the %s %s: %w", kind, arg, err)
	}
	// Check the prefix here too: a server that predates id_prefix ignores
	// it and answers the unfiltered list.
	var match []int
	for i, it := range page.Items {
		if it.ID == arg {
			return arg, nil
		}
		if strings.HasPrefix(it.ID, arg) {
			match = append(match, i)
		}
	}
	switch len(match) {
	case 0:
		return "", fmt.Errorf("no %s id starts with %q (see `opsgate %ss list`)", kind, arg, kind)
	case 1:
		return page.Items[match[0]].ID, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s id prefix %q is ambiguous; it matches:", kind, arg)
	for i, m := range match {
		if i == maxCandidates {
			b.WriteString("\n  … and more")
			break
		}
		it := page.Items[m]
		fmt.Fprintf(&b, "\n  %s  %s  %s  %s", it.ID, it.Status, it.Tool+it.Flow, fmtTime(it.CreatedAt))
	}
	b.WriteString("\ntype more of the id")
	return "", &ambiguousError{msg: b.String()}
}

// ambiguousError is a prefix that names several ids (exit status 1).
type ambiguousError struct{ msg string }

func (e *ambiguousError) Error() string { return e.msg }

// prefixChars reports whether s can be an id prefix (what the API's
// id_prefix accepts); anything else is taken as a whole id.
func prefixChars(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
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
