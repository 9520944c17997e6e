package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/opsgate/opsgate/core"
)

// testInboxKeepsAttachments: the files of a message are kept with its
// event and with the run it started, and read back with the run (get and
// list) as they were recorded; a run without files reads back none.
func testInboxKeepsAttachments(t *testing.T, s core.Store) {
	th := thread("files")
	want := []core.Attachment{
		{Kind: core.AttachmentImage, Ref: "F0123", MimeType: "image/png", Name: "graph.png", Size: 48213},
		{Kind: core.AttachmentFile, Ref: "mxc://example.org/abc", MimeType: "text/plain; charset=utf-8", Name: "a \"quoted\" <name>.txt", Size: 12},
	}
	ev := event(th)
	ev.Attachments = want
	r := newRun(th)
	r.Attachments = want
	if _, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: ev, Run: r}); err != nil {
		t.Fatal(err)
	}
	got := getRun(t, s, r.ID)
	if !reflect.DeepEqual(got.Attachments, want) {
		t.Errorf("run attachments = %+v, want %+v", got.Attachments, want)
	}
	runs, _, err := s.RunList(ctx(t), core.RunListParams{Thread: th.String(), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || !reflect.DeepEqual(runs[0].Attachments, want) {
		t.Errorf("listed run attachments = %+v, want %+v", runs, want)
	}
	plain := newRun(thread("nofiles"))
	if _, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: event(plain.Thread), Run: plain}); err != nil {
		t.Fatal(err)
	}
	if got := getRun(t, s, plain.ID); got.Attachments != nil {
		t.Errorf("a run without files reads back %+v", got.Attachments)
	}
	db, ok := s.(RawDB)
	if !ok {
		return
	}
	var raw string
	// The ids are the suite's own (letters, digits, '-'): literals need no
	// placeholder, whose form differs by backend.
	if err := db.DB().QueryRowContext(ctx(t), fmt.Sprintf(`SELECT attachments FROM events WHERE channel = '%s' AND event_id = '%s'`,
		ev.Channel, ev.EventID)).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var stored []core.Attachment
	if err := json.Unmarshal([]byte(raw), &stored); err != nil || !reflect.DeepEqual(stored, want) {
		t.Errorf("event attachments column = %s (%v), want %+v", raw, err, want)
	}
}
