package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/history"
)

// The chat view is the thread's conversation as the store keeps it
// (core.ThreadStore): every inbound message with its text, also those that
// started no run (a typo, "help"), and every reply and card, merged in
// order. Progress lines come from the runs' events: one per step, "running
// deploy · 12s" with the newest output lines while it runs (tool.output),
// replaced by its result ("deploy finished in 42s") once it ended.
const (
	chatMessages = 200 // newest messages of a thread shown
	chatRuns     = 50  // runs of the thread read in one list (others one by one)
	threadsShown = 200 // most recently active console threads listed
	maxThreadKey = 256
	eventsPerRun = 200
	// eventPages bounds the events read of one run: a long step writes a
	// tool.output event every second or so.
	eventPages = 10
)

type chatItem struct {
	Key, Kind, Who, Text, At, RunID, Status string
	// Lines are a running step's newest output lines (redacted by the
	// engine).
	Lines []string
	Card  *cardView
	at    time.Time
}

type threadRow struct {
	Key, Last string
	Current   bool
}

func validThreadKey(k string) bool {
	return k != "" && len(k) <= maxThreadKey && !strings.ContainsAny(k, "\r\n\t")
}

func (s *server) chatPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	key := strings.TrimPrefix(strings.TrimSpace(r.URL.Query().Get("thread")), Channel+":")
	if key != "" && !validThreadKey(key) {
		s.plainError(w, http.StatusBadRequest, "That thread name is not valid.")
		return
	}
	// Console threads hold everyone's requests: the authority lets a token
	// that reads every run read them, and their list.
	if err := s.auth.Thread(ctx, infoFrom(ctx).auth, core.Thread{Channel: Channel, Key: key}); err != nil {
		s.refused(w, r, err)
		return
	}
	threads, err := s.consoleThreads(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if key == "" && len(threads) > 0 {
		key = threads[0].Key
	}
	if key == "" {
		key = "ops"
	}
	found := false
	for i := range threads {
		if threads[i].Key == key {
			threads[i].Current, found = true, true
		}
	}
	if !found {
		threads = append([]threadRow{{Key: key, Current: true}}, threads...)
	}
	items, err := s.chatItems(ctx, key)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "chat", map[string]any{
		"Title": "Chat · " + key, "Thread": key, "Threads": threads, "Items": items,
		"Sent": r.URL.Query().Get("sent"),
	})
}

// consoleThreads lists console threads, most recently active first.
func (s *server) consoleThreads(ctx context.Context) ([]threadRow, error) {
	sums, _, err := s.o.Store.ThreadList(ctx, core.ThreadListParams{Channel: Channel, Limit: threadsShown})
	if err != nil {
		return nil, fmt.Errorf("web: list threads: %w", err)
	}
	out := make([]threadRow, 0, len(sums))
	for _, t := range sums {
		out = append(out, threadRow{Key: t.Thread.Key, Last: ts(t.LastAt)})
	}
	return out, nil
}

