package discord

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/discord/internal/fakediscord"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/approvalref"
)

// askDeploy runs `/ops command:deploy api 1.2.3` as the requester and
// returns the card posted in the new thread.
func (e *env) askDeploy() fakediscord.Message {
	e.t.Helper()
	r := e.post(e.slash(requester, "ops", map[string]string{"command": "deploy api 1.2.3"}))
	if r.Type != 5 {
		e.t.Fatalf("slash command answered type %d, want 5 (deferred)", r.Type)
	}
	root := e.waitMessage("the root message", func(m fakediscord.Message) bool { return m.ChannelID == channelID })
	return e.waitCard(root.ID) // the thread started from the root has its id
}

func TestSlashCommandApproveRunsToolInThreadAndEditsCard(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	card := e.askDeploy()

	root, _ := e.fake.Message(card.ChannelID)
	if !strings.Contains(root.Content, "<@"+requester+">") || !strings.Contains(root.Content, "deploy api 1.2.3") {
		t.Errorf("root message = %q, want the requester and the command", root.Content)
	}
	// The deferred response is followed up through the interaction webhook.
	e.h.Eventually("the follow-up", func() bool {
		for _, f := range e.fake.Followups() {
			var body struct{ Content string }
			json.Unmarshal([]byte(f.Body), &body)
			if f.Method == http.MethodPatch && strings.HasPrefix(f.Path, "/webhooks/"+appID+"/") && strings.HasSuffix(f.Path, "/messages/@original") &&
				strings.Contains(body.Content, "<#"+card.ChannelID+">") {
				return true
			}
		}
		return false
	})
	text := visible(card)
	for _, want := range []string{"deploy", "service", "api", "version", "1.2.3", "high_impact", "discord:" + requester, "discord:" + approverID, "Expires", "Dry run", "```", "would deploy api 1.2.3"} {
		if !strings.Contains(text, want) {
			t.Errorf("card lacks %q:\n%s", want, text)
		}
	}
	bs := buttons(card)
	for _, l := range []string{"Approve", "Reject", "Edit"} {
		if id := bs[l]; id == "" || len(id) > MaxCustomID {
			t.Errorf("button %s custom_id %q (want 1..%d chars)", l, id, MaxCustomID)
		}
	}

	r := e.post(e.click(approverID, card, bs["Approve"]))
	if r.Type != 4 || r.Data.Flags&64 == 0 || !strings.Contains(r.Data.Content, "Approved") {
		t.Errorf("approve answered %+v, want an ephemeral Approved", r)
	}
	e.h.Eventually("deploy dispatched", func() bool { return len(e.h.Dispatches()) == 1 })
	if c := e.h.Dispatches()[0]; c.Args["service"] != "api" || c.Args["version"] != "1.2.3" {
		t.Errorf("dispatched %v", c.Args)
	}
	e.waitMessage("the result in the thread", func(m fakediscord.Message) bool {
		return m.ChannelID == card.ChannelID && strings.Contains(m.Content, "deployed api 1.2.3 to staging")
	})
	e.h.Eventually("card edited in place, buttons removed", func() bool {
		m, _ := e.fake.Message(card.ID)
		return m.Edits > 0 && len(m.Components) == 0 && strings.Contains(visible(m), "Approved by discord:"+approverID)
	})

	// The stale button is answered and changes nothing.
	r = e.post(e.click(approverID, card, bs["Approve"]))
	if !strings.Contains(strings.ToLower(r.Data.Content), "already") || r.Data.Flags&64 == 0 {
		t.Errorf("stale click answered %+v, want an ephemeral already decided", r)
	}
	if n := len(e.h.Dispatches()); n != 1 {
		t.Errorf("dispatches = %d after a stale click, want 1", n)
	}
}

func TestFlowCommandWithTypedOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := e.post(e.slash(requester, "deploy", map[string]string{"service": "api", "version": "2.0 beta", "env": "prod"}))
	if r.Type != 5 {
		t.Fatalf("answered type %d, want 5", r.Type)
	}
	root := e.waitMessage("the root message", func(m fakediscord.Message) bool { return m.ChannelID == channelID })
	card := e.waitCard(root.ID)
	if !strings.Contains(visible(card), "2.0 beta") || !strings.Contains(visible(card), "prod") {
		t.Errorf("card does not show the typed options:\n%s", visible(card))
	}
}

func TestRejectThroughModal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	card := e.askDeploy()
	rid := buttons(card)["Reject"]

	r := e.post(e.click(approverID, card, rid))
	if r.Type != 9 || r.Data.CustomID != rid || len(r.Data.Title) > 45 {
		t.Fatalf("reject click answered %+v, want a modal with the signed custom_id", r)
	}
	// An empty reason is asked for again and changes nothing.
	r = e.post(e.submit(approverID, card, rid, map[string]string{inputReason: "  "}))
	if r.Data.Flags&64 == 0 || !strings.Contains(r.Data.Content, "reason") {
		t.Errorf("empty reason answered %+v", r)
	}
	r = e.post(e.submit(approverID, card, rid, map[string]string{inputReason: "not during the freeze"}))
	if r.Data.Flags&64 == 0 || !strings.Contains(r.Data.Content, "Rejected") {
		t.Errorf("reject answered %+v", r)
	}
	e.h.Eventually("card shows the rejection, buttons removed", func() bool {
		m, _ := e.fake.Message(card.ID)
		return len(m.Components) == 0 && strings.Contains(visible(m), "not during the freeze") && strings.Contains(visible(m), "Rejected by discord:"+approverID)
	})
	if n := len(e.h.Dispatches()); n != 0 {
		t.Errorf("rejected deploy dispatched %d times", n)
	}
}

