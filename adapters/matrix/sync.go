package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/lease"
)

// syncFilter keeps /sync to what the adapter reads: messages, reactions,
// encryption markers and memberships in the timeline; the encryption state;
// no presence, receipts or account data. Sent inline, so no filter has to
// be created (and remembered) on the homeserver.
var syncFilter = mustJSON(map[string]any{
	"presence":     map[string]any{"types": []string{}},
	"account_data": map[string]any{"types": []string{}},
	"room": map[string]any{
		"timeline":     map[string]any{"limit": timelineLimit, "types": []string{"m.room.message", "m.reaction", "m.room.encrypted", "m.room.encryption", "m.room.member"}},
		"state":        map[string]any{"types": []string{"m.room.encryption"}},
		"ephemeral":    map[string]any{"types": []string{}},
		"account_data": map[string]any{"types": []string{}},
	},
})

// timelineLimit is how many events one sync returns per room; a gap past
// it is read back with /messages (at most maxBackfillPages pages).
const (
	timelineLimit    = 100
	maxBackfillPages = 10
)

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// syncResponse is the part of a /sync answer the adapter reads; events
// stay raw until parseEvent, so one odd event cannot spoil a batch.
type syncResponse struct {
	NextBatch string `json:"next_batch"`
	Rooms     struct {
		Join   map[string]joinedRoom  `json:"join"`
		Invite map[string]invitedRoom `json:"invite"`
	} `json:"rooms"`
}

type joinedRoom struct {
	State    struct{ Events []json.RawMessage } `json:"state"`
	Timeline struct {
		Events    []json.RawMessage `json:"events"`
		Limited   bool              `json:"limited"`
		PrevBatch string            `json:"prev_batch"`
	} `json:"timeline"`
}

type invitedRoom struct {
	InviteState struct{ Events []json.RawMessage } `json:"invite_state"`
}

// ErrMalformedSync is a /sync answer the adapter cannot read.
var ErrMalformedSync = errors.New("matrix: malformed sync response")

// parseSync decodes a /sync answer and checks what the loop relies on.
func parseSync(b []byte) (*syncResponse, error) {
	var s syncResponse
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedSync, err)
	}
	if s.NextBatch == "" {
		return nil, fmt.Errorf("%w: no next_batch", ErrMalformedSync)
	}
	return &s, nil
}

// sinceKey names the stored sync position: one per bot account.
func (a *Adapter) sinceKey() string { return "matrix:since:" + string(a.self) }

// leaseName is the sync lease: one replica at a time reads the account's
// timeline, so notices are sent once.
func (a *Adapter) leaseName() string { return "matrix:sync:" + string(a.self) }

// Run implements core.Runner: it holds the sync lease (waiting while
// another replica holds it), reads /sync from the stored position, hands
// each event to the sink, and stores the next position only after the
// whole batch was recorded. Failures back off and retry until ctx ends.
func (a *Adapter) Run(ctx context.Context) error {
	defer func() { _ = a.reader.Release(ctx) }()
	backoff := time.Second
	for ctx.Err() == nil {
		err := a.syncOnce(ctx)
		switch {
		case err == nil:
			backoff = time.Second
			continue
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, lease.ErrHeld):
			if sleep(ctx, a.reader.Retry()) != nil {
				return nil
			}
			continue
		}
		wait := backoff
		var rl *core.RateLimitError
		if errors.As(err, &rl) && rl.RetryAfter > wait {
			wait = rl.RetryAfter
		}
		a.log.Warn("sync failed; retrying", "in", wait, "err", err)
		if sleep(ctx, wait) != nil {
			return nil
		}
		backoff = min(backoff*2, time.Minute)
	}
	return nil
}

