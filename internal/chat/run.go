package chat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/opsgate/opsgate/internal/keytext"
)

// History is how many earlier messages of the thread a session shows
// when it joins.
const History = 20

// settleBound caps how long a piped session waits, after its input ends,
// for its runs to finish or stop for a human.
const settleBound = 2 * time.Minute

func (s *Session) banner() string {
	return fmt.Sprintf("opsgate chat in %s at %s as %s — /help for commands", text(s.thread), text(s.c.Server()), text(s.me.Actor))
}

// Lines runs the session over lines: each line of in is handled, and
// everything the thread says is written to out. At the end of in it waits
// until the runs it started have finished (or wait for a human, with
// their card shown), so `echo 'deploy api 1.2.3' | opsgate chat` prints
// the card or the result.
func (s *Session) Lines(ctx context.Context, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	print := func(lines []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lines {
			fmt.Fprintln(out, l)
		}
	}
	print([]string{s.banner()})
	ready := make(chan struct{})
	var once sync.Once
	followErr := make(chan error, 1)
	go func() {
		followErr <- s.Follow(ctx, History, print, func() { once.Do(func() { close(ready) }) })
	}()
	select {
	case <-ready:
	case err := <-followErr:
		return err
	case <-ctx.Done():
		return nil
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines, err := s.Handle(ctx, sc.Text())
		if errors.Is(err, ErrQuit) {
			return nil
		}
		if err != nil {
			print([]string{"✗ " + err.Error()})
			continue
		}
		print(lines)
	}
	return s.settle(ctx, followErr)
}

// settle waits until every run of the session is final with its reply
// shown, or waits for a human with its card shown.
func (s *Session) settle(ctx context.Context, followErr <-chan error) error {
	deadline := time.Now().Add(settleBound)
	for time.Now().Before(deadline) {
		done := true
		for _, id := range s.Runs() {
			r, err := s.c.Run(ctx, id)
			if err != nil {
				return fmt.Errorf("run %s: %w", id, err)
			}
			switch {
			case r.Status.Final():
				done = done && s.shownReply(id)
			case r.Status == "waiting_approval":
				done = done && s.shownCard(id)
			case r.Status == "waiting_input":
				// Questions are answered from the TUI, the console or the
				// API for now (docs/terminal.md).
			default:
				done = false
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-followErr:
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("runs still going after %s: %s", settleBound, strings.Join(s.Runs(), ", "))
}

// Terminal runs the session as an inline prompt: the thread scrolls by
// above it, the line you type stays at the bottom.
func (s *Session) Terminal(ctx context.Context, in, out *os.File) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	s.ansi = true
	s.mu.Unlock()
	m := newPrompt(ctx, s.banner(), s.Handle)
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out))
	followErr := make(chan error, 1)
	go func() {
		err := s.Follow(ctx, History, func(lines []string) { p.Send(linesMsg(lines)) }, nil)
		followErr <- err
		if err != nil {
			p.Send(fatalMsg{err})
		}
	}()
	res, err := p.Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return err
	}
	if pm, ok := res.(prompt); ok && pm.err != nil {
		return pm.err
	}
	return nil
}

type (
	linesMsg  []string
	resultMsg struct {
		echo  string
		lines []string
		err   error
	}
	fatalMsg struct{ err error }
)

var (
	styleYou = lipgloss.NewStyle().Bold(true)
	styleErr = lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
)

// prompt is the Bubble Tea model of Terminal: a text input; what the
// thread says is printed above it with tea.Println.
type prompt struct {
	ctx    context.Context
	banner string
	// handle runs a line typed at the prompt (Session.Handle).
	handle func(ctx context.Context, line string) ([]string, error)
	in     textinput.Model
	busy   bool
	err    error
}

func newPrompt(ctx context.Context, banner string, handle func(context.Context, string) ([]string, error)) prompt {
	ti := textinput.New()
	ti.Prompt = "› "
	ti.Placeholder = "deploy api 1.2.3 · /approve · /help"
	ti.CharLimit = 16 << 10
	ti.Focus()
	return prompt{ctx: ctx, banner: banner, handle: handle, in: ti}
}

func (m prompt) Init() tea.Cmd {
	return tea.Sequence(tea.Println(m.banner), textinput.Blink)
}

func (m prompt) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if k, ok := msg.(tea.KeyMsg); ok {
		// Several runes at once are text, never a key name.
		msg = keytext.Normalize(k)
	}
	switch msg := msg.(type) {
	case linesMsg:
		return m, tea.Println(strings.Join(msg, "\n"))
	case fatalMsg:
		m.err = msg.err
		return m, tea.Quit
	case resultMsg:
		m.busy = false
		if errors.Is(msg.err, ErrQuit) {
			return m, tea.Quit
		}
		var out []string
		if msg.echo != "" {
			out = append(out, styleYou.Render("you › ")+text(msg.echo))
		}
		if msg.err != nil {
			out = append(out, styleErr.Render("✗ "+text(msg.err.Error())))
		}
		out = append(out, msg.lines...)
		if len(out) == 0 {
			return m, nil
		}
		return m, tea.Println(strings.Join(out, "\n"))
	case tea.KeyMsg:
		switch msg.Type {
		case tea.KeyCtrlC, tea.KeyCtrlD:
			return m, tea.Quit
		case tea.KeyEnter:
			line := m.in.Value()
			if strings.TrimSpace(line) == "" || m.busy {
				return m, nil
			}
			m.in.SetValue("")
			m.busy = true
			handle, ctx := m.handle, m.ctx
			echo := ""
			if !strings.HasPrefix(strings.TrimSpace(line), "/") {
				echo = line
			}
			return m, func() tea.Msg {
				lines, err := handle(ctx, line)
				return resultMsg{echo: echo, lines: lines, err: err}
			}
		}
	}
	var cmd tea.Cmd
	m.in, cmd = m.in.Update(msg)
	return m, cmd
}

func (m prompt) View() string {
	if m.busy {
		return m.in.View() + "  …"
	}
	return m.in.View()
}