// chatItems assembles a thread's newest messages in time order.
func (s *server) chatItems(ctx context.Context, key string) ([]chatItem, error) {
	thread := core.Thread{Channel: Channel, Key: key}
	msgs, _, err := s.o.Store.ThreadMessages(ctx, core.ThreadMessagesParams{Thread: thread, Limit: chatMessages})
	if err != nil {
		return nil, fmt.Errorf("web: messages of %s: %w", thread, err)
	}
	runs, err := s.threadRuns(ctx, thread, msgs)
	if err != nil {
		return nil, err
	}
	items := make([]chatItem, 0, len(msgs))
	cards := map[string]bool{}
	for i := len(msgs) - 1; i >= 0; i-- { // oldest first
		m := msgs[i]
		run := runs[m.RunID]
		switch {
		case m.Direction == core.MessageIn:
			text := m.Text
			if text == "" && run != nil && run.EventID == m.ID {
				text = run.Reason // recorded before events kept their text
			}
			if text == "" {
				continue // a decision (button, reply) carries no message text
			}
			it := chatItem{Key: "i-" + shortHash(m.ID), Kind: "user", Who: m.Actor, Text: text, At: ts(m.At), RunID: m.RunID, at: m.At}
			if run != nil {
				it.Status = string(run.Status)
			}
			items = append(items, it)
		case m.Kind == core.KindCard && m.ApprovalID != "":
			if cards[m.ApprovalID] {
				continue
			}
			cards[m.ApprovalID] = true
			a, err := s.o.Store.ApprovalGet(ctx, m.ApprovalID)
			if err != nil {
				return nil, fmt.Errorf("web: approval %s: %w", m.ApprovalID, err)
			}
			items = append(items, chatItem{Key: "c-" + a.ID, Kind: "card", Who: "opsgate", At: ts(m.At), RunID: m.RunID,
				Card: newCardView(a, run), at: m.At})
		case m.Kind == core.KindReply || m.Kind == core.KindStreamEnd:
			// (An agent's streamed text, KindStream, is shown by its final
			// answer only.)
			items = append(items, chatItem{Key: "o-" + m.ID, Kind: "bot", Who: "opsgate", Text: m.Text, At: ts(m.At),
				RunID: m.RunID, at: m.At})
		}
		// A card update edits the card in place on chat platforms; here
		// the card above is always rendered in its current state.
	}
	if len(items) == 0 {
		return items, nil
	}
	// Progress of the runs in view, placed by time among the messages.
	oldest := items[0].at
	var progress []chatItem
	for _, id := range slices.Sorted(maps.Keys(runs)) {
		evs, err := s.runEvents(ctx, id)
		if err != nil {
			return nil, err
		}
		progress = append(progress, stepProgress(id, evs, oldest, time.Now())...)
	}
	items = append(items, progress...)
	// Stable: messages keep the store's order; a progress line goes after
	// the messages of its instant.
	sort.SliceStable(items, func(i, j int) bool { return items[i].at.Before(items[j].at) })
	return items, nil
}

// threadRuns returns the runs the messages refer to, by id: the thread's
// newest runs in one list, any older one the page still shows by id.
func (s *server) threadRuns(ctx context.Context, thread core.Thread, msgs []core.ThreadMessage) (map[string]*core.Run, error) {
	out := map[string]*core.Run{}
	want := map[string]bool{}
	for _, m := range msgs {
		if m.RunID != "" {
			want[m.RunID] = true
		}
	}
	if len(want) == 0 {
		return out, nil
	}
	list, _, err := s.o.Store.RunList(ctx, core.RunListParams{Thread: thread.String(), Limit: chatRuns})
	if err != nil {
		return nil, fmt.Errorf("web: list runs of %s: %w", thread, err)
	}
	for _, r := range list {
		if want[r.ID] {
			out[r.ID] = r
		}
	}
	for id := range want {
		if out[id] != nil {
			continue
		}
		r, err := s.o.Store.RunGet(ctx, id)
		if errors.Is(err, core.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("web: run %s: %w", id, err)
		}
		out[id] = r
	}
	return out, nil
}