func TestEditThroughModalInvalidThenValid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	card := e.askDeploy()
	eid := buttons(card)["Edit"]

	r := e.post(e.click(approverID, card, eid))
	if r.Type != 9 || r.Data.CustomID != eid {
		t.Fatalf("edit click answered %+v, want a modal", r)
	}
	if n := len(r.Data.Components); n != 3 {
		t.Errorf("edit modal has %d inputs, want one per argument (3)", n)
	}
	prefilled := map[string]string{}
	for _, row := range r.Data.Components {
		cs, _ := row["components"].([]any)
		for _, c := range cs {
			in, _ := c.(map[string]any)
			prefilled[in["custom_id"].(string)], _ = in["value"].(string)
		}
	}
	if prefilled[inputArg+"service"] != "api" || prefilled[inputArg+"version"] != "1.2.3" {
		t.Errorf("edit modal prefilled %v", prefilled)
	}

	before := e.h.Counts()
	bad := map[string]string{inputArg + "service": "API with spaces!", inputArg + "version": "1.2.4", inputArg + "env": "prod"}
	r = e.post(e.submit(approverID, card, eid, bad))
	if r.Type != 4 || r.Data.Flags&64 == 0 || !strings.Contains(r.Data.Content, "Arguments not accepted") || !strings.Contains(r.Data.Content, "service") {
		t.Errorf("invalid edit answered %+v, want the validator's message, ephemeral", r)
	}
	if after := e.h.Counts(); after.Runs != before.Runs || after.Approvals != before.Approvals {
		t.Errorf("invalid edit changed the store: %+v → %+v", before, after)
	}
	if n := len(e.h.Dispatches()); n != 0 {
		t.Fatalf("invalid edit dispatched %d times", n)
	}

	good := map[string]string{inputArg + "service": "api", inputArg + "version": "1.2.4", inputArg + "env": "prod"}
	r = e.post(e.submit(approverID, card, eid, good))
	if !strings.Contains(r.Data.Content, "Edited") {
		t.Errorf("valid edit answered %+v", r)
	}
	e.h.Eventually("edited deploy dispatched", func() bool { return len(e.h.Dispatches()) == 1 })
	if c := e.h.Dispatches()[0]; c.Args["version"] != "1.2.4" || c.Args["env"] != "prod" {
		t.Errorf("dispatched %v, want the edited arguments", c.Args)
	}
	e.waitMessage("the result", func(m fakediscord.Message) bool {
		return strings.Contains(m.Content, "deployed api 1.2.4 to prod")
	})
}

func TestForgedCustomIDRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	card := e.askDeploy()
	id := buttons(card)["Approve"]
	before := e.h.Counts()
	forged := id[:len(id)-3] + "AAA"
	if forged == id {
		forged = id[:len(id)-3] + "BBB"
	}
	other, err := testButtons(t, "another bot's token").Encode(approvalref.Ref{Action: approvalref.Approve, ApprovalID: strings.Repeat("x", 10)})
	if err != nil {
		t.Fatal(err)
	}
	for _, cid := range []string{forged, other, "og1.nonsense", "something-else-entirely"} {
		r := e.post(e.click(approverID, card, cid))
		if r.Type != 4 || r.Data.Flags&64 == 0 || !strings.Contains(r.Data.Content, "not valid") {
			t.Errorf("custom_id %q answered %+v, want an ephemeral refusal", cid, r)
		}
		r = e.post(e.submit(approverID, card, cid, map[string]string{inputReason: "x"}))
		if !strings.Contains(r.Data.Content, "not valid") {
			t.Errorf("modal %q answered %+v, want a refusal", cid, r)
		}
	}
	e.h.Unchanged(t, before)
	if n := len(e.h.Dispatches()); n != 0 {
		t.Errorf("forged clicks dispatched %d times", n)
	}
}

