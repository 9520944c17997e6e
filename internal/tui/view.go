package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/history"
	"github.com/opsgate/opsgate/internal/client"
)

var (
	styleTitle = lipgloss.NewStyle().Bold(true)
	styleFaint = lipgloss.NewStyle().Faint(true)
	styleSel   = lipgloss.NewStyle().Reverse(true)
	styleErr   = lipgloss.NewStyle().Foreground(lipgloss.Color("1")).Bold(true)
	styleOK    = lipgloss.NewStyle().Foreground(lipgloss.Color("2"))
	styleHigh  = lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
	styleWarn  = lipgloss.NewStyle().Foreground(lipgloss.Color("3"))
)

// text makes a value from outside safe for one terminal line: line breaks
// shown as ⏎, control characters (escape sequences included) as \u
// escapes, so a tool's output or an argument can never move the cursor
// or restyle the screen.
func text(s string) string {
	return strings.ReplaceAll(core.OneLine(s), "\t", " ")
}

// fit cuts a rendered line to the width.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	return ansi.Truncate(s, w, "…")
}

// countdown says how long until t: "59m12s", "1h02m", "expired".
func countdown(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := t.Sub(now).Round(time.Second)
	switch {
	case d <= 0:
		return "expired"
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}

// argLine renders arguments as "k=v k=v" sorted by name.
func argLine(args map[string]any) string {
	parts := make([]string, 0, len(args))
	for _, a := range core.ArgsFromMap(args) {
		parts = append(parts, text(a.Name)+"="+text(a.Value))
	}
	return strings.Join(parts, " ")
}

func riskStyle(r string) lipgloss.Style {
	switch r {
	case "high_impact":
		return styleHigh
	case "external":
		return styleWarn
	}
	return lipgloss.NewStyle()
}

// View renders the screen, every line cut to the terminal's width.
func (m Model) View() string {
	w, h := max(m.width, 20), max(m.height, 8)
	var body []string
	var help string
	switch m.scr {
	case screenQueue:
		body, help = m.viewQueue(w)
	case screenDetail:
		body, help = m.viewDetail(w)
	case screenReject:
		body, help = m.viewReject(w)
	case screenEdit:
		body, help = m.viewEdit(w)
	case screenAnswer:
		body, help = m.viewAnswer(w)
	case screenRuns:
		body, help = m.viewRuns(w)
	case screenRun:
		body, help = m.viewRun(w)
	case screenHistory:
		body, help = m.viewHistory(w)
	case screenHelp:
		body, help = viewHelp(), "any key: back"
	}
	room := h - 4
	if m.scr == screenDetail || m.scr == screenRun || m.scr == screenHelp || m.scr == screenHistory {
		// Scrollable: keep the offset within the body.
		off := min(m.scroll, max(0, len(body)-room))
		body = body[off:]
	}
	if len(body) > room {
		body = body[:room]
	}
	lines := make([]string, 0, h)
	lines = append(lines, fit(m.titleBar(w), w), styleFaint.Render(strings.Repeat("─", w)))
	for _, l := range body {
		lines = append(lines, fit(l, w))
	}
	for len(lines) < h-2 {
		lines = append(lines, "")
	}
	lines = append(lines, fit(styleFaint.Render(help), w))
	status := ""
	switch {
	case m.busy != "":
		status = m.busy
	case m.scr == screenDetail && m.detail != nil && m.confirm == m.detail.ID:
		status = m.confirmLine()
	case m.flash != "" && m.flashErr:
		status = styleErr.Render(text(m.flash))
	case m.flash != "":
		status = styleOK.Render(text(m.flash))
	}
	lines = append(lines, fit(status, w))
	return strings.Join(lines, "\n")
}

func (m Model) titleBar(w int) string {
	live := styleOK.Render("● live")
	if !m.live {
		live = styleErr.Render("○ offline")
		if m.liveErr != "" {
			live += styleFaint.Render(" (retrying)")
		}
	}
	tabs := "[1 Queue] 2 Runs 3 History"
	switch m.scr {
	case screenRuns, screenRun:
		tabs = " 1 Queue [2 Runs] 3 History"
	case screenHistory:
		tabs = " 1 Queue 2 Runs [3 History]"
	}
	left := fmt.Sprintf("%s  %s  %s", styleTitle.Render("opsgate"), text(m.me.Actor), live)
	// The server's address goes first when the tabs would not fit.
	if withServer := left + "  " + styleFaint.Render(text(m.server)); lipgloss.Width(withServer)+1+lipgloss.Width(tabs) <= w {
		left = withServer
	}
	pad := w - lipgloss.Width(left) - lipgloss.Width(tabs)
	if pad < 1 {
		return left
	}
	return left + strings.Repeat(" ", pad) + tabs
}

func (m Model) viewQueue(w int) ([]string, string) {
	its := m.items()
	out := []string{styleTitle.Render(fmt.Sprintf(" WAITING FOR A HUMAN (%d)", len(its)))}
	if len(its) == 0 {
		out = append(out, "", styleFaint.Render("  Nothing waits for a decision. New approvals and questions appear here live."))
		return out, "tab runs · ? help · q quit"
	}
	// Keep the cursor in view.
	room := max(1, m.height-5)
	start := 0
	if m.cursor >= room {
		start = m.cursor - room + 1
	}
	for i := start; i < len(its) && i < start+room; i++ {
		it := its[i]
		exp := countdown(client.Time(it.expires()), m.at)
		var kind, what, risk string
		if it.approval != nil {
			kind, what, risk = "approval", text(it.approval.Tool)+" "+argLine(it.approval.ProposedArgs), string(it.approval.Risk)
		} else {
			kind, what, risk = "question", text(it.question.summary()), ""
		}
		// kind(8) what(flex) risk(11) expires(8)
		whatW := max(10, w-2-9-12-9)
		what = fit(what, whatW)
		line := fmt.Sprintf("%-8s %-*s %-11s %8s", kind, whatW, what, risk, exp)
		if i == m.cursor {
			out = append(out, "▸ "+styleSel.Render(line))
		} else {
			styled := fmt.Sprintf("%-8s %-*s %s %8s", kind, whatW, what, riskStyle(risk).Render(fmt.Sprintf("%-11s", risk)), exp)
			out = append(out, "  "+styled)
		}
	}
	if it, ok := m.current(); ok {
		out = append(out, "")
		if it.approval != nil {
			a := it.approval
			out = append(out, styleFaint.Render(fmt.Sprintf("  asked by %s in %s · decided by %s", text(a.Requester), text(a.Thread), text(strings.Join(a.Approvers, ", ")))))
		} else {
			q := it.question
			out = append(out, styleFaint.Render(fmt.Sprintf("  asked in %s for %s · run %s", text(q.thread), text(q.requester), m.short(q.runID))))
		}
	}
	if it, ok := m.current(); ok && it.question != nil {
		return out, "enter answer · ↑↓ move · tab runs · ? help · q quit"
	}
	return out, "enter details · a approve · r reject · e edit · ↑↓ move · tab runs · q quit"
}

func (m Model) viewDetail(w int) ([]string, string) {
	a := m.detail
	if a == nil {
		return []string{" loading…"}, "esc back"
	}
	row := func(k, v string) string { return fmt.Sprintf(" %-11s %s", k, v) }
	exp := countdown(client.Time(a.ExpiresAt), m.at)
	head := styleTitle.Render(" APPROVAL "+text(a.ID)) + "  " + text(string(a.Status))
	pad := w - lipgloss.Width(head) - len("expires in ") - len(exp)
	out := []string{head + strings.Repeat(" ", max(1, pad)) + "expires in " + exp}
	tool := text(a.Tool) + "  " + riskStyle(string(a.Risk)).Render("risk "+string(a.Risk))
	if a.Destructive {
		tool += ", destructive"
	}
	out = append(out, row("tool", tool))
	args := core.ArgsFromMap(a.ProposedArgs)
	if len(args) == 0 {
		out = append(out, row("arguments", "(none)"))
	}
	for i, ar := range args {
		k := ""
		if i == 0 {
			k = "arguments"
		}
		out = append(out, row(k, text(ar.Name)+" = "+text(ar.Value)))
	}
	for i, ch := range a.Changes {
		k := ""
		if i == 0 {
			k = "edited"
		}
		out = append(out, row(k, text(core.ChangeLine(ch))))
	}
	if a.Reason != "" {
		out = append(out, row("reason", text(a.Reason)))
	}
	if a.Why != "" {
		out = append(out, row("policy", text(a.Why)))
	}
	out = append(out, row("asked by", text(a.Requester)+" in "+text(a.Thread)))
	counted := 0
	for _, d := range a.Decisions {
		if !d.Superseded && (d.Action == "approve" || d.Action == "edit") {
			counted++
		}
	}
	out = append(out, row("who decides", fmt.Sprintf("%s (quorum %d, %d so far)", text(strings.Join(a.Approvers, ", ")), a.Quorum, counted)))
	if len(a.Eligible) > 0 {
		out = append(out, row("eligible", text(strings.Join(a.Eligible, ", "))))
	}
	you := "you (" + text(m.me.Actor) + ") may decide"
	if !m.mayDecide(a) {
		you = styleWarn.Render("you (" + text(m.me.Actor) + ") are not listed as an approver; the server decides")
	}
	out = append(out, row("", you))
	out = append(out, row("expires", text(a.ExpiresAt)+" ("+exp+")"))
	out = append(out, row("run", text(a.RunID)))
	for _, d := range a.Decisions {
		line := fmt.Sprintf("%s by %s via %s", d.Action, text(d.Actor), text(d.Channel))
		if d.To != "" {
			line = fmt.Sprintf("handed to %s by %s via %s", text(d.To), text(d.Actor), text(d.Channel))
		}
		if d.Reason != "" {
			line += ": " + text(d.Reason)
		}
		out = append(out, row("decision", line))
	}
	if a.Preview != "" {
		out = append(out, "", styleTitle.Render(" dry run"))
		for _, l := range strings.Split(strings.TrimRight(a.Preview, "\n"), "\n") {
			out = append(out, "   "+text(l))
		}
	}
	if m.confirm == a.ID {
		return out, "enter approves · esc cancels"
	}
	return out, "a approve · r reject · e edit · ↑↓ scroll · esc back"
}

// confirmLine names what Enter approves; the help line above it says
// which keys confirm and cancel.
func (m Model) confirmLine() string {
	a := m.detail
	what := text(a.Tool) + " " + argLine(a.ProposedArgs)
	risk := string(a.Risk)
	if a.Destructive {
		risk += ", destructive"
	}
	return styleWarn.Render(fmt.Sprintf("approve %s (%s)?", what, risk))
}

func (m Model) viewReject(w int) ([]string, string) {
	a := m.detail
	out := []string{styleTitle.Render(" REJECT " + text(a.Tool) + " " + argLine(a.ProposedArgs))}
	out = append(out, "", " The reason goes back to the requester and ends the run rejected.", "")
	out = append(out, " reason: "+m.reject.View())
	return out, "enter reject · esc back"
}

func (m Model) viewEdit(w int) ([]string, string) {
	f := m.edit
	out := []string{styleTitle.Render(" EDIT "+text(f.tool)) + styleFaint.Render(" — the new arguments replace the proposed ones")}
	nameW := 8
	for _, fd := range f.fields {
		nameW = max(nameW, min(20, len(fd.name)+1))
	}
	for i, fd := range f.fields {
		name := text(fd.name)
		if fd.required {
			name += "*"
		}
		mark := "  "
		if i == f.focus {
			mark = "▸ "
		}
		fd.input.Width = max(10, min(20, w-nameW-8))
		line := fmt.Sprintf("%s%-*s [%s]", mark, nameW, name, fd.input.View())
		if h := fd.hint(); h != "" {
			line += " " + styleFaint.Render(text(h))
		}
		out = append(out, line)
		if fd.err != "" {
			out = append(out, strings.Repeat(" ", nameW+4)+styleErr.Render("✗ "+text(fd.err)))
		}
	}
	if len(f.fields) == 0 {
		out = append(out, "  this tool takes no arguments")
	}
	if f.strict {
		out = append(out, styleFaint.Render("  no other arguments are allowed (* required; empty optional fields take the default)"))
	} else {
		out = append(out, styleFaint.Render("  * required; empty optional fields take the default"))
	}
	if f.err != "" {
		out = append(out, styleErr.Render("  ✗ "+text(f.err)))
	}
	return out, "enter save · tab/↑↓ field · esc cancel"
}

func (m Model) viewAnswer(w int) ([]string, string) {
	f := m.answer
	q := f.q
	out := []string{styleTitle.Render(" QUESTION ") + styleFaint.Render("run "+m.short(q.runID)+" in "+text(q.thread)+" · expires in "+
		countdown(client.Time(q.action.ExpiresAt), m.at))}
	for i, fd := range f.fields {
		mark := "  "
		if i == f.focus {
			mark = "▸ "
		}
		label := text(fd.item.Text)
		if fd.item.Optional {
			label += styleFaint.Render(" (optional)")
		}
		out = append(out, mark+label)
		switch fd.item.Kind {
		case "choice":
			var cs []string
			for j, c := range fd.item.Choices {
				c = fmt.Sprintf("%d %s", j+1, text(c))
				if j == fd.choice {
					c = styleSel.Render("(•) " + c)
				} else {
					c = "( ) " + c
				}
				cs = append(cs, c)
			}
			out = append(out, "    "+strings.Join(cs, "  "))
		case "confirm":
			yes, no := "( ) yes", "( ) no"
			if fd.confirm {
				yes = styleSel.Render("(•) yes")
			} else {
				no = styleSel.Render("(•) no")
			}
			fd.input.Width = max(10, w-30)
			out = append(out, "    "+yes+"  "+no+"   "+fd.input.View())
		default:
			fd.input.Width = max(10, w-8)
			out = append(out, "    ["+fd.input.View()+"]")
		}
		if fd.err != "" {
			out = append(out, "    "+styleErr.Render("✗ "+text(fd.err)))
		}
	}
	if f.err != "" {
		out = append(out, styleErr.Render("  ✗ "+text(f.err)))
	}
	return out, "enter send · tab next · ←→/1-9 choose · y/n confirm · esc back"
}

func (m Model) viewRuns(w int) ([]string, string) {
	out := []string{styleTitle.Render(fmt.Sprintf(" RUNS (%d, newest first)", len(m.runs)))}
	room := max(1, m.height-5)
	start := 0
	if m.runCur >= room {
		start = m.runCur - room + 1
	}
	for i := start; i < len(m.runs) && i < start+room; i++ {
		r := m.runs[i]
		name := r.Flow
		if name == "" {
			name = "(agent)"
		}
		line := fmt.Sprintf("%-8s %-16s %-12s %-20s %s", m.short(r.ID), text(string(r.Status)), text(name), text(r.Thread), age(client.Time(r.UpdatedAt), m.at))
		if i == m.runCur {
			out = append(out, "▸ "+styleSel.Render(line))
		} else {
			out = append(out, "  "+line)
		}
	}
	if len(m.runs) == 0 {
		out = append(out, "", styleFaint.Render("  No runs yet."))
	}
	return out, "enter timeline · ↑↓ move · tab queue · q quit"
}

// age says how long ago t was: "12s ago".
func age(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.UTC().Format("2006-01-02")
}

func (m Model) viewRun(w int) ([]string, string) {
	r := m.run
	if r == nil {
		return []string{" loading…"}, "esc back"
	}
	out := []string{styleTitle.Render(" RUN "+text(r.ID)) + "  " + text(string(r.Status))}
	if r.Flow != "" {
		out = append(out, fmt.Sprintf(" flow %s · %s · asked by %s in %s", text(r.Flow), argLine(r.Args), text(r.Requester), text(r.Thread)))
	}
	if r.ErrorCode != "" {
		out = append(out, styleErr.Render(" error "+text(r.ErrorCode)+": "+text(r.ErrorMessage)))
	}
	for _, s := range r.Steps {
		out = append(out, fmt.Sprintf(" step %d  %s  %s  %s", s.Index, text(s.Tool), text(string(s.Status)), argLine(s.Args)))
		if s.Error != "" {
			out = append(out, "   "+styleErr.Render(text(s.Error)))
		}
		if s.Output != "" {
			lines := strings.Split(strings.TrimRight(s.Output, "\n"), "\n")
			if len(lines) > 6 {
				lines = append([]string{fmt.Sprintf("… %d more lines", len(lines)-6)}, lines[len(lines)-6:]...)
			}
			for _, l := range lines {
				out = append(out, "   │ "+text(l))
			}
		}
	}
	out = append(out, "", styleTitle.Render(" timeline"))
	evs := m.coreEvents()
	j := 0 // the event of each moment (the timeline leaves text.delta out)
	for i, mo := range history.Timeline(evs) {
		for j < len(evs) && evs[j].Type == core.EventTextDelta {
			j++
		}
		ev := m.runEvents[j]
		j++
		gap := ""
		if i > 0 {
			gap = "+" + history.Duration(mo.Since)
		}
		lead := fmt.Sprintf("   %s %7s  ", mo.At.Local().Format("15:04:05"), gap)
		if ev.Type == core.EventToolOutput {
			// A running step: the time it has run and its newest lines.
			p := progressOf(ev)
			out = append(out, wrapped(lead, text(p.Tool)+" running · "+history.Duration(time.Duration(p.ElapsedMS)*time.Millisecond), w)...)
			for _, l := range p.Lines {
				out = append(out, "   │ "+text(l))
			}
			continue
		}
		out = append(out, wrapped(lead, mo.Text, w)...)
	}
	end := m.at
	if m.runEnded != "" && len(evs) > 0 {
		end = evs[len(evs)-1].At
	}
	if spent := history.SpentText(history.Spent(evs, end)); spent != "" {
		out = append(out, "")
		for _, l := range wrapped("   time: ", spent, w) {
			out = append(out, styleFaint.Render(l))
		}
	}
	switch {
	case m.runEnded != "":
		out = append(out, "   "+styleFaint.Render("ended: "+text(m.runEnded)))
	case m.events == nil:
	default:
		out = append(out, "   "+styleFaint.Render("… live"))
	}
	return out, "↑↓ scroll · esc runs · tab queue · q quit"
}

// wrapped is text after lead, wrapped at words to the width w, its further
// lines indented under the text: a timeline keeps every word.
func wrapped(lead, txt string, w int) []string {
	pad := ansi.StringWidth(lead)
	lines := strings.Split(ansi.Wrap(txt, max(20, w-pad), " "), "\n")
	out := make([]string, len(lines))
	for i, l := range lines {
		if i == 0 {
			out[i] = lead + l
		} else {
			out[i] = strings.Repeat(" ", pad) + l
		}
	}
	return out
}

// coreEvents are the run's events as core/history reads them.
func (m Model) coreEvents() []core.RunEvent {
	out := make([]core.RunEvent, 0, len(m.runEvents))
	for _, ev := range m.runEvents {
		out = append(out, core.RunEvent{Seq: ev.Seq, RunID: ev.RunID, Type: ev.Type, Data: ev.Data, At: client.Time(ev.At)})
	}
	return out
}

func viewHelp() []string {
	return []string{
		styleTitle.Render(" KEYS"),
		"  queue     ↑↓/jk move · enter details or answer · a approve (enter confirms)",
		"  details   a then enter approve · r reject (with a reason) · e edit · esc back",
		"  edit      tab/↑↓ field · enter save (validated against the tool's schema) · esc",
		"  question  tab next · ←→ or 1-9 choose · y/n confirm · enter send · esc back",
		"  runs      ↑↓ move · enter the run's timeline (live) · esc back",
		"  history   3: the audit log in words, newest first, live · ↑↓ scroll",
		"  anywhere  tab or 1/2 switch queue and runs · ? this help · q or ctrl+c quit",
		"",
		"  One key never decides: a shows what is approved, enter approves.",
		"",
		"  Every decision goes through the server's API with your token: it is judged",
		"  (who may decide, quorum, expiry) and audited like any other surface.",
	}
}
