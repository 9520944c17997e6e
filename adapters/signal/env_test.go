package signal

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/signal/internal/fakesignal"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/core/engine"
)

const (
	botNumber   = "+15550009999"
	aliceNumber = "+15550000001"
	bobNumber   = "+15550000002"
	carolNumber = "+15550000003"
	opsGroup    = "Pmpi+EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI="
)

type env struct {
	t    *testing.T
	fake *fakesignal.Server
	h    *adaptertest.Harness
	ad   *Adapter
	stop func()
}

type envOpts struct {
	noRun bool
	// base is the harness's options as a case asked for them.
	base adaptertest.HarnessOptions
	// harness adjusts the harness's options (agents, tools, pacing).
	harness func(*adaptertest.HarnessOptions)
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	e := &env{t: t, fake: fakesignal.New(t, botNumber)}
	ho := o.base
	ho.Approvers = []string{"signal:" + bobNumber}
	ho.Requesters = map[string]engine.Requesters{ChannelName: {Entries: []string{"signal:" + aliceNumber, "signal:" + bobNumber, "signal:" + carolNumber}}}
	ho.Platform = func(h *adaptertest.Harness) delivery.Platform {
		e.ad = e.newAdapter(h)
		return e.ad
	}
	if o.harness != nil {
		o.harness(&ho)
	}
	e.h = adaptertest.NewHarness(t, ho)
	if !o.noRun {
		e.start()
	}
	return e
}

func (e *env) newAdapter(h *adaptertest.Harness) *Adapter {
	ad, err := New(Config{DaemonURL: e.fake.URL, Account: botNumber, Groups: []string{opsGroup}},
		Deps{Sink: h.Engine, Cards: h.Engine, Store: h.Store, Logger: slog.New(slog.NewTextHandler(testLogOut, nil))})
	if err != nil {
		e.t.Fatal(err)
	}
	return ad
}

func (e *env) start() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = e.ad.Run(ctx) }()
	e.stop = func() { cancel(); wg.Wait() }
	e.t.Cleanup(e.stop)
	// signal-cli replays nothing to a reader without Last-Event-ID: wait
	// until the stream is open before pushing.
	e.h.Eventually("the event stream to connect", func() bool { return e.fake.Clients() > 0 })
}

// payload reads a recorded envelope from testdata, with TARGET replaced
// and its timestamps made fresh (each push is a new message).
func (e *env) payload(name string, target int64) string {
	e.t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		e.t.Fatal(err)
	}
	s := strings.ReplaceAll(string(b), "TARGET", strconv.FormatInt(target, 10))
	ts := strconv.FormatInt(e.fake.Now(), 10)
	for _, old := range []string{"1700000000001", "1700000000002", "1700000000003", "1700000000004", "1700000000005"} {
		s = strings.ReplaceAll(s, old, ts)
	}
	return s
}

// dm is a direct message from number, shaped like receive_dm.json.
func (e *env) dm(number, text string) string {
	s := e.payload("receive_dm.json", 0)
	s = strings.ReplaceAll(s, aliceNumber, number)
	return strings.Replace(s, `"message":"!ops deploy api 1.2.3"`, `"message":`+strconv.Quote(text), 1)
}

// waitSent waits for a send matching ok.
func (e *env) waitSent(what string, ok func(fakesignal.Sent) bool) fakesignal.Sent {
	e.t.Helper()
	var found fakesignal.Sent
	e.h.Eventually(what, func() bool {
		for _, s := range e.fake.Sent() {
			if ok(s) {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

func (e *env) runs() []*core.Run {
	runs, _, err := e.h.Store.RunList(context.Background(), core.RunListParams{Limit: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	return runs
}

// received shows the fake's log as adaptertest reads a platform.
type received struct{ f *fakesignal.Server }

func (r received) Received() []adaptertest.Message {
	var out []adaptertest.Message
	for _, s := range r.f.Sent() {
		k := threadKey{Group: s.GroupID}
		if s.GroupID == "" && len(s.Recipient) > 0 {
			k.User = s.Recipient[0]
		}
		m := adaptertest.Message{Thread: core.Thread{Channel: ChannelName, Key: k.String()}, ID: messageRef(k, s.Timestamp), Text: s.Message}
		if s.EditTimestamp > 0 {
			m.ID = messageRef(k, s.EditTimestamp)
			m.EditOf = m.ID
		}
		out = append(out, m)
	}
	return out
}

var _ = time.Second

var testLogOut io.Writer = io.Discard
