package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"

	"github.com/opsgate/opsgate/core"
)

// `opsgate runs …`: list, show and cancel runs.

func cmdRuns(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	subs := []adminSub{
		{name: "list", summary: "runs, newest first (or --status S)", wide: true,
			about: "Lists runs, newest first. IDs are the short ids every command takes; -o wide shows whole ids\n" +
				"and more columns.",
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
					ids := make([]string, len(page.Items))
					for i, r := range page.Items {
						ids[i] = r.ID
					}
					shown := a.shownIDs(ids)
					wide := a.format() == outputWide
					tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
					if wide {
						fmt.Fprintln(tw, "ID\tSTATUS\tFLOW\tTHREAD\tREQUESTER\tCREATED\tUPDATED\tARGUMENTS\tERROR")
					} else {
						fmt.Fprintln(tw, "ID\tSTATUS\tFLOW\tTHREAD\tREQUESTER\tCREATED\tUPDATED")
					}
					for _, r := range page.Items {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s", shown[r.ID], r.Status, cell(r.Flow), cell(r.Thread.String()), cell(r.Requester),
							fmtTime(r.CreatedAt), fmtTime(r.UpdatedAt))
						if wide {
							errText := ""
							if r.ErrorCode != "" {
								errText = r.ErrorCode + ": " + r.ErrorMessage
							}
							fmt.Fprintf(tw, "\t%s\t%s", cell(compact(r.Args)), cell(errText))
						}
						fmt.Fprintln(tw)
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
