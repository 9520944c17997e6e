package core

import "testing"

func TestRunStatusValid(t *testing.T) {
	want := []RunStatus{"queued", "running", "waiting_approval", "waiting_input",
		"succeeded", "failed", "rejected", "cancelled", "interrupted"}
	if len(RunStatuses) != len(want) {
		t.Fatalf("RunStatuses = %v, want %v", RunStatuses, want)
	}
	for i, s := range want {
		if RunStatuses[i] != s || !s.Valid() {
			t.Errorf("RunStatuses[%d] = %q (Valid %v), want valid %q", i, RunStatuses[i], RunStatuses[i].Valid(), s)
		}
	}
	for _, s := range []RunStatus{"", "Queued", "pending", "done", "queued "} {
		if s.Valid() {
			t.Errorf("RunStatus(%q).Valid() = true", s)
		}
	}
}

func TestDeliveryStatusValid(t *testing.T) {
	want := []DeliveryStatus{"pending", "sent", "dead"}
	if len(DeliveryStatuses) != len(want) {
		t.Fatalf("DeliveryStatuses = %v, want %v", DeliveryStatuses, want)
	}
	for i, s := range want {
		if DeliveryStatuses[i] != s || !s.Valid() {
			t.Errorf("DeliveryStatuses[%d] = %q (Valid %v), want valid %q", i, DeliveryStatuses[i], DeliveryStatuses[i].Valid(), s)
		}
	}
	for _, s := range []DeliveryStatus{"", "Dead", "queued", "failed"} {
		if s.Valid() {
			t.Errorf("DeliveryStatus(%q).Valid() = true", s)
		}
	}
}