// syncOnce is one turn of the loop: lease, position, one /sync, the batch.
func (a *Adapter) syncOnce(ctx context.Context) error {
	if err := a.reader.Hold(ctx); err != nil {
		return fmt.Errorf("matrix: sync: %w", err)
	}
	a.resolveRooms(ctx)
	a.learnProfile(ctx)
	since, err := a.reader.Position(ctx)
	if err != nil {
		return fmt.Errorf("matrix: sync: %w", err)
	}
	timeout := a.cfg.PollTimeout
	if since == "" {
		// First start: take the current position and read no history,
		// so old messages never start runs.
		timeout = 0
	}
	resp, err := a.sync(ctx, since, timeout)
	if err != nil {
		return err
	}
	if since == "" {
		a.noteState(resp)
		for rid, inv := range resp.Rooms.Invite {
			a.handleInvite(ctx, id.RoomID(rid), inv)
		}
		a.log.Info("first sync: starting from the current position; older timeline ignored")
		return a.storeSince(ctx, resp.NextBatch)
	}
	if err := a.handleBatch(ctx, since, resp); err != nil {
		return err
	}
	return a.storeSince(ctx, resp.NextBatch)
}

func (a *Adapter) storeSince(ctx context.Context, next string) error {
	if err := a.reader.Advance(ctx, next); err != nil {
		return fmt.Errorf("matrix: sync: %w", err)
	}
	return nil
}

// sync is one GET /sync.
func (a *Adapter) sync(ctx context.Context, since string, timeout time.Duration) (*syncResponse, error) {
	q := map[string]string{"filter": syncFilter, "timeout": strconv.FormatInt(timeout.Milliseconds(), 10)}
	if since != "" {
		q["since"] = since
	}
	u := a.cli.BuildURLWithQuery(mautrix.ClientURLPath{"v3", "sync"}, q)
	body, err := a.cli.MakeFullRequest(ctx, mautrix.FullRequest{Method: http.MethodGet, URL: u})
	if err != nil {
		return nil, apiError("sync", err)
	}
	return parseSync(body)
}

// noteState records what the first sync says about rooms (which are
// encrypted) without handling any event.
func (a *Adapter) noteState(resp *syncResponse) {
	for rid, jr := range resp.Rooms.Join {
		for _, raw := range append(append([]json.RawMessage{}, jr.State.Events...), jr.Timeline.Events...) {
			if ev, err := parseEvent(raw); err == nil && ev.Type == "m.room.encryption" && ev.StateKey != nil {
				a.setEncrypted(id.RoomID(rid))
			}
		}
	}
}

// handleBatch hands every event of one sync to the sink, room by room, in
// timeline order. An error means the batch must be read again (the sink
// could not record); everything else is done with.
func (a *Adapter) handleBatch(ctx context.Context, since string, resp *syncResponse) error {
	for rid, inv := range resp.Rooms.Invite {
		a.handleInvite(ctx, id.RoomID(rid), inv)
	}
	for rid, jr := range resp.Rooms.Join {
		room := id.RoomID(rid)
		for _, raw := range jr.State.Events {
			if ev, err := parseEvent(raw); err == nil && ev.Type == "m.room.encryption" && ev.StateKey != nil {
				a.setEncrypted(room)
			}
		}
		events := jr.Timeline.Events
		if jr.Timeline.Limited && jr.Timeline.PrevBatch != "" {
			older, err := a.backfill(ctx, room, jr.Timeline.PrevBatch, since)
			if err != nil {
				return err
			}
			events = append(older, events...)
		}
		for _, raw := range events {
			ev, err := parseEvent(raw)
			if err != nil {
				a.log.Warn("ignored malformed event", "room", room, "err", err)
				continue
			}
			if err := a.handleEvent(ctx, room, ev, raw); err != nil {
				return err
			}
		}
	}
	return nil
}

