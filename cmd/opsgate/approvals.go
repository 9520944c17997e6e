package main

import (
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
	"github.com/opsgate/opsgate/core/api"
)

// `opsgate approvals …`: list, show and decide the calls that wait for a
// human (watch and wait are in watch.go).

func cmdApprovals(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	decide := func(action string) func(fs *flagSet) func(context.Context, *adminCall, []string) error {
		return func(fs *flagSet) func(context.Context, *adminCall, []string) error {
			reasonHelp := "why; recorded with the decision"
			if action == "reject" {
				reasonHelp = "why; returned to the run as the step's output, and shown to the requester"
			}
			reason := fs.String("reason", "", reasonHelp)
			var scope, argsJSON, pattern, forDur *string
			if action != "reject" {
				scope = fs.String("scope", "call", "call; task (later calls of the same rule in this run); session (later calls of the same rule "+
					"by the same requester in the thread, for approvals.session_ttl); or forever (a stored allow rule for these exact arguments, or --pattern)")
				forDur = fs.String("for", "", "with --scope session or forever: how long the grant lasts (30m, 2h, 7d); a session grant at most approvals.session_ttl")
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
						return usagef("--scope %q: want call, task, session or forever", *scope)
					}
					body["scope"] = *scope
				}
				if forDur != nil && *forDur != "" {
					if _, err := api.ParseFor(*forDur); err != nil {
						return usagef("--for: %v", err)
					}
					if *scope != "session" && *scope != "forever" {
						return usagef("--for goes with --scope session or forever")
					}
					body["for"] = *forDur
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
				if scope != nil && approvals.Scope(*scope).Saves() && a.format() != outputJSON && a.format() != outputYAML {
					// What the grant will cover, before it is saved.
					if err := a.showOffer(ctx, id, approvals.Scope(*scope), *forDur); err != nil {
						return err
					}
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
		{name: "list", summary: "approvals waiting for a decision (or --status S)", wide: true,
			about: "Lists approvals, newest first: pending ones unless --status says otherwise. IDs are the short\n" +
				"ids every command takes; -o wide shows whole ids and more columns.",
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
					ids := make([]string, len(page.Items))
					for i, ap := range page.Items {
						ids[i] = ap.ID
					}
					shown := a.shownIDs(ids)
					wide := a.format() == outputWide
					tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
					if wide {
						fmt.Fprintln(tw, "ID\tSTATUS\tTOOL\tRISK\tREQUESTER\tTHREAD\tCREATED\tEXPIRES\tRUN\tAPPROVERS\tQUORUM\tARGUMENTS\tREASON")
					} else {
						fmt.Fprintln(tw, "ID\tSTATUS\tTOOL\tRISK\tREQUESTER\tTHREAD\tCREATED\tEXPIRES")
					}
					for _, ap := range page.Items {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", shown[ap.ID], ap.Status, cell(ap.Tool), ap.Risk, cell(ap.Requester),
							cell(ap.Thread), fmtTime(ap.CreatedAt), fmtTime(ap.ExpiresAt))
						if wide {
							fmt.Fprintf(tw, "\t%s\t%s\t%d\t%s\t%s", ap.RunID, cell(strings.Join(ap.Approvers, ",")), ap.Quorum,
								cell(compact(ap.ProposedArgs)), cell(ap.Reason))
						}
						fmt.Fprintln(tw)
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
					var ap shownApproval
					if done, err := a.call(ctx, "approvals show "+id, "GET", "/api/v1/approvals/"+url.PathEscape(id), nil, nil, &ap); done {
						return err
					}
					printApproval(a.stdout, &ap.Approval)
					printEscalation(a.stdout, &ap)
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

// printApproval is `approvals show`: the call, why the policy asked, the
// edit as a change, the hand-overs and every decision.
func printApproval(w io.Writer, a *approvals.Approval) {
	fmt.Fprintf(w, "approval  %s\nstatus    %s\ntool      %s (risk %s%s)\nrun       %s\nthread    %s\nrequester %s\n",
		a.ID, a.Status, a.Tool, a.Risk, map[bool]string{true: ", destructive"}[a.Destructive], a.RunID, a.Thread, a.Requester)
	fmt.Fprintf(w, "approvers %s (quorum %d)\ncreated   %s\nexpires   %s\n", strings.Join(a.Approvers, ", "), a.Quorum,
		fmtTime(a.CreatedAt), fmtTime(a.ExpiresAt))
	if a.Why != "" {
		fmt.Fprintf(w, "asked by  %s\n", a.Why)
	}
	if a.Reason != "" {
		fmt.Fprintf(w, "reason    %s\n", a.Reason)
	}
	fmt.Fprintf(w, "proposed  %s\n", compact(a.ProposedArgs))
	if a.ApprovedArgs != nil {
		fmt.Fprintf(w, "approved  %s\n", compact(a.ApprovedArgs))
	}
	for _, ch := range a.Edits() {
		fmt.Fprintf(w, "edited    %s\n", core.ChangeLine(ch))
	}
	if a.ExecutedArgs != nil {
		fmt.Fprintf(w, "executed  %s\n", compact(a.ExecutedArgs))
	}
	if a.Preview != "" {
		fmt.Fprintf(w, "dry run:\n%s\n", indent(a.Preview))
	}
	for _, d := range a.Decisions {
		line := fmt.Sprintf("decision  %s by %s via %s at %s", d.Action, d.Actor, d.Channel, fmtTime(d.At))
		if d.Action == approvals.ActionDelegate {
			line = fmt.Sprintf("handed    to %s by %s via %s at %s", d.To, d.Actor, d.Channel, fmtTime(d.At))
		}
		if d.Reason != "" {
			line += ": " + d.Reason
		}
		if d.Superseded {
			line += " (superseded by an edit)"
		}
		fmt.Fprintln(w, line)
	}
}
