package slack

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
)

func runCount(t *testing.T, e *env) int {
	t.Helper()
	return e.h.Counts().Runs
}

// url_verification is answered with its challenge (and only when signed).
func TestURLVerification(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := fill(t, "url_verification.json", nil)
	var got map[string]string
	if err := json.Unmarshal(status(t, e.event(body, nil), http.StatusOK), &got); err != nil {
		t.Fatal(err)
	}
	if got["challenge"] != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Fatalf("challenge = %v", got)
	}
	status(t, e.signedAt("/slack/events", "application/json", body, 0, "wrong-secret", nil), http.StatusUnauthorized)
}

// Slack retries an event (X-Slack-Retry-Num, signed afresh) until it gets
// a 200: every delivery is acked, one run starts.
func TestDuplicateEventsWithRetryHeadersStartOneRun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := fill(t, "event_app_mention.json", nil)
	status(t, e.event(body, nil), http.StatusOK)
	base := time.Now().Unix() // once: a second passing mid-loop must not repeat a timestamp
	for i := 1; i <= 3; i++ {
		// Each retry is a new request with its own timestamp and signature.
		ts := base - 10 - int64(i)
		res := e.signedAt("/slack/events", "application/json", body, ts, testSecret, map[string]string{
			"X-Slack-Retry-Num": strconv.Itoa(i), "X-Slack-Retry-Reason": "http_timeout",
		})
		status(t, res, http.StatusOK)
	}
	if n := runCount(t, e); n != 1 {
		t.Fatalf("runs = %d, want 1", n)
	}
	run := e.runOf("1700000100.000200")
	if run.Thread.Key != "T1/C1/1700000100.000200" || run.Requester != requester || run.Flow != "deploy" {
		t.Fatalf("run = %+v", run)
	}
	if run.Args["service"] != "api" || run.Args["version"] != "1.2.3" {
		t.Fatalf("mention not stripped: args %v", run.Args)
	}
}

// Which events reach opsgate: mentions, DMs and follow-ups in the bot's
// threads do; the bot's own messages, edits and channel chatter do not.
func TestEventSelection(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file string
		runs int
	}{
		{"event_app_mention.json", 1},
		{"event_message_thread.json", 1},
		{"event_message_im.json", 1},
		{"event_bot_message.json", 0},
		{"event_message_changed.json", 0},
		{"event_message_channel_top.json", 0},
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.file, ".json"), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			before := e.h.Counts()
			status(t, e.event(fill(t, c.file, nil), nil), http.StatusOK)
			after := e.h.Counts()
			if after.Runs-before.Runs != c.runs {
				t.Fatalf("runs %d → %d, want +%d", before.Runs, after.Runs, c.runs)
			}
		})
	}
}

// Ignored events record nothing at all; a DM starts a run answered in a
// thread under the person's message.
func TestIgnoredEventsRecordNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, f := range []string{"event_bot_message.json", "event_message_changed.json", "event_message_channel_top.json"} {
		status(t, e.event(fill(t, f, nil), nil), http.StatusOK)
	}
	e.h.StoreEmpty(t)
	status(t, e.event(fill(t, "event_message_im.json", nil), nil), http.StatusOK)
	run := e.runOf("1700000300.000400")
	if run.Thread.Key != "T1/D1/1700000300.000400" || run.Args["env"] != "<prod>" {
		t.Fatalf("DM run thread %s args %v (entities must be decoded)", run.Thread.Key, run.Args)
	}
	e.h.Eventually("card in the DM thread", func() bool {
		return len(e.fake.Thread("D1", "1700000300.000400")) > 0
	})
}

// Forged signatures, stale timestamps, replayed bodies, malformed payloads
// and oversize bodies are refused with 401/400 and record nothing. Forged
// button values and modal metadata are well-formed Slack payloads: they
// are answered 200 (with a "not valid" message) and record nothing either.
func TestBadInputRecordsNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config, _ *adaptertest.HarnessOptions) { c.MaxBodyBytes = 64 << 10 })
	badInput(t, e)
	e.h.StoreEmpty(t)
}