// shortHash names an inbound message in the page (its element id) without
// putting the platform's event id, which is outside text, into markup.
func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// chatSend turns the composer into a console ChannelEvent, exactly like
// POST /api/v1/messages, then shows the thread again (the run's card and
// reply arrive live).
func (s *server) chatSend(w http.ResponseWriter, r *http.Request) {
	info := infoFrom(r.Context())
	key := strings.TrimPrefix(strings.TrimSpace(r.PostFormValue("thread")), Channel+":")
	text := r.PostFormValue("text")
	switch {
	case !validThreadKey(key):
		s.plainError(w, http.StatusUnprocessableEntity, "A thread name is required (at most 256 characters, one line).")
		return
	case strings.TrimSpace(text) == "":
		http.Redirect(w, r, "/chat?thread="+url.QueryEscape(key), http.StatusSeeOther)
		return
	case len(text) > maxMessageText:
		s.plainError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("The message is %d bytes; the limit is %d.", len(text), maxMessageText))
		return
	}
	id, err := uuid.NewV7()
	if err != nil {
		s.fail(w, r, fmt.Errorf("web: new event id: %w", err))
		return
	}
	ev := core.ChannelEvent{
		Channel: Channel, EventID: id.String(), Actor: info.actor,
		Thread: core.Thread{Channel: Channel, Key: key}, Text: text, ReceivedAt: s.o.Now().UTC(),
	}
	rc, err := s.o.Engine.HandleEvent(r.Context(), ev)
	if err != nil {
		s.fail(w, r, fmt.Errorf("web: handle message: %w", err))
		return
	}
	s.log.InfoContext(r.Context(), "web: message sent", "actor", info.actor.ID, "thread", ev.Thread.String(), "run", rc.RunID)
	http.Redirect(w, r, "/chat?thread="+url.QueryEscape(key)+"&sent="+url.QueryEscape(rc.RunID), http.StatusSeeOther)
}

// runEvents reads a run's events, at most eventPages pages of them.
func (s *server) runEvents(ctx context.Context, runID string) ([]core.RunEvent, error) {
	var out []core.RunEvent
	var after int64
	for range eventPages {
		page, err := s.o.Store.RunEventList(ctx, runID, after, eventsPerRun)
		if err != nil {
			return nil, fmt.Errorf("web: events of run %s: %w", runID, err)
		}
		out = append(out, page...)
		if len(page) < eventsPerRun {
			break
		}
		after = page[len(page)-1].Seq
	}
	return out, nil
}

// stepProgress turns a run's events into one status line per dispatched
// step since oldest: while it runs, the tool, the time it has run and its
// newest output lines; once it ended, its result. Status changes with
// each, so the live page redraws the line in place.
func stepProgress(runID string, evs []core.RunEvent, oldest, now time.Time) []chatItem {
	var out []chatItem
	open := map[int]int{} // step → index in out of its running line
	for _, ev := range evs {
		var d struct {
			Step      *int     `json:"step"`
			Tool      string   `json:"tool"`
			Lines     []string `json:"lines"`
			ElapsedMS int64    `json:"elapsed_ms"`
			Duration  int64    `json:"duration_ms"`
			Error     string   `json:"error"`
		}
		if ev.Type != core.EventToolStarted && ev.Type != core.EventToolOutput && ev.Type != core.EventToolFinished {
			continue
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.Step == nil {
			continue
		}
		if ev.Type == core.EventToolStarted {
			if ev.At.Before(oldest) {
				continue
			}
			open[*d.Step] = len(out)
			out = append(out, chatItem{Key: fmt.Sprintf("e-%d", ev.Seq), Kind: "status", Who: "opsgate",
				Text: "running " + d.Tool + " · " + history.Duration(now.Sub(ev.At)), Status: "running", At: ts(ev.At), RunID: runID, at: ev.At})
			continue
		}
		i, ok := open[*d.Step]
		if !ok {
			continue
		}
		it := &out[i]
		if ev.Type == core.EventToolOutput {
			it.Text = "running " + d.Tool + " · " + history.Duration(time.Duration(d.ElapsedMS)*time.Millisecond)
			it.Lines, it.Status = d.Lines, fmt.Sprintf("output-%d", ev.Seq)
			continue
		}
		took := history.Duration(time.Duration(d.Duration) * time.Millisecond)
		it.Text, it.Status, it.Lines = d.Tool+" finished in "+took, "finished", nil
		if d.Error != "" {
			it.Text, it.Status = d.Tool+" failed after "+took+": "+d.Error, "failed"
		}
		delete(open, *d.Step)
	}
	return out
}
