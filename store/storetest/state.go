package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/opsgate/opsgate/core"
)

// testStatePutGet: a put is read back byte for byte (binary values too, and
// the empty value), and a second put of the key overwrites the first.
func testStatePutGet(t *testing.T, s core.Store) {
	key := newID("email:cursor:ops@example.com:INBOX")
	first := []byte{0x00, 0xff, 'a', 0x80, '\n'} // not UTF-8: the column is bytes, not text
	if err := s.StatePut(ctx(t), key, first, t0); err != nil {
		t.Fatalf("StatePut: %v", err)
	}
	got, err := s.StateGet(ctx(t), key)
	if err != nil || !bytes.Equal(got, first) {
		t.Fatalf("StateGet = %q, %v; want %q", got, err, first)
	}
	second := []byte(`{"mailbox":"INBOX","uidvalidity":7,"last_uid":42}`)
	if err := s.StatePut(ctx(t), key, second, t0.Add(1)); err != nil {
		t.Fatalf("StatePut (overwrite): %v", err)
	}
	if got, err := s.StateGet(ctx(t), key); err != nil || !bytes.Equal(got, second) {
		t.Errorf("StateGet after overwrite = %q, %v; want %q", got, err, second)
	}
	empty := newID("state-empty")
	if err := s.StatePut(ctx(t), empty, nil, t0); err != nil {
		t.Fatalf("StatePut (empty): %v", err)
	}
	if got, err := s.StateGet(ctx(t), empty); err != nil || got == nil || len(got) != 0 {
		t.Errorf("StateGet of an empty value = %q (nil %v), %v; want a present, empty value", got, got == nil, err)
	}
}

// testStateGetAbsent: a key never put is core.ErrNotFound, and a put of
// one key leaves its neighbours absent.
func testStateGetAbsent(t *testing.T, s core.Store) {
	key := newID("state")
	if _, err := s.StateGet(ctx(t), key); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("StateGet of an absent key: %v, want core.ErrNotFound", err)
	}
	if err := s.StatePut(ctx(t), key+"x", []byte("v"), t0); err != nil {
		t.Fatalf("StatePut: %v", err)
	}
	if _, err := s.StateGet(ctx(t), key); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("StateGet of a neighbouring key: %v, want core.ErrNotFound", err)
	}
}

// testStateConcurrentPuts: concurrent puts never fail (the upsert, not a
// read-then-insert, decides), each key ends with one of the values put to
// it whole, and distinct keys do not interfere.
func testStateConcurrentPuts(t *testing.T, s core.Store) {
	const writers, rounds = 8, 5
	shared := newID("state-shared")
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds*2)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := fmt.Sprintf("%s-own-%d", shared, w)
			for r := range rounds {
				v := []byte(fmt.Sprintf("writer %d round %d", w, r))
				if err := s.StatePut(ctx(t), shared, v, t0); err != nil {
					errs <- fmt.Errorf("put shared: %w", err)
				}
				if err := s.StatePut(ctx(t), own, v, t0); err != nil {
					errs <- fmt.Errorf("put own: %w", err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := s.StateGet(ctx(t), shared)
	if err != nil {
		t.Fatalf("StateGet shared: %v", err)
	}
	var w, r int
	if n, err := fmt.Sscanf(string(got), "writer %d round %d", &w, &r); n != 2 || err != nil || w >= writers || r >= rounds {
		t.Errorf("shared key holds %q: not one of the values put", got)
	}
	for w := range writers {
		own := fmt.Sprintf("%s-own-%d", shared, w)
		want := fmt.Sprintf("writer %d round %d", w, rounds-1)
		if got, err := s.StateGet(ctx(t), own); err != nil || string(got) != want {
			t.Errorf("StateGet %s = %q, %v; want its writer's last put %q", own, got, err, want)
		}
	}
}