// backfill reads the events a limited timeline skipped, oldest first,
// between since and the timeline's prev_batch, at most maxBackfillPages
// pages; a longer gap is logged.
func (a *Adapter) backfill(ctx context.Context, room id.RoomID, from, to string) ([]json.RawMessage, error) {
	var pages [][]json.RawMessage
	for range maxBackfillPages {
		u := a.cli.BuildURLWithQuery(mautrix.ClientURLPath{"v3", "rooms", room, "messages"},
			map[string]string{"dir": "b", "from": from, "to": to, "limit": strconv.Itoa(timelineLimit)})
		var page struct {
			Chunk []json.RawMessage `json:"chunk"`
			End   string            `json:"end"`
		}
		if _, err := a.cli.MakeRequest(ctx, http.MethodGet, u, nil, &page); err != nil {
			return nil, apiError("messages", err)
		}
		pages = append(pages, page.Chunk)
		if page.End == "" || len(page.Chunk) == 0 {
			break
		}
		from = page.End
		if len(pages) == maxBackfillPages {
			a.log.Warn("long gap in a room's timeline; older events were skipped", "room", room, "pages", maxBackfillPages)
		}
	}
	var out []json.RawMessage
	for i := len(pages) - 1; i >= 0; i-- {
		for j := len(pages[i]) - 1; j >= 0; j-- { // dir=b: newest first
			out = append(out, pages[i][j])
		}
	}
	return out, nil
}

// resolveRooms turns configured aliases into room ids (GET
// /directory/room/{alias}); one that fails is tried again next turn.
func (a *Adapter) resolveRooms(ctx context.Context) {
	a.mu.Lock()
	todo := a.unresolved
	a.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	var left []string
	for _, alias := range todo {
		resp, err := a.cli.ResolveAlias(ctx, id.RoomAlias(alias))
		if err != nil {
			a.log.Error("cannot resolve room alias; its messages are ignored until it resolves", "alias", alias, "err", err)
			left = append(left, alias)
			continue
		}
		a.mu.Lock()
		a.allowed[resp.RoomID] = true
		a.mu.Unlock()
	}
	a.mu.Lock()
	a.unresolved = left
	a.mu.Unlock()
}

func (a *Adapter) setEncrypted(room id.RoomID) {
	a.mu.Lock()
	a.encrypted[room] = true
	a.mu.Unlock()
}

func (a *Adapter) isEncrypted(room id.RoomID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.encrypted[room]
}

func (a *Adapter) isListed(room id.RoomID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.allowed[room]
}

// isDirect reports whether room is a direct room: the bot and one other
// joined member. Answers are kept a minute.
func (a *Adapter) isDirect(ctx context.Context, room id.RoomID) (bool, error) {
	a.mu.Lock()
	d, ok := a.direct[room]
	a.mu.Unlock()
	if ok && a.now().Sub(d.at) < time.Minute {
		return d.direct, nil
	}
	resp, err := a.cli.JoinedMembers(ctx, room)
	var he mautrix.HTTPError
	if errors.As(err, &he) && (he.IsStatus(http.StatusForbidden) || he.IsStatus(http.StatusNotFound)) {
		return false, nil // a room the bot is not in is not its direct room
	}
	if err != nil {
		return false, apiError("joined_members", err)
	}
	_, selfIn := resp.Joined[a.self]
	direct := selfIn && len(resp.Joined) == 2
	a.mu.Lock()
	a.direct[room] = directInfo{direct: direct, at: a.now()}
	a.mu.Unlock()
	return direct, nil
}

// handleInvite joins a listed room, or a direct room when direct messages
// are on; other invites are left pending (and logged).
func (a *Adapter) handleInvite(ctx context.Context, room id.RoomID, inv invitedRoom) {
	isDirect := false
	for _, raw := range inv.InviteState.Events {
		ev, err := parseEvent(raw)
		if err != nil || ev.Type != "m.room.member" || ev.StateKey == nil || *ev.StateKey != string(a.self) {
			continue
		}
		var m struct {
			IsDirect bool `json:"is_direct"`
		}
		_ = json.Unmarshal(ev.Content, &m)
		isDirect = m.IsDirect
	}
	if !a.isListed(room) && !(a.cfg.DirectMessages && isDirect) {
		a.log.Warn("invite to a room not listed in channels.matrix.rooms; not joining", "room", room)
		return
	}
	if _, err := a.cli.JoinRoomByID(ctx, room); err != nil {
		a.log.Warn("join invited room", "room", room, "err", err)
		return
	}
	a.log.Info("joined invited room", "room", room, "direct", isDirect)
}