func badInput(t *testing.T, e *env) {
	mention := fill(t, "event_app_mention.json", nil)
	form := "application/x-www-form-urlencoded"
	slashForm := bytes.TrimSpace(fill(t, "slash_command.form", nil))
	now := time.Now().Unix()
	cases := []struct {
		name string
		res  func() *http.Response
		want int
	}{
		{"ForgedSignature", func() *http.Response {
			return e.signedAt("/slack/events", "application/json", mention, 0, "not-the-secret", nil)
		}, 401},
		{"MissingSignature", func() *http.Response { return e.raw("/slack/events", "application/json", mention) }, 401},
		{"StaleTimestamp", func() *http.Response {
			return e.signedAt("/slack/events", "application/json", mention, now-6*60, testSecret, nil)
		}, 401},
		{"FutureTimestamp", func() *http.Response {
			return e.signedAt("/slack/commands", form, slashForm, now+6*60, testSecret, nil)
		}, 401},
		{"BodyAlteredAfterSigning", func() *http.Response {
			sig := sign(testSecret, now, mention)
			alt := bytes.Replace(mention, []byte("1.2.3"), []byte("6.6.6"), 1)
			return e.raw("/slack/events", "application/json", alt, map[string]string{
				"X-Slack-Request-Timestamp": strconv.FormatInt(now, 10), "X-Slack-Signature": sig})
		}, 401},
		{"MalformedJSON", func() *http.Response {
			return e.signedAt("/slack/events", "application/json", []byte(`{"type":"event_callback","event_id":`), 0, testSecret, nil)
		}, 400},
		{"EventWithoutID", func() *http.Response {
			return e.signedAt("/slack/events", "application/json", []byte(`{"type":"event_callback","event":{"type":"app_mention"}}`), 0, testSecret, nil)
		}, 400},
		{"MentionWithoutChannel", func() *http.Response {
			return e.signedAt("/slack/events", "application/json", bytes.Replace(mention, []byte(`"channel": "C1",`), nil, 1), 0, testSecret, nil)
		}, 400},
		{"SlashWithoutUser", func() *http.Response {
			return e.signedAt("/slack/commands", form, bytes.Replace(slashForm, []byte("user_id=UREQ&"), nil, 1), 0, testSecret, nil)
		}, 400},
		{"InteractionWithoutPayload", func() *http.Response {
			return e.signedAt("/slack/interactivity", form, []byte("foo=bar"), 0, testSecret, nil)
		}, 400},
		{"InteractionNotJSON", func() *http.Response {
			return e.signedAt("/slack/interactivity", form, []byte("payload=%7Bnope"), 0, testSecret, nil)
		}, 400},
		{"ForgedButtonValue", func() *http.Response {
			return e.interact(fill(t, "block_actions.json", map[string]string{
				"CARD_TS": "1.1", "ROOT_TS": "1.0", "TRIGGER": "forged.1", "ACTION": actionApprove,
				"VALUE": "some-approval.AAAAAAAAAAAAAAAA",
			}))
		}, 200},
		{"ButtonValueFromAnotherAction", func() *http.Response {
			return e.interact(fill(t, "block_actions.json", map[string]string{
				"CARD_TS": "1.1", "ROOT_TS": "1.0", "TRIGGER": "forged.2", "ACTION": actionApprove,
				"VALUE": e.a.sign.buttonValue(actionReject, "some-approval"),
			}))
		}, 200},
		{"ForgedModalMetadata", func() *http.Response {
			return e.interact(fill(t, "view_submission.json", map[string]string{
				"TRIGGER": "forged.3", "META": "some-approval|T1/C1/1.0|AAAAAAAAAAAAAAAA", "CALLBACK": callbackReject,
				"VALUES": `{"reason":{"value":{"type":"plain_text_input","value":"no"}}}`,
			}))
		}, 200},
		{"OversizeBody", func() *http.Response {
			big := append([]byte(`{"type":"event_callback","pad":"`), bytes.Repeat([]byte("x"), 70<<10)...)
			return e.signedAt("/slack/events", "application/json", append(big, `"}`...), 0, testSecret, nil)
		}, 400},
	}
	for _, c := range cases {
		res := c.res()
		if res.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d", c.name, res.StatusCode, c.want)
		}
	}
	// A replayed body: the very same signed request twice. The first is
	// refused for its altered twin's sake only if it was malformed; use a
	// well-signed but ignored event so the first attempt records nothing.
	chatter := fill(t, "event_message_channel_top.json", nil)
	sig := sign(testSecret, now, chatter)
	hdr := map[string]string{"X-Slack-Request-Timestamp": strconv.FormatInt(now, 10), "X-Slack-Signature": sig}
	if res := e.raw("/slack/events", "application/json", chatter, hdr); res.StatusCode != 200 {
		t.Errorf("first delivery: %d", res.StatusCode)
	}
	if res := e.raw("/slack/events", "application/json", chatter, hdr); res.StatusCode != 401 {
		t.Errorf("Replay: status %d, want 401", res.StatusCode)
	}
}

