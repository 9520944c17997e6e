package discord

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
)

// badInput posts forged, stale and malformed interactions and checks each
// is refused with 401/400/413.
func (e *env) badInput(t *testing.T) {
	t.Helper()
	good, _ := json.Marshal(e.slash(requester, "ops", map[string]string{"command": "deploy api 1.2.3"}))
	now := time.Now().Unix()
	ts := strconv.FormatInt(now, 10)
	sig := e.sign(good, ts)
	stale := strconv.FormatInt(now-6*60, 10)
	future := strconv.FormatInt(now+6*60, 10)
	flipped := []byte(sig)
	if flipped[0] == 'a' {
		flipped[0] = 'b'
	} else {
		flipped[0] = 'a'
	}
	tampered := bytes.Replace(good, []byte("deploy api"), []byte("deploy web"), 1)
	signed := func(b []byte) (string, string) { return e.sign(b, ts), ts }
	cases := []struct {
		name    string
		body    []byte
		sig, ts string
		want    int
	}{
		{"no signature", good, "", ts, 401},
		{"no timestamp", good, sig, "", 401},
		{"signature not hex", good, "zz" + sig[2:], ts, 401},
		{"signature flipped", good, string(flipped), ts, 401},
		{"body tampered", tampered, sig, ts, 401},
		{"timestamp changed", good, sig, strconv.FormatInt(now+1, 10), 401},
		{"stale timestamp", good, e.sign(good, stale), stale, 401},
		{"future timestamp", good, e.sign(good, future), future, 401},
		{"timestamp not a number", good, e.sign(good, "soon"), "soon", 401},
		{"signed by another key", good, strings.Repeat("ab", 64), ts, 401},
	}
	for _, b := range [][]byte{
		[]byte(`{`), []byte(`[]`), []byte(`null`), []byte(`{"type":2}`),
		[]byte(`{"id":"1","type":2,"token":"t","channel_id":"2"}`),                                                      // no data, no user
		[]byte(`{"id":"1","type":2,"token":"t","channel_id":"2","data":{"name":"ops"}}`),                                // no user
		[]byte(`{"id":"x","type":1}`),                                                                                   // bad id
		[]byte(`{"id":"1","type":3,"token":"","channel_id":"2","member":{"user":{"id":"3"}},"data":{"custom_id":"a"}}`), // no token
		[]byte(`{"id":"1","type":99,"token":"t","channel_id":"2","member":{"user":{"id":"3"}}}`),                        // unknown type
	} {
		s, t := signed(b)
		cases = append(cases, struct {
			name    string
			body    []byte
			sig, ts string
			want    int
		}{fmt.Sprintf("malformed %s", b), b, s, t, 400})
	}
	huge := []byte(`{"id":"1","type":1,"pad":"` + strings.Repeat("x", 1<<20) + `"}`)
	hs, ht := signed(huge)
	cases = append(cases, struct {
		name    string
		body    []byte
		sig, ts string
		want    int
	}{"oversize", huge, hs, ht, http.StatusRequestEntityTooLarge})
	for _, c := range cases {
		if w := e.postRaw(c.body, c.sig, c.ts); w.Code != c.want {
			t.Errorf("%s: answered %d, want %d", c.name, w.Code, c.want)
		}
	}
	r := httptestGet(e)
	if r != http.StatusMethodNotAllowed {
		t.Errorf("GET answered %d, want 405", r)
	}
}

func httptestGet(e *env) int {
	req, _ := http.NewRequest(http.MethodGet, InteractionsPath, nil)
	w := &codeRecorder{h: http.Header{}}
	e.ad.InteractionsHandler().ServeHTTP(w, req)
	return w.code
}

type codeRecorder struct {
	h    http.Header
	code int
}

func (c *codeRecorder) Header() http.Header         { return c.h }
func (c *codeRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (c *codeRecorder) WriteHeader(code int)        { c.code = code }

func TestBadInputRecordsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.badInput(t)
	e.h.StoreEmpty(t)
	for _, ev := range e.fake.Log() {
		t.Errorf("bad input made the bot post %+v", ev)
	}
}

func TestConformance(t *testing.T) {
	var mu sync.Mutex
	envs := map[*adaptertest.Harness]*env{}
	adaptertest.RunConformance(t, adaptertest.Suite{
		New: func(t *testing.T) (*adaptertest.Harness, adaptertest.Fake) {
			e := newEnv(t, envOpts{})
			mu.Lock()
			envs[e.h] = e
			mu.Unlock()
			return e.h, received{e}
		},
		Thread:    core.Thread{Channel: ChannelName, Key: guildID + "/" + conformanceChannel + "/" + conformanceChannel},
		Requester: "discord:" + requester,
		Approver:  "discord:" + approverID,
		Inert: func(in, out string) error {
			for _, live := range []string{"@everyone", "@here", "<@", "<#", "<!", "<script", "](javascript:"} {
				if strings.Contains(out, live) {
					return fmt.Errorf("live %q", live)
				}
			}
			if in == "*" || in == "_" || in == "`" || strings.HasPrefix(in, "**") {
				if !strings.Contains(out, `\`) {
					return fmt.Errorf("stray markup %q not escaped", in)
				}
			}
			return nil
		},
		BadInput: func(t *testing.T, h *adaptertest.Harness) {
			mu.Lock()
			e := envs[h]
			mu.Unlock()
			e.badInput(t)
		},
	})
}
