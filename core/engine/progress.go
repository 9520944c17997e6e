package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/gate"
	"github.com/opsgate/opsgate/core/history"
	"github.com/opsgate/opsgate/core/redact"
)

// Long work shows progress (issue 27). While a step's tool runs, its
// output (tools.Call.Output, handed over by the gate) is kept as the last
// few lines, each bounded and redacted, and:
//
//   - every ProgressOptions.Every, when it changed, it is appended to the
//     run's events as tool.output {step, tool, lines, bytes, elapsed_ms}
//     (the console and the TUI show it with the elapsed time);
//   - once the step has run ProgressOptions.StatusAfter, a thread whose
//     channel edits replies (StreamInto) gets a status message (KindProgress)
//     — the step, the elapsed time, the newest lines — edited at most every
//     ProgressOptions.StatusEvery; when the step ends the same message
//     shows its result line ("✅ deploy finished in 42s"), written in the
//     checkpoint that records the step. Each later long step of the run
//     edits the same message, below the earlier ones' result lines.
//
// Platforms that cannot edit get no interim messages: the result comes in
// the run's reply, as always (docs/architecture.md). Progress is best
// effort: a status or event the store refuses is not retried, and none is
// written for a run this replica no longer holds (the owner guard).

// ProgressOptions pace the progress of long steps; zero fields take the
// defaults.
type ProgressOptions struct {
	// Every is the least time between two tool.output events of a step.
	Every time.Duration
	// StatusAfter is how long a step runs before its thread gets a status
	// message (platforms that edit replies only).
	StatusAfter time.Duration
	// StatusEvery is the least time between two edits of the status.
	StatusEvery time.Duration
}

// Defaults of ProgressOptions.
const (
	DefaultProgressEvery       = 2 * time.Second
	DefaultProgressStatusAfter = 5 * time.Second
	DefaultProgressStatusEvery = 5 * time.Second
	// progressLines and progressLineMax bound what is kept of the output:
	// the newest lines, each cut to a width a chat message shows.
	progressLines   = 8
	progressLineMax = 160
)

func (o ProgressOptions) withDefaults() ProgressOptions {
	if o.Every <= 0 {
		o.Every = DefaultProgressEvery
	}
	if o.StatusAfter <= 0 {
		o.StatusAfter = DefaultProgressStatusAfter
	}
	if o.StatusEvery <= 0 {
		o.StatusEvery = DefaultProgressStatusEvery
	}
	return o
}

// progress follows one gated call of a run while it passes the gate.
type progress struct {
	x     *execution
	step  int
	tool  string
	tags  map[string]any
	opts  ProgressOptions
	begin time.Time // when the step's start was recorded (markStarted)
	// status says whether this thread gets status messages.
	status bool

	mu      sync.Mutex
	tail    lineTail
	dirty   bool
	started bool
	// posted: a status message of this step was queued.
	posted     bool
	lastStatus time.Time

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// pass takes c through the gate with a progress sink on its dispatch, so
// the output of a long step shows while it runs (see above).
func (x *execution) pass(ctx context.Context, c gate.Call, rec gate.Record) (*gate.Outcome, error) {
	p := &progress{x: x, step: c.Index, tool: c.Tool, tags: c.Tags, opts: x.e.opts.Progress.withDefaults(),
		status: x.e.streams(x.run.Thread.Channel), stop: make(chan struct{}), done: make(chan struct{})}
	c.Output = p.write
	// A tool may ask the run's people while it runs (upstreamquestion.go).
	ctx = llm.WithPeopleAsker(ctx, x.peopleAsker(c.Index))
	x.prog = p
	go p.loop(ctx)
	defer func() {
		p.halt()
		x.prog = nil
	}()
	return x.e.gate.Pass(ctx, c, rec)
}

// write is the tools.OutputSink: it only collects.
func (p *progress) write(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tail.write(b)
	p.dirty = true
}

// markStarted starts the step's progress once its start is recorded.
func (p *progress) markStarted() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started {
		p.started, p.begin = true, time.Now()
	}
}

// loop writes progress every opts.Every until halted.
func (p *progress) loop(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(p.opts.Every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			p.tick(ctx)
		}
	}
}

// halt stops the loop and waits for it: no progress of the step is
// written after it.
func (p *progress) halt() {
	p.once.Do(func() { close(p.stop) })
	<-p.done
}

// tick appends a tool.output event when the output changed, and queues the
// thread's status when it is due.
func (p *progress) tick(ctx context.Context) {
	p.mu.Lock()
	if !p.started {
		p.mu.Unlock()
		return
	}
	elapsed := time.Since(p.begin)
	var evs []core.RunEvent
	if p.dirty {
		evs = append(evs, p.event(elapsed))
		p.dirty = false
	}
	var out []core.OutboxMessage
	if p.status && elapsed >= p.opts.StatusAfter && time.Since(p.lastStatus) >= p.opts.StatusEvery {
		out = append(out, p.statusMessage(p.running(elapsed)))
		p.posted, p.lastStatus = true, time.Now()
	}
	p.mu.Unlock()
	if len(evs) == 0 && len(out) == 0 {
		return
	}
	e := p.x.e
	err := e.store.RunCheckpoint(ctx, core.Checkpoint{RunID: p.x.run.ID, Owner: e.opts.Owner, Now: e.now(), Events: evs, Outbox: out})
	if err != nil && ctx.Err() == nil {
		p.x.log.Debug("progress not recorded", "step", p.step, "err", err)
	}
}