// A replayed slash command is refused before any root message is posted.
func TestReplayedSlashCommandRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := bytes.TrimSpace(fill(t, "slash_command.form", nil))
	now := time.Now().Unix()
	hdr := map[string]string{"X-Slack-Request-Timestamp": strconv.FormatInt(now, 10), "X-Slack-Signature": sign(testSecret, now, body)}
	status(t, e.raw("/slack/commands", "application/x-www-form-urlencoded", body, hdr), 200)
	status(t, e.raw("/slack/commands", "application/x-www-form-urlencoded", body, hdr), 401)
	if n := len(e.roots()); n != 1 {
		t.Fatalf("root messages = %d, want 1", n)
	}
	if n := runCount(t, e); n != 1 {
		t.Fatalf("runs = %d, want 1", n)
	}
}

// When the root message cannot be posted, the caller is told why and
// nothing is recorded.
func TestSlashRootPostFailureIsExplained(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.fake.Fail("chat.postMessage", "not_in_channel")
	b := status(t, e.slash("UREQ", "deploy api 1.2.3"), http.StatusOK)
	var got map[string]string
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["response_type"] != "ephemeral" || !strings.Contains(got["text"], "/invite") {
		t.Fatalf("answer = %v", got)
	}
	e.h.StoreEmpty(t)
}

// The ack never waits on a slow Slack longer than RootPostTimeout: Slack
// holds the root post until the test releases it, so an answer that
// arrives while it is held did not wait for Slack, whatever the load.
func TestSlashAckBoundedWhenSlackIsSlow(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config, _ *adaptertest.HarnessOptions) { c.RootPostTimeout = 200 * time.Millisecond })
	release := e.fake.Hold("chat.postMessage")
	defer release()
	b := status(t, answeredWhileHeld(t, "slash command", func() *http.Response { return e.slash("UREQ", "deploy api 1.2.3") }), http.StatusOK)
	if !strings.Contains(string(b), "did not answer in time") {
		t.Fatalf("answer = %s", b)
	}
	e.h.StoreEmpty(t)
}

// Follow-ups are normalized to the thread of the run they follow.
func TestThreadFollowUpAddressesTheRunThread(t *testing.T) {
	t.Parallel()
	e := setup(t)
	root, _ := e.startDeploy()
	body := bytes.ReplaceAll(fill(t, "event_message_thread.json", nil), []byte("1700000000.000001"), []byte(root.TS))
	status(t, e.event(body, nil), http.StatusOK)
	runs, _, err := e.h.Store.RunList(t.Context(), core.RunListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Thread != runs[1].Thread {
		t.Fatalf("runs = %d; threads differ or missing", len(runs))
	}
}
