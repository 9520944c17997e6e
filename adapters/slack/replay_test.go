package slack

import (
	"bytes"
	"errors"
	"fmt"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

func keyN(i int) sigKey {
	return sigKeyOf(sign(testSecret, int64(i), []byte(strconv.Itoa(i))))
}

// TestReplayRing covers the replay check's rules one by one.
func TestReplayRing(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	until := now.Add(signatureWindow)

	t.Run("RefusesSecondUseInsideWindow", func(t *testing.T) {
		r := newReplayRing(8)
		if err := r.claim(keyN(1), now, until); err != nil {
			t.Fatal(err)
		}
		if err := r.claim(keyN(1), now.Add(signatureWindow-time.Second), until); !errors.Is(err, ErrReplay) {
			t.Fatalf("second claim inside the window: %v, want ErrReplay", err)
		}
	})
	t.Run("AcceptsAfterExpiry", func(t *testing.T) {
		r := newReplayRing(8)
		_ = r.claim(keyN(1), now, until)
		if err := r.claim(keyN(1), until.Add(time.Second), until.Add(time.Minute)); err != nil {
			t.Fatalf("claim after the signature expired: %v", err)
		}
	})
	t.Run("ForgetAllowsRetry", func(t *testing.T) {
		r := newReplayRing(8)
		_ = r.claim(keyN(1), now, until)
		r.forget(keyN(1))
		if err := r.claim(keyN(1), now, until); err != nil {
			t.Fatalf("claim after forget: %v", err)
		}
		// The forgotten entry's slot reaching the front must not drop
		// the new claim's lookup.
		for i := 2; i < 8; i++ {
			_ = r.claim(keyN(i), now, until)
		}
		_ = r.claim(keyN(100), now, until) // full: the first slot goes
		if err := r.claim(keyN(1), now, until); !errors.Is(err, ErrReplay) {
			t.Fatalf("re-claimed signature forgotten by an old slot: %v", err)
		}
	})
	t.Run("BoundedWhenFull", func(t *testing.T) {
		r := newReplayRing(64)
		for i := range 10_000 {
			if err := r.claim(keyN(i), now, until); err != nil {
				t.Fatalf("claim %d: %v", i, err)
			}
		}
		if n := r.len(); n != 64 {
			t.Fatalf("remembers %d signatures, want the capacity 64", n)
		}
		if err := r.claim(keyN(9_999), now, until); !errors.Is(err, ErrReplay) {
			t.Fatalf("newest signature not remembered: %v", err)
		}
	})
	t.Run("GrowsKeepingEveryEntry", func(t *testing.T) {
		r := newReplayRing(1 << 13) // starts at 1,024 and doubles
		for i := range 1 << 13 {
			if err := r.claim(keyN(i), now, until); err != nil {
				t.Fatalf("claim %d: %v", i, err)
			}
			if i == 700 {
				r.forget(keyN(3)) // a hole the growth must carry along
			}
		}
		for i := range 1 << 13 {
			err := r.claim(keyN(i), now, until)
			if i == 3 {
				continue // forgotten, so accepted again (and the ring, full, drops one)
			}
			if !errors.Is(err, ErrReplay) {
				t.Fatalf("signature %d forgotten by the growth: %v", i, err)
			}
		}
	})
	t.Run("ExpiredDroppedOverTime", func(t *testing.T) {
		r := newReplayRing(1 << 10)
		for i := range 100 {
			_ = r.claim(keyN(i), now, until)
		}
		_ = r.claim(keyN(1000), until.Add(time.Second), until.Add(time.Minute))
		if n := r.len(); n != 1 {
			t.Fatalf("after the window %d signatures remembered, want 1", n)
		}
	})
}

// TestVerifierRefusesReplayOverHTTP: the same signed request twice through
// readVerified; the second is ErrReplay, and after release it is accepted.
func TestVerifierRefusesReplayOverHTTP(t *testing.T) {
	t.Parallel()
	now := time.Now()
	v := newVerifier(testSecret, func() time.Time { return now })
	body := []byte(`{"type":"event_callback"}`)
	ts := now.Unix()
	var lastRelease func() // this test's own, not the package's: tests run in parallel
	req := func() error {
		r := httptest.NewRequest("POST", "/slack/events", bytes.NewReader(body))
		r.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
		r.Header.Set("X-Slack-Signature", sign(testSecret, ts, body))
		_, release, err := v.readVerified(r, 1<<20)
		if err == nil && release == nil {
			return fmt.Errorf("no release function")
		}
		if err == nil {
			lastRelease = release
		}
		return err
	}
	if err := req(); err != nil {
		t.Fatal(err)
	}
	if err := req(); !errors.Is(err, ErrReplay) {
		t.Fatalf("replay: %v, want ErrReplay", err)
	}
	lastRelease()
	if err := req(); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

// BenchmarkReplayClaim measures one replay check with the ring full (the
// steady state of sustained traffic): it must not depend on how many
// signatures are remembered.
func BenchmarkReplayClaim(b *testing.B) {
	for _, held := range []int{1 << 10, 1 << 17} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			r := newReplayRing(held)
			now := time.Unix(1_700_000_000, 0)
			keys := make([]sigKey, held+1<<16)
			for i := range keys {
				keys[i] = keyN(i)
			}
			for i := range held {
				_ = r.claim(keys[i], now, now.Add(signatureWindow))
			}
			i := held
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				_ = r.claim(keys[i%len(keys)], now, now.Add(signatureWindow))
				i++
			}
		})
	}
}

// FuzzReplayRing drives the ring with claims, forgets and clock steps
// decoded from the input and compares every answer with a plain map that
// never forgets early (the ring is large enough not to evict).
func FuzzReplayRing(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 2, 1, 0, 1, 3, 200, 0, 1})
	f.Add([]byte{0, 5, 0, 6, 1, 5, 0, 5, 3, 255, 3, 255, 0, 6})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 2048 {
			return
		}
		r := newReplayRing(4096)
		model := map[sigKey]time.Time{}
		now := time.Unix(1_700_000_000, 0)
		for i := 0; i+1 < len(ops); i += 2 {
			k := keyN(int(ops[i+1] % 32))
			switch ops[i] % 4 {
			case 0, 1: // claim, valid for a window from a skewed timestamp
				until := now.Add(time.Duration(ops[i+1]%16) * time.Minute / 4)
				want := false
				if u, ok := model[k]; ok && !now.After(u) {
					want = true
				}
				err := r.claim(k, now, until)
				if got := errors.Is(err, ErrReplay); got != want {
					t.Fatalf("op %d: claim replay=%v, want %v", i/2, got, want)
				}
				if !want {
					model[k] = until
				}
			case 2:
				r.forget(k)
				delete(model, k)
			case 3:
				now = now.Add(time.Duration(ops[i+1]) * time.Second)
			}
		}
	})
}
