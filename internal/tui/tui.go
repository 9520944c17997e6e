// Package tui is `opsgate tui`: the approvals queue in a terminal, on
// Bubble Tea. It shows what waits for a human (approvals and questions,
// with countdowns), the details a person needs to decide, and decides
// through the server's API with the caller's token — the server judges
// every decision exactly as from any other surface. It updates live from
// the API's change feed (GET /api/v1/events), fits 80×24, and prints a
// plain snapshot instead when its output is not a terminal.
package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/term"

	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/shortid"
	"github.com/opsgate/opsgate/internal/client"
)

// IsTerminal reports whether f is a terminal (the TUI needs one on both
// sides; elsewhere it prints plain text).
func IsTerminal(f *os.File) bool { return f != nil && term.IsTerminal(f.Fd()) }

// Run shows the TUI on in/out until the user quits or ctx ends. It sets
// c.Channel, so the server records the TUI's decisions and answers with
// channel "tui".
func Run(ctx context.Context, c *client.Client, in *os.File, out *os.File) error {
	c.Channel = api.TUIChannel
	me, err := c.Me(ctx)
	if err != nil {
		return fmt.Errorf("who is this token: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	feed := make(chan tea.Msg, 256)
	go Stream(ctx, c, feed)
	m := New(ctx, Options{API: c, Feed: feed, Me: me, Server: c.Server(), Events: func(ctx context.Context, runID string, fn func(client.Event) error) error {
		return c.Events(ctx, "/api/v1/runs/"+url.PathEscape(runID)+"/events", nil, "", fn)
	}})
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out), tea.WithAltScreen())
	_, err = p.Run()
	if err == tea.ErrProgramKilled && ctx.Err() != nil {
		return nil
	}
	return err
}

// Stream feeds the change feed into feed as the model's messages until
// ctx ends, reconnecting (1 s doubling to 10 s) when the stream is lost.
func Stream(ctx context.Context, c *client.Client, feed chan<- tea.Msg) {
	send := func(msg tea.Msg) bool {
		select {
		case feed <- msg:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if !send(streamUpMsg{}) {
			return
		}
		err := c.Events(ctx, "/api/v1/events", nil, "", func(ev client.Event) error {
			switch ev.Type {
			case "ready":
				attempt = 0
				send(readyMsg{})
			case "approval":
				var a client.Approval
				if json.Unmarshal(ev.Data, &a) == nil {
					send(approvalMsg{a: &a})
				}
			case "run":
				var r client.Run
				if json.Unmarshal(ev.Data, &r) == nil {
					send(runMsg{r: &r})
				}
			}
			return ctx.Err()
		})
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = fmt.Errorf("the server closed the stream")
		}
		if !send(streamDownMsg{err: err}) {
			return
		}
		d := min(time.Second<<min(attempt, 4), 10*time.Second)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// Plain prints what the TUI would show, as text for a pipe or a log: the
// pending approvals and questions, then the newest runs.
func Plain(ctx context.Context, c *client.Client, w io.Writer, now time.Time) error {
	me, err := c.Me(ctx)
	if err != nil {
		return fmt.Errorf("who is this token: %w", err)
	}
	pending, err := c.Approvals(ctx, "pending", 200)
	if err != nil {
		return fmt.Errorf("list pending approvals: %w", err)
	}
	runs, err := c.Runs(ctx, "", 20)
	if err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	waiting, err := c.Runs(ctx, "waiting_input", 50)
	if err != nil {
		return fmt.Errorf("list runs waiting for input: %w", err)
	}
	var qs []*question
	for _, r := range waiting {
		d, err := c.Run(ctx, r.ID)
		if err != nil {
			return fmt.Errorf("run %s: %w", r.ID, err)
		}
		for _, pa := range d.PendingActions {
			if pa.Kind == "question" {
				qs = append(qs, &question{runID: d.ID, thread: d.Thread, requester: d.Requester, action: pa})
			}
		}
	}
	var ids []string
	for _, a := range pending {
		ids = append(ids, a.ID)
	}
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	for _, q := range qs {
		ids = append(ids, q.runID)
	}
	short := shortid.Shortest(ids...)
	fmt.Fprintf(w, "opsgate at %s as %s (%s)\n\n", c.Server(), text(me.Actor), strings.Join(me.Scopes, ", "))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "PENDING APPROVALS (%d)\n", len(pending))
	if len(pending) > 0 {
		fmt.Fprintln(tw, "ID\tTOOL\tRISK\tREQUESTER\tTHREAD\tEXPIRES IN\tARGUMENTS")
	}
	for i := len(pending) - 1; i >= 0; i-- { // oldest first, as the queue
		a := pending[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", short[a.ID], text(a.Tool), a.Risk, text(a.Requester), text(a.Thread),
			countdown(client.Time(a.ExpiresAt), now), argLine(a.ProposedArgs))
	}
	fmt.Fprintf(tw, "\nQUESTIONS (%d)\n", len(qs))
	if len(qs) > 0 {
		fmt.Fprintln(tw, "ID\tRUN\tTHREAD\tEXPIRES IN\tQUESTION")
	}
	for _, q := range qs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", q.action.ID, short[q.runID], text(q.thread), countdown(client.Time(q.action.ExpiresAt), now), text(q.summary()))
	}
	fmt.Fprintf(tw, "\nRUNS (newest %d)\n", len(runs))
	if len(runs) > 0 {
		fmt.Fprintln(tw, "ID\tSTATUS\tFLOW\tTHREAD\tREQUESTER\tUPDATED")
	}
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", short[r.ID], r.Status, text(r.Flow), text(r.Thread), text(r.Requester), r.UpdatedAt)
	}
	return tw.Flush()
}
