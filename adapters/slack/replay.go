package slack

import (
	"encoding/hex"
	"sync"
	"time"
)

// replayCapacity bounds the signatures the replay check remembers. Slack
// delivers at most 30,000 events per workspace and app an hour (about 8 a
// second), so 2^17 covers a whole 5-minute window at over 400 requests a
// second: far more than Slack sends. Past it the oldest signature is
// forgotten before its window ends; a replay of such an event is still
// refused by the inbox's durable dedup on (channel, event_id), which is the
// authority — this check only stops replays before they cost a write.
// Memory stays bounded: about 7 MB when full, and the ring grows only as
// traffic fills it.
const replayCapacity = 1 << 17

// sigKey is the first half of an accepted signature's HMAC: only verified
// signatures are remembered, so a collision would need a forged HMAC.
type sigKey [16]byte

// sigKeyOf returns the key of a signature check has accepted ("v0=" and
// 64 hex digits).
func sigKeyOf(sig string) sigKey {
	var k sigKey
	if len(sig) >= 3+2*len(k) {
		_, _ = hex.Decode(k[:], []byte(sig[3:3+2*len(k)]))
	}
	return k
}

// replayRing remembers accepted signatures until their timestamp leaves the
// window, in a fixed ring in arrival order with a map for lookups: a claim
// is O(1) amortized (each entry is dropped once, from the ring's front,
// when it has expired or the ring is full), and memory never exceeds the
// capacity (the ring starts small and doubles as traffic needs). It replaces a map swept in full under the lock on every request
// once it held 1,024 signatures (issue 21).
type replayRing struct {
	mu    sync.Mutex
	at    map[sigKey]uint64 // key → its absolute position in the ring
	ring  []replayEntry     // grows by doubling up to max
	max   int
	start uint64 // absolute position of the front entry
	n     int    // entries held
}

type replayEntry struct {
	key   sigKey
	until int64 // unix nanoseconds after which the signature is stale anyway
}

func newReplayRing(capacity int) *replayRing {
	first := min(capacity, 1024)
	return &replayRing{at: make(map[sigKey]uint64, first), ring: make([]replayEntry, first), max: capacity}
}

// grow doubles the ring (up to max), keeping every entry at its absolute
// position modulo the new length: n consecutive positions, n ≤ the old
// length, never share a slot.
func (r *replayRing) grow() {
	next := make([]replayEntry, min(2*len(r.ring), r.max))
	for p := r.start; p < r.start+uint64(r.n); p++ {
		next[p%uint64(len(next))] = r.ring[p%uint64(len(r.ring))]
	}
	r.ring = next
}

// claim records key as used until until; a second claim while it is
// remembered and not expired is ErrReplay.
func (r *replayRing) claim(key sigKey, now, until time.Time) error {
	nowN := now.UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	// Drop expired entries from the front; entries are in arrival order,
	// and their ends differ only by the clock skew Slack's timestamps
	// carry, so an expired entry behind a live one waits a little (it is
	// still checked for expiry on lookup) and the ring stays bounded.
	for r.n > 0 && r.ring[r.start%uint64(len(r.ring))].until < nowN {
		r.pop()
	}
	if pos, ok := r.at[key]; ok && r.ring[pos%uint64(len(r.ring))].until >= nowN {
		return ErrReplay
	}
	if r.n == len(r.ring) && len(r.ring) < r.max {
		r.grow()
	}
	if r.n == len(r.ring) {
		r.pop() // full: the oldest goes early (see replayCapacity)
	}
	pos := r.start + uint64(r.n)
	r.ring[pos%uint64(len(r.ring))] = replayEntry{key: key, until: until.UnixNano()}
	r.at[key] = pos
	r.n++
	return nil
}

// pop drops the front entry (and its lookup, unless the key was forgotten
// and claimed again since).
func (r *replayRing) pop() {
	e := r.ring[r.start%uint64(len(r.ring))]
	if pos, ok := r.at[e.key]; ok && pos == r.start {
		delete(r.at, e.key)
	}
	r.start++
	r.n--
}

// forget drops key, so a retry of a request that could not be processed is
// accepted. Its ring entry stays until it reaches the front.
func (r *replayRing) forget(key sigKey) {
	r.mu.Lock()
	delete(r.at, key)
	r.mu.Unlock()
}

// len reports how many signatures are remembered (tests).
func (r *replayRing) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.at)
}
