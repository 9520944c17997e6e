package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// What the invariants are checked on, read back after the run from the API
// and from the fake.

type request struct {
	N        int    // its index, and its chat is chatBase+N
	Text     string // the command
	Flow     string // deploy | status | restart
	Decision string // for deploy: approve (by button) or reject (by API)
	UpdateID int64
	Acked    bool // the webhook answered 200 at least once
}

type apiStep struct {
	Index          int    `json:"index"`
	Tool           string `json:"tool"`
	Status         string `json:"status"`
	IdempotencyKey string `json:"idempotency_key"`
	Attempts       int    `json:"attempts"`
}

type apiRun struct {
	ID        string    `json:"id"`
	Flow      string    `json:"flow"`
	Status    string    `json:"status"`
	ErrorCode string    `json:"error_code"`
	Steps     []apiStep `json:"steps"`
}

type apiRef struct {
	Channel string `json:"channel"`
	ID      string `json:"id"`
}

type apiDelivery struct {
	ID         string   `json:"id"`
	Kind       string   `json:"kind"`
	RunID      string   `json:"run_id"`
	ApprovalID string   `json:"approval_id"`
	Status     string   `json:"status"`
	Refs       []apiRef `json:"refs"`
	LastError  string   `json:"last_error"`
}

type apiApproval struct {
	ID     string `json:"id"`
	RunID  string `json:"run_id"`
	Status string `json:"status"`
}

// observed is everything read back.
type observed struct {
	Requests   []*request
	Runs       map[int][]apiRun // by request: the runs of its thread
	Approvals  []apiApproval
	Deliveries []apiDelivery // every status
	Messages   map[string]sentMessage
	Calls      []dispatchCall
	AuditOK    bool
	AuditBad   int64
}

// summary counts what happened, for the report.
type summary struct {
	Runs           map[string]int // by final status
	Dispatches     int
	Redispatched   int // extra calls of an idempotent tool with the same key
	Sent, Dead     int
	DuplicateSends int // messages the fake got more than once (sent, the record lost to a kill)
}

var finalStatuses = []string{"succeeded", "failed", "rejected", "cancelled", "interrupted"}

// idempotentTools may be called again with the same key after a crash.
var idempotentTools = map[string]bool{"restart": true}

// check verifies the chaos invariants and returns every violation found:
//   - acked → one run: every message the webhook acknowledged has exactly
//     one run (a message never acknowledged may have none or one);
//   - nothing left running: every run is final, no step dispatching or
//     waiting, no approval pending;
//   - dispatch at most once per idempotency key for tools not declared
//     idempotent; a run's status agrees with its dispatches (succeeded:
//     called; rejected: never called; interrupted: at most once);
//   - every reply and card delivered or dead-lettered: nothing pending,
//     every sent message's refs are messages the fake holds;
//   - the audit chain verifies.
func check(o observed) ([]string, summary) {
	var bad []string
	s := summary{Runs: map[string]int{}}
	calls := map[string][]dispatchCall{}
	for _, c := range o.Calls {
		calls[c.Key] = append(calls[c.Key], c)
	}
	seenRun := map[string]bool{}
	for _, r := range o.Requests {
		runs := o.Runs[r.N]
		switch {
		case len(runs) > 1:
			bad = append(bad, fmt.Sprintf("request %d (%q): %d runs for one message", r.N, r.Text, len(runs)))
		case len(runs) == 0 && r.Acked:
			bad = append(bad, fmt.Sprintf("request %d (%q): acknowledged, but no run", r.N, r.Text))
		}
		for _, run := range runs {
			seenRun[run.ID] = true
			s.Runs[run.Status]++
			bad = append(bad, checkRun(r, run, calls)...)
		}
	}
	for key, cs := range calls {
		s.Dispatches++
		if len(cs) > 1 {
			if !idempotentTools[cs[0].Tool] {
				bad = append(bad, fmt.Sprintf("tool %s dispatched %d times with idempotency key %s", cs[0].Tool, len(cs), key))
			} else {
				s.Redispatched += len(cs) - 1
			}
		}
		if run, _, _ := strings.Cut(key, "/"); !seenRun[run] {
			bad = append(bad, fmt.Sprintf("dispatch with key %s belongs to no run of the workload", key))
		}
	}
	for _, a := range o.Approvals {
		if a.Status == "pending" {
			bad = append(bad, fmt.Sprintf("approval %s (run %s) still pending", a.ID, a.RunID))
		}
	}
	for _, d := range o.Deliveries {
		switch d.Status {
		case "pending":
			bad = append(bad, fmt.Sprintf("delivery %s (%s of run %s) still pending: %s", d.ID, d.Kind, d.RunID, d.LastError))
		case "dead":
			s.Dead++
		case "sent":
			s.Sent++
			if len(d.Refs) == 0 {
				bad = append(bad, fmt.Sprintf("delivery %s (%s of run %s) sent without a message ref", d.ID, d.Kind, d.RunID))
			}
			for _, ref := range d.Refs {
				id := strings.TrimSuffix(ref.ID, "#decided")
				if _, ok := o.Messages[id]; !ok {
					bad = append(bad, fmt.Sprintf("delivery %s (%s of run %s) recorded as sent as %s, which the platform never got", d.ID, d.Kind, d.RunID, ref.ID))
				}
			}
		}
	}
	s.DuplicateSends = duplicates(o.Messages)
	if !o.AuditOK {
		bad = append(bad, fmt.Sprintf("audit chain does not verify: first bad entry %d", o.AuditBad))
	}
	sort.Strings(bad)
	return bad, s
}

// checkRun checks one run against the request that started it and the
// tool calls made with its keys.
func checkRun(r *request, run apiRun, calls map[string][]dispatchCall) []string {
	var bad []string
	where := fmt.Sprintf("run %s (%q)", run.ID, r.Text)
	if !slices.Contains(finalStatuses, run.Status) {
		return append(bad, fmt.Sprintf("%s left %s", where, run.Status))
	}
	for _, st := range run.Steps {
		if st.Status == "dispatching" || st.Status == "waiting_approval" {
			bad = append(bad, fmt.Sprintf("%s is %s with step %d still %s", where, run.Status, st.Index, st.Status))
		}
	}
	n := len(calls[run.ID+"/0"])
	want := map[string][]string{
		"status":  {"succeeded", "interrupted"},
		"restart": {"succeeded"},
		"deploy":  {"succeeded", "interrupted"},
	}[r.Flow]
	if r.Flow == "deploy" && r.Decision == "reject" {
		want = []string{"rejected"}
	}
	if !slices.Contains(want, run.Status) {
		bad = append(bad, fmt.Sprintf("%s ended %s (%s), want one of %v", where, run.Status, run.ErrorCode, want))
	}
	switch {
	case run.Status == "succeeded" && n == 0:
		bad = append(bad, fmt.Sprintf("%s succeeded but its tool was never called", where))
	case run.Status == "rejected" && n != 0:
		bad = append(bad, fmt.Sprintf("%s was rejected but its tool was called %d times", where, n))
	case run.Status == "interrupted" && n > 1:
		bad = append(bad, fmt.Sprintf("%s interrupted after %d calls", where, n))
	}
	return bad
}

// duplicates counts texts the fake received more than once in one chat
// (a send whose record a kill lost is sent again: at least once).
func duplicates(msgs map[string]sentMessage) int {
	seen := map[string]int{}
	for _, m := range msgs {
		seen[fmt.Sprint(m.Chat)+"\x00"+firstLine(m.Text)]++
	}
	n := 0
	for _, c := range seen {
		if c > 1 {
			n += c - 1
		}
	}
	return n
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