func TestUnauthorizedClickRefusedEphemerally(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	card := e.askDeploy()
	bs := buttons(card)
	for _, b := range []string{"Approve", "Reject", "Edit"} {
		r := e.post(e.click(outsider, card, bs[b]))
		if r.Type != 4 || r.Data.Flags&64 == 0 || !strings.Contains(r.Data.Content, "You may not decide this approval") {
			t.Errorf("%s by an outsider answered %+v, want an ephemeral refusal", b, r)
		}
	}
	// The requester may not approve their own high-impact call either.
	r := e.post(e.click(requester, card, bs["Approve"]))
	if r.Data.Flags&64 == 0 || !strings.Contains(r.Data.Content, "⛔") {
		t.Errorf("self approval answered %+v", r)
	}
	if n := len(e.h.Dispatches()); n != 0 {
		t.Errorf("unauthorized clicks dispatched %d times", n)
	}
	m, _ := e.fake.Message(card.ID)
	if len(m.Components) == 0 {
		t.Error("unauthorized clicks removed the card's buttons")
	}
	// Every refused attempt — the ones that would have opened a modal
	// included — is in the audit log.
	actions := e.h.RefusedActions("discord:" + outsider)
	if actions["approve"] == 0 || actions["reject"] == 0 || actions["edit"] == 0 {
		t.Errorf("audited refusals = %v, want approve, reject and edit", actions)
	}
}

func TestDecisionThroughAPIUpdatesCard(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	card := e.askDeploy()
	runs := e.h.Deliveries()
	var approval string
	for _, d := range runs {
		if d.Kind == core.KindCard {
			approval = d.ApprovalID
		}
	}
	if approval == "" {
		t.Fatal("no card delivery recorded")
	}
	if _, err := e.h.Decide("console:admin", approval, "approve", ""); err != nil {
		t.Fatalf("decide through the API: %v", err)
	}
	e.h.Eventually("the Discord card edited with the outcome", func() bool {
		m, _ := e.fake.Message(card.ID)
		return m.Edits > 0 && len(m.Components) == 0 && strings.Contains(visible(m), "Approved by console:admin")
	})
}

func TestSameInteractionTwiceStartsOneRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	in := e.slash(requester, "ops", map[string]string{"command": "deploy api 1.2.3"})
	e.post(in)
	r := e.post(in)
	if r.Data.Flags&64 == 0 || !strings.Contains(r.Data.Content, "Already") {
		t.Errorf("second delivery answered %+v", r)
	}
	// A fresh adapter (a restart: no memory of ids) still starts no second run.
	e.ad.seen = newRecentIDs(10, time.Minute)
	e.post(in)
	e.h.Eventually("the card", func() bool {
		for _, d := range e.h.Deliveries() {
			if d.Kind == core.KindCard {
				return true
			}
		}
		return false
	})
	if c := e.h.Counts(); c.Runs != 1 {
		t.Errorf("runs = %d, want 1", c.Runs)
	}
	// The extra root message posted after the restart was deleted again.
	roots := 0
	for _, ev := range e.fake.Log() {
		if ev.ChannelID == channelID && !ev.Edit {
			if m, _ := e.fake.Message(ev.ID); !m.Deleted {
				roots++
			}
		}
	}
	if roots != 1 {
		t.Errorf("%d root messages left, want 1", roots)
	}
}

func TestPingPong(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := e.post(map[string]any{"id": e.id(), "application_id": appID, "type": 1, "token": "t", "version": 1})
	if r.Type != 1 {
		t.Errorf("PING answered type %d, want 1 (PONG)", r.Type)
	}
	e.h.StoreEmpty(t)
}

func TestSlashCommandInDMAndThreadRunsInPlace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	dm := e.id()
	in := e.slash(requester, "ops", map[string]string{"command": "deploy api 1.2.3"})
	delete(in, "guild_id")
	delete(in, "member")
	in["user"] = map[string]any{"id": requester, "username": "req"}
	in["channel_id"] = dm
	in["channel"] = map[string]any{"id": dm, "type": 1}
	if r := e.post(in); r.Type != 5 {
		t.Fatalf("DM command answered type %d", r.Type)
	}
	e.waitCard(dm)

	thread := e.id()
	in = e.slash(requester, "ops", map[string]string{"command": "deploy web 2"})
	in["channel_id"] = thread
	in["channel"] = map[string]any{"id": thread, "type": 11, "parent_id": channelID}
	if r := e.post(in); r.Type != 5 {
		t.Fatalf("thread command answered type %d", r.Type)
	}
	e.waitCard(thread)
	for _, ev := range e.fake.Log() {
		if ev.ChannelID == channelID {
			t.Errorf("a root message was posted for a command in a DM or thread: %+v", ev.Message)
		}
	}
	for _, r := range e.fake.Requests() {
		if strings.HasSuffix(r.Path, "/threads") {
			t.Errorf("a thread was started inside a DM or thread: %+v", r)
		}
	}
}

func TestSlashCommandWhereBotCannotPost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	in := e.slash(requester, "ops", map[string]string{"command": "deploy api 1.2.3"})
	e.fake.Fail429(1, 2, false)
	r := e.post(in)
	if r.Type != 4 || r.Data.Flags&64 == 0 || !strings.Contains(r.Data.Content, "nothing was started") {
		t.Errorf("answered %+v, want an ephemeral explanation", r)
	}
	e.h.StoreEmpty(t)
	// The same interaction can be tried again once Discord lets it.
	if r := e.post(in); r.Type != 5 {
		t.Errorf("retry answered %+v, want the deferred response", r)
	}
}
