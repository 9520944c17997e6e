package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/opsgate/opsgate/core"
)

// The chat view is built from what the store can list today: a thread's
// runs (their request text is the user's message), each run's events (the
// bot's replies and cards), and, for messages that started no run (the help
// reply to an unknown command), a bounded scan of the outbox. core.Store has
// no method listing a thread's inbound events or outbox messages; see
// docs/console.md ("Known gaps").
const (
	chatRuns     = 50  // newest runs of a thread shown
	threadScan   = 200 // newest runs scanned to list console threads
	outboxScan   = 5   // outbox pages (of 200) scanned for run-less replies
	outboxPage   = 200
	maxThreadKey = 256
	eventsPerRun = 200
)

type chatItem struct {
	Key, Kind, Who, Text, At, RunID, Status string
	Card                                    *cardView
	at                                      time.Time
	order                                   int64
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

// consoleThreads lists console threads, most recently active first, from
// the newest runs.
func (s *server) consoleThreads(ctx context.Context) ([]threadRow, error) {
	runs, _, err := s.o.Store.RunList(ctx, core.RunListParams{Limit: threadScan})
	if err != nil {
		return nil, fmt.Errorf("web: list runs: %w", err)
	}
	seen := map[string]bool{}
	var out []threadRow
	for _, run := range runs {
		if run.Thread.Channel != Channel || seen[run.Thread.Key] {
			continue
		}
		seen[run.Thread.Key] = true
		out = append(out, threadRow{Key: run.Thread.Key, Last: ts(run.UpdatedAt)})
	}
	return out, nil
}

// chatItems assembles a thread's conversation in time order.
func (s *server) chatItems(ctx context.Context, key string) ([]chatItem, error) {
	thread := core.Thread{Channel: Channel, Key: key}
	runs, _, err := s.o.Store.RunList(ctx, core.RunListParams{Thread: thread.String(), Limit: chatRuns})
	if err != nil {
		return nil, fmt.Errorf("web: list runs of %s: %w", thread, err)
	}
	var items []chatItem
	for _, run := range runs {
		items = append(items, chatItem{Key: "m-" + run.ID, Kind: "user", Who: run.Requester, Text: run.Reason,
			At: ts(run.CreatedAt), RunID: run.ID, Status: string(run.Status), at: run.CreatedAt})
		evs, err := s.o.Store.RunEventList(ctx, run.ID, 0, eventsPerRun)
		if err != nil {
			return nil, fmt.Errorf("web: events of run %s: %w", run.ID, err)
		}
		for _, ev := range evs {
			var d struct {
				ApprovalID string `json:"approval_id"`
				Text       string `json:"text"`
				Tool       string `json:"tool"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			switch ev.Type {
			case core.EventPermissionRequested:
				a, err := s.o.Store.ApprovalGet(ctx, d.ApprovalID)
				if err != nil {
					return nil, fmt.Errorf("web: approval %s: %w", d.ApprovalID, err)
				}
				items = append(items, chatItem{Key: "c-" + a.ID, Kind: "card", Who: "opsgate", At: ts(ev.At), RunID: run.ID,
					Card: newCardView(a, run), at: ev.At, order: ev.Seq})
			case core.EventToolStarted:
				items = append(items, chatItem{Key: fmt.Sprintf("e-%d", ev.Seq), Kind: "status", Who: "opsgate",
					Text: "running " + d.Tool + "…", At: ts(ev.At), RunID: run.ID, at: ev.At, order: ev.Seq})
			case core.EventMessageCommitted:
				items = append(items, chatItem{Key: fmt.Sprintf("e-%d", ev.Seq), Kind: "bot", Who: "opsgate",
					Text: d.Text, At: ts(ev.At), RunID: run.ID, at: ev.At, order: ev.Seq})
			}
		}
	}
	// Replies that belong to no run (help for an unknown command).
	cursor := ""
	for range outboxScan {
		ds, next, err := s.o.Store.OutboxList(ctx, core.OutboxListParams{Limit: outboxPage, Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("web: list outbox: %w", err)
		}
		for _, d := range ds {
			if d.RunID == "" && d.Thread == thread && d.Kind == core.KindReply {
				items = append(items, chatItem{Key: "o-" + d.ID, Kind: "bot", Who: "opsgate", Text: d.Text,
					At: ts(d.CreatedAt), at: d.CreatedAt, order: d.Seq})
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	sort.SliceStable(items, func(i, j int) bool {
		if !items[i].at.Equal(items[j].at) {
			return items[i].at.Before(items[j].at)
		}
		return items[i].order < items[j].order
	})
	return items, nil
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
