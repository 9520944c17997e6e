package local

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
	"github.com/opsgate/opsgate/core/sse"
)

// Bounds of the stream: the newest messages compared per pass, the
// history a new stream replays by default and at most, and how many sent
// ids a stream remembers (far more than one page, so a late commit within
// the page is still recognised).
const (
	streamPage     = 100
	defaultHistory = 20
	maxHistory     = streamPage
	rememberIDs    = 2000
	streamMinGap   = 100 * time.Millisecond
)

// StreamMessage is one message of GET /local/v1/stream: a thread message
// as the store keeps it, with the card's current state for a card or a
// card update, so a client renders it without another request.
type StreamMessage struct {
	core.ThreadMessage
	Card *core.Card `json:"card,omitempty"`
}

// stream serves a thread's conversation as Server-Sent Events:
//
//	id: <message id>
//	event: message
//	data: StreamMessage
//
// It first replays the thread's newest ?history= messages (default 20,
// at most 100), then sends "event: ready", then every new message as it is
// queued: replies, cards, card updates (with the card as it is now) and
// what others wrote in the thread. A message is sent once per stream; a
// reconnecting client asks for history again and drops the ids it has.
// Decision events (no text) are not shown.
func (a *Adapter) stream(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	th, err := ParseThread(q.Get("thread"))
	if err != nil {
		writeErr(w, err.(*reqError))
		return
	}
	if err := a.d.Authority.Thread(ctx, callerOf(r).auth, th); err != nil {
		if ref, ok := authority.RefusalOf(err); ok {
			writeErr(w, refused(ref))
			return
		}
		a.d.Logger.ErrorContext(ctx, "local: stream", "thread", th.String(), "err", err)
		writeErr(w, bad(http.StatusInternalServerError, "internal", "", "internal error"))
		return
	}
	history := defaultHistory
	if v := q.Get("history"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeErr(w, bad(http.StatusUnprocessableEntity, "invalid", "history", "history must be a number of messages, 0 to %d", maxHistory))
			return
		}
		history = min(n, maxHistory)
	}
	st, err := sse.New(w)
	if err != nil {
		writeErr(w, bad(http.StatusInternalServerError, "internal", "", "%v", err))
		return
	}
	obWake, cancelOb := a.d.Store.Subscribe(core.TopicOutbox)
	defer cancelOb()
	evWake, cancelEv := a.d.Store.Subscribe(core.TopicEvents)
	defer cancelEv()
	if st.Open(2*time.Second) != nil {
		return
	}

	sent := map[string]bool{}
	var order []string
	remember := func(id string) {
		sent[id] = true
		order = append(order, id)
		if len(order) > rememberIDs {
			delete(sent, order[0])
			order = order[1:]
		}
	}
	wait := st.Waiter(sse.WaitOptions{Poll: a.d.PollInterval, Ping: a.d.PingInterval, MinGap: streamMinGap}, obWake, evWake)
	defer wait.Stop()
	first := true
	for {
		msgs, _, err := a.d.Store.ThreadMessages(ctx, core.ThreadMessagesParams{Thread: th, Limit: streamPage})
		if err != nil {
			if ctx.Err() == nil {
				a.d.Logger.WarnContext(ctx, "local: stream", "thread", th.String(), "err", err)
			}
			return
		}
		n := 0
		for i := len(msgs) - 1; i >= 0; i-- { // oldest first
			m := msgs[i]
			if sent[m.ID] {
				continue
			}
			remember(m.ID)
			if first && i >= history {
				continue // older than the history asked for
			}
			if m.Direction == core.MessageIn && m.Text == "" {
				continue // a decision, not something said
			}
			sm := StreamMessage{ThreadMessage: m}
			if (m.Kind == core.KindCard || m.Kind == core.KindCardUpdate) && m.ApprovalID != "" {
				if c, err := a.d.Cards.CardByApproval(ctx, m.ApprovalID); err == nil {
					sm.Card = &c
				}
			}
			b, err := json.Marshal(sm)
			if err != nil {
				continue
			}
			if st.Event(m.ID, "message", b) != nil {
				return
			}
			n++
		}
		if first {
			first = false
			if st.Event("", "ready", []byte("{}")) != nil {
				return
			}
			n++
		}
		if n > 0 {
			st.Flush()
		}
		if _, err := wait.Wait(ctx); err != nil {
			return
		}
	}
}
