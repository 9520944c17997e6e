package delivery_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/opsgate/opsgate/core"
)

// memStore is core.OutboxStore in memory with the same contract as the SQL
// stores (oldest pending per thread, owner guards, leases). The load tests
// use it because SQLite under -race is too slow for 10,000 messages; the
// real stores pass store/storetest and the other tests here.
type memStore struct {
	mu    sync.Mutex
	seq   int64
	msgs  map[string]*memMsg
	order []*memMsg // by seq
	// pending is order without the messages no longer pending, pruned
	// lazily by claims, so a claim does not rescan everything sent.
	pending []*memMsg
	leases  map[string]memLease
	subs    []chan struct{}
}

type memMsg struct {
	d          core.Delivery
	owner      string
	leaseUntil time.Time
}

type memLease struct {
	owner string
	until time.Time // zero: handed over
	state []byte
}

func newMemStore() *memStore {
	return &memStore{msgs: map[string]*memMsg{}, leases: map[string]memLease{}}
}

func (s *memStore) notify() {
	for _, c := range s.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (s *memStore) Subscribe(topic string) (<-chan struct{}, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := make(chan struct{}, 1)
	s.subs = append(s.subs, c)
	return c, func() {}
}

func (s *memStore) add(m core.OutboxMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	if m.ID == "" {
		m.ID = fmt.Sprintf("m%06d", s.seq)
	}
	mm := &memMsg{d: core.Delivery{OutboxMessage: m, Seq: s.seq, Status: core.DeliveryPending, Refs: []core.MessageRef{}}}
	s.msgs[m.ID] = mm
	s.order = append(s.order, mm)
	s.pending = append(s.pending, mm)
	s.notify()
}

func (s *memStore) OutboxClaim(ctx context.Context, p core.OutboxClaimParams) ([]*core.Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	blocked := map[core.Thread]bool{}
	var out []*core.Delivery
	kept := s.pending[:0]
	for _, m := range s.pending {
		if m.d.Status == core.DeliveryPending {
			kept = append(kept, m)
		}
	}
	s.pending = kept
	for _, m := range s.pending {
		first := !blocked[m.d.Thread]
		blocked[m.d.Thread] = true
		if !first || m.d.Thread.Channel != p.Channel || m.d.NextAttemptAt.After(p.Now) {
			continue
		}
		if m.owner != "" && m.leaseUntil.After(p.Now) {
			continue
		}
		m.owner, m.leaseUntil = p.Owner, p.LeaseUntil
		d := m.d
		d.Refs = append([]core.MessageRef(nil), m.d.Refs...)
		out = append(out, &d)
		if len(out) == p.Limit {
			break
		}
	}
	return out, nil
}

func (s *memStore) held(id, owner string) (*memMsg, error) {
	m, ok := s.msgs[id]
	if !ok {
		return nil, core.ErrNotFound
	}
	if m.owner != owner {
		return nil, fmt.Errorf("mem: %s held by %q, not %q: %w", id, m.owner, owner, core.ErrConflict)
	}
	return m, nil
}

func (s *memStore) OutboxChunkSent(ctx context.Context, id, owner string, chunk int, ref core.MessageRef, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.held(id, owner)
	if err != nil {
		return err
	}
	if chunk < m.d.ChunksSent {
		return nil
	}
	if chunk > m.d.ChunksSent {
		return fmt.Errorf("mem: chunk %d after %d: %w", chunk, m.d.ChunksSent, core.ErrConflict)
	}
	m.d.ChunksSent++
	m.d.Refs = append(m.d.Refs, ref)
	return nil
}

func (s *memStore) OutboxDone(ctx context.Context, id, owner string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.held(id, owner)
	if err != nil {
		return err
	}
	m.d.Status, m.d.SentAt, m.owner = core.DeliverySent, &now, ""
	s.notify()
	return nil
}

func (s *memStore) OutboxRetry(ctx context.Context, p core.OutboxRetryParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.held(p.ID, p.Owner)
	if err != nil {
		return err
	}
	m.d.Attempts++
	m.d.LastError, m.owner, m.d.NextAttemptAt = p.Error, "", p.RetryAt
	if p.Dead {
		m.d.Status = core.DeliveryDead
		s.notify()
	}
	return nil
}

func (s *memStore) OutboxList(ctx context.Context, p core.OutboxListParams) ([]*core.Delivery, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*core.Delivery
	for _, m := range s.order {
		if p.Status == "" || m.d.Status == p.Status {
			d := m.d
			out = append(out, &d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, "", nil
}

func (s *memStore) OutboxRequeue(ctx context.Context, id string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.msgs[id]
	if !ok {
		return core.ErrNotFound
	}
	if m.d.Status != core.DeliveryDead {
		return core.ErrConflict
	}
	m.d.Status, m.d.Attempts, m.d.NextAttemptAt, m.owner = core.DeliveryPending, 0, now, ""
	s.pending = append(s.pending, m)
	sort.Slice(s.pending, func(i, j int) bool { return s.pending[i].d.Seq < s.pending[j].d.Seq })
	s.notify()
	return nil
}

func (s *memStore) OutboxCardRef(ctx context.Context, approvalID string, thread core.Thread) (*core.MessageRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.order {
		if m.d.Kind == core.KindCard && m.d.ApprovalID == approvalID && m.d.Thread == thread && len(m.d.Refs) > 0 {
			r := m.d.Refs[0]
			return &r, nil
		}
	}
	return nil, core.ErrNotFound
}

func (s *memStore) LeaseAcquire(ctx context.Context, name, owner string, now, until time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[name]
	if ok && l.owner != owner && l.until.After(now) {
		return false, nil
	}
	s.leases[name] = memLease{owner: owner, until: until}
	return true, nil
}

func (s *memStore) SendLeaseAcquire(ctx context.Context, p core.SendLeaseParams) (core.SendLease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[p.Name]
	got := core.SendLease{PriorOwner: l.owner, PriorUntil: l.until, PriorState: l.state}
	if ok && l.owner != p.Owner && l.until.After(p.Now) {
		return got, nil
	}
	s.leases[p.Name] = memLease{owner: p.Owner, until: p.Until, state: p.State}
	got.Acquired = true
	return got, nil
}

func (s *memStore) SendLeaseHandOver(ctx context.Context, p core.SendLeaseParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[p.Name]
	if !ok || l.owner != p.Owner {
		return nil
	}
	s.leases[p.Name] = memLease{owner: p.Owner, state: p.State}
	for _, m := range s.pending {
		if m.d.Thread.Channel == p.Channel && m.owner == p.Owner && m.d.Status == core.DeliveryPending {
			m.owner, m.leaseUntil = "", time.Time{}
		}
	}
	s.notify()
	return nil
}

func (s *memStore) LeaseRelease(ctx context.Context, name, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.leases[name]; ok && l.owner == owner {
		delete(s.leases, name)
	}
	return nil
}

func (s *memStore) count(status core.DeliveryStatus) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.order {
		if m.d.Status == status {
			n++
		}
	}
	return n
}