// event is the tool.output event of the output so far (p.mu held).
func (p *progress) event(elapsed time.Duration) core.RunEvent {
	data := map[string]any{"step": p.step, "tool": p.tool, "lines": p.tail.lines(), "bytes": p.tail.total,
		"elapsed_ms": elapsed.Milliseconds()}
	for k, v := range p.tags {
		data[k] = v
	}
	return p.x.e.event(p.x.run.ID, core.EventToolOutput, data)
}

// running is the status text of the step while it runs (p.mu held).
func (p *progress) running(elapsed time.Duration) string {
	s := fmt.Sprintf("⏳ Running **%s** · %s", p.tool, history.Duration(elapsed))
	if ls := p.tail.lines(); len(ls) > 0 {
		s += "\n" + fence(strings.Join(ls, "\n"))
	}
	return s
}

// statusMessage is the run's status (KindProgress): the result lines of
// the run's earlier long steps, then text.
func (p *progress) statusMessage(text string) core.OutboxMessage {
	var b strings.Builder
	for _, l := range p.x.doneLines {
		b.WriteString(l + "\n")
	}
	b.WriteString(text)
	e := p.x.e
	return core.OutboxMessage{ID: e.opts.NewID(), Thread: p.x.run.Thread, Kind: core.KindProgress, Text: b.String(),
		RunID: p.x.run.ID, CreatedAt: e.now()}
}

// settle is called with the checkpoint that records the step's end: the
// loop is stopped, the output's last state goes with it as a tool.output
// event (before the step's own events), and a thread that was shown the
// step running gets its result line in the same status message.
func (p *progress) settle(st *core.Step) (events []core.RunEvent, outbox []core.OutboxMessage) {
	p.halt()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started {
		return nil, nil
	}
	elapsed := time.Since(p.begin)
	if p.dirty {
		events = append(events, p.event(elapsed))
		p.dirty = false
	}
	if !p.posted {
		return events, nil
	}
	line := resultLine(st, p.tool, elapsed)
	outbox = append(outbox, p.statusMessage(line))
	p.x.doneLines = append(p.x.doneLines, line)
	p.posted = false
	return events, outbox
}

// resultLine is a finished step's line in the status message.
func resultLine(st *core.Step, tool string, elapsed time.Duration) string {
	d := history.Duration(elapsed)
	switch st.Status {
	case core.StepSucceeded:
		return fmt.Sprintf("✅ **%s** finished in %s", tool, d)
	case core.StepFailed:
		return fmt.Sprintf("❌ **%s** failed after %s", tool, d)
	case core.StepInterrupted:
		return fmt.Sprintf("⚠️ **%s** stopped after %s; its outcome is unknown", tool, d)
	}
	return fmt.Sprintf("⏹ **%s** %s after %s", tool, st.Status, d)
}

// stepEnded reports a step status that settles a call.
func stepEnded(s core.StepStatus) bool {
	switch s {
	case core.StepSucceeded, core.StepFailed, core.StepInterrupted, core.StepCancelled:
		return true
	}
	return false
}

// lineTail keeps the newest lines of a stream of output: at most
// progressLines, each cut to progressLineMax runes and redacted when
// read; the byte count is of everything written.
type lineTail struct {
	full    []string // complete lines, oldest first
	partial strings.Builder
	total   int64
}

func (t *lineTail) write(b []byte) {
	t.total += int64(len(b))
	for len(b) > 0 {
		i := indexNewline(b)
		if i < 0 {
			if t.partial.Len() < progressLineMax*4 {
				t.partial.Write(b[:min(len(b), progressLineMax*4-t.partial.Len())])
			}
			return
		}
		if t.partial.Len() < progressLineMax*4 {
			t.partial.Write(b[:min(i, progressLineMax*4-t.partial.Len())])
		}
		t.full = append(t.full, t.partial.String())
		t.partial.Reset()
		if len(t.full) > progressLines {
			t.full = t.full[len(t.full)-progressLines:]
		}
		b = b[i+1:]
	}
}

func indexNewline(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i
		}
	}
	return -1
}

// lines are the newest lines, the unfinished one included, cleaned for a
// chat message: redacted (redact.Text), control characters dropped,
// carriage-return progress bars reduced to their last state, cut.
func (t *lineTail) lines() []string {
	ls := append([]string(nil), t.full...)
	if t.partial.Len() > 0 {
		ls = append(ls, t.partial.String())
	}
	if len(ls) > progressLines {
		ls = ls[len(ls)-progressLines:]
	}
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		if i := strings.LastIndexByte(strings.TrimRight(l, "\r"), '\r'); i >= 0 {
			l = l[i+1:]
		}
		l = strings.Map(func(r rune) rune {
			if r == '\t' {
				return ' '
			}
			if r < 0x20 || r == 0x7f {
				return -1
			}
			return r
		}, strings.ToValidUTF8(l, "\uFFFD"))
		l = redact.Text(l)
		if utf8.RuneCountInString(l) > progressLineMax {
			l = core.Clip(l, progressLineMax)
		}
		out = append(out, l)
	}
	return out
}
