package slack

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

// fuzzAdapter has no reachable Slack: any Web API call fails fast.
func fuzzAdapter(f *testing.F) *Adapter {
	a, err := New(Config{BotToken: "xoxb-1", SigningSecret: testSecret, APIURL: "http://127.0.0.1:1/api/", BotUserID: "UBOT"},
		Deps{Sink: nopSink{}, Cards: nopCards{}, HTTPClient: &http.Client{Timeout: 100 * time.Millisecond}})
	if err != nil {
		f.Fatal(err)
	}
	return a
}

func seed(f *testing.F, names ...string) {
	for _, n := range names {
		b, err := os.ReadFile("testdata/" + n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzEvents: any signed body gets 200 or 400 from /slack/events, never a
// panic; a normalized event always has an id, an actor and a valid thread.
func FuzzEvents(f *testing.F) {
	seed(f, "event_app_mention.json", "event_message_thread.json", "event_message_im.json", "event_bot_message.json",
		"event_message_changed.json", "event_message_channel_top.json", "url_verification.json")
	a := fuzzAdapter(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		env, err := parseEnvelope(body)
		if err == nil && env.Type == "event_callback" {
			ev, ok, err := normalizeEvent(env, body, eventContext{botUserID: "UBOT", now: time.Now()})
			if err == nil && ok {
				if ev.EventID == "" || !strings.HasPrefix(ev.Actor.ID, "slack:") || ev.Actor.ID == "slack:UBOT" {
					t.Fatalf("bad event %+v", ev)
				}
				if _, err := parseThreadKey(ev.Thread.Key); err != nil {
					t.Fatalf("bad thread: %v", err)
				}
			}
		}
		rec := postSigned(a.Events(), "/slack/events", body)
		if !acceptable(rec) {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}

// FuzzSlashCommand: the form parser and handler never panic, and a command
// is accepted only with its required fields.
func FuzzSlashCommand(f *testing.F) {
	seed(f, "slash_command.form")
	f.Add([]byte("command=%2Fops&user_id=U&channel_id=C&trigger_id=t&text=%ZZ"))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := parseSlashForm(body)
		if err == nil && (c.UserID == "" || c.ChannelID == "" || c.TriggerID == "") {
			t.Fatalf("accepted incomplete command %+v", c)
		}
		if _, err := parseSlashJSON(body); err == nil && !bytes.Contains(body, []byte("user_id")) {
			t.Fatalf("accepted JSON without user_id: %q", body)
		}
	})
}

// FuzzInteraction: any signed interaction body gets 200 or 400 (never a
// decision without a verified reference, never a panic).
func FuzzInteraction(f *testing.F) {
	seed(f, "block_actions.json", "view_submission.json")
	a := fuzzAdapter(f)
	f.Fuzz(func(t *testing.T, payload []byte) {
		if in, err := parseInteraction(payload); err == nil && in.User.ID == "" {
			t.Fatal("interaction without user accepted")
		}
		body := []byte("payload=" + url.QueryEscape(string(payload)))
		rec := postSigned(a.Interactivity(), "/slack/interactivity", body)
		// Notices sent after the ack run in the background: wait for them,
		// so each input's coverage is its own (and minimizing terminates).
		if err := a.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !acceptable(rec) {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}

// FuzzRefs: button values and modal metadata never verify unless signed.
func FuzzRefs(f *testing.F) {
	s := newSigner(testSecret)
	f.Add(s.buttonValue(actionApprove, "ap-1"))
	f.Add(s.encodeModalRef(modalRef{Callback: callbackEdit, ApprovalID: "ap-1", Thread: threadKey{"T", "C", "1.1"}}))
	f.Add("ap-1.AAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, v string) {
		if id, err := s.parseButtonValue(actionApprove, v); err == nil && v != s.buttonValue(actionApprove, id) {
			t.Fatalf("unsigned value %q verified", v)
		}
		if r, err := s.parseModalRef(callbackEdit, v); err == nil && v != s.encodeModalRef(r) {
			t.Fatalf("unsigned metadata %q verified", v)
		}
		_, _ = parseThreadKey(v)
		_ = cleanText(v, "UBOT")
	})
}

// FuzzRenderCard: whatever a card holds, its blocks stay inside Block Kit's
// limits and keep their buttons.
func FuzzRenderCard(f *testing.F) {
	a := fuzzAdapter(f)
	f.Add("deploy", "api", "x", strings.Repeat("<&>`", 100), 3)
	f.Fuzz(func(t *testing.T, tool, value, reason, preview string, nargs int) {
		c := testCard()
		c.Tool, c.Reason, c.Preview = tool, reason, strings.Repeat(preview, 20)
		nargs = min(max(nargs, 0), 200)
		for i := range nargs {
			c.Args = append(c.Args, core.CardArg{Name: "a" + strconv.Itoa(i), Value: value})
		}
		blocks, _ := a.renderCard(c)
		raw := checkLimits(t, blocks)
		if !strings.Contains(raw, actionApprove) {
			t.Fatal("buttons lost")
		}
	})
}

func postSigned(h http.Handler, path string, body []byte) *httptest.ResponseRecorder {
	ts := time.Now().Unix()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Slack-Signature", sign(testSecret, ts, body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// acceptable is 200, 400, or 401 for a replay: the fuzzer may run the same
// input twice within one second, which is exactly a replayed request.
func acceptable(rec *httptest.ResponseRecorder) bool {
	return rec.Code == 200 || rec.Code == 400 || (rec.Code == 401 && strings.Contains(rec.Body.String(), "replayed"))
}
