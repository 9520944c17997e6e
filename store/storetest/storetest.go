// Package storetest is the conformance suite every core.Store backend
// passes, in the manner of testing/slogtest: one named subtest per rule the
// store promises (docs/architecture.md's invariants and core/store.go's method
// contracts). A backend's tests call Run with a function that opens a
// fresh, migrated, empty store.
package storetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// Open returns a fresh, migrated, empty store for one test and arranges
// (with t.Cleanup) for it to be closed.
type Open func(t *testing.T) core.Store

// AuditVerifier is implemented by stores that can check the whole audit
// chain (`opsgate audit verify`). Every backend must implement it.
type AuditVerifier interface {
	AuditVerify(ctx context.Context) (badSeq int64, err error)
}

// RawDB is implemented by SQL stores: the tamper case edits a row under the
// API, as an attacker with database access would.
type RawDB interface{ DB() *sql.DB }

// Run runs every case against stores made by open. Cases run in parallel,
// each on its own store.
func Run(t *testing.T, open Open) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s core.Store)
	}{
		{"DedupsEventInSameTx", testDedupsEventInSameTx},
		{"DedupsConcurrentDuplicates", testDedupsConcurrentDuplicates},
		{"InboxRecordsRunRepliesAndEvents", testInboxRecordsRunRepliesAndEvents},
		{"InboxNotifiesRunsAndOutbox", testInboxNotifies},
		{"InboxRefusesWhatItCannotKeep", testInboxRefusesWhatItCannotKeep},
		{"RunGetUnknownIsNotFound", testRunGetNotFound},
		{"RunListNewestFirstWithCursor", testRunList},
		{"ClaimsOldestFirstOnePerThread", testClaimOnePerThread},
		{"ClaimSkipsThreadWithWaitingRun", testClaimSkipsWaitingThread},
		{"ClaimsRunWithExpiredLease", testClaimExpiredLease},
		{"HeartbeatRenewsOnlyListedRuns", testHeartbeatRenewsOnlyListedRuns},
		{"ConcurrentClaimersNeverShareARun", testConcurrentClaimers},
		{"CheckpointGuardRefusesAndWritesNothing", testCheckpointGuard},
		{"CheckpointWritesEverythingInOneTx", testCheckpointWritesAll},
		{"RunEventListAfter", testRunEventList},
		{"AgentHistoryIsTheSessionsMessages", testAgentHistory},
		{"MCPTaskRoundTrip", testMCPTaskRoundTrip},
		{"RunTraceFirstStays", testRunTraceFirstStays},
		{"OutboxStreamRefIsTheRunsFirstSentStream", testOutboxStreamRef},
		{"InboxKeepsAttachments", testInboxKeepsAttachments},
		{"AuditChainUnbrokenUnderConcurrency", testAuditConcurrent},
		{"AuditTamperedRowIsFound", testAuditTamper},
		{"AuditListFilters", testAuditListFilters},
		{"DecideApprovesAndResumesRun", testDecideApproves},
		{"DecideOneWinsAmongFifty", testDecideFiftyConcurrent},
		{"DecideDedupsEvent", testDecideDedupsEvent},
		{"DecideRefusalIsAuditedOnly", testDecideRefusal},
		{"DecideQuorumTwo", testDecideQuorum},
		{"DecideConcurrentVotesAllCount", testDecideConcurrentQuorum},
		{"DecideSessionAndForeverGrants", testDecideGrant},
		{"ApprovalKeepsDigest", testApprovalDigest},
		{"ApprovalKeepsWhyAndReceipt", testApprovalWhyAndReceipt},
		{"DelegationKeepsPendingAndUpdatesCard", testDelegationKeepsPendingAndUpdatesCard},
		{"GrantRevokeIsAuditedOnce", testGrantRevoke},
		{"EscalationStepFiresOnce", testEscalationFiresOnce},
		{"DecisionUpdatesEveryCardThread", testDecisionUpdatesEveryCard},
		{"ApprovalPendingStatsByRisk", testApprovalPendingStats},
		{"TaskGrantKeepsItsRunAndForItsEnd", testTaskGrantKeepsItsRun},
		{"InboxRecordsAudit", testInboxRecordsAudit},
		{"AuditKeyedChainRefusesReseal", testAuditKeyedReseal},
		{"AuditAdoptKeyAfterLegacyEntries", testAuditAdoptKey},
		{"AuditRefusesAnotherKey", testAuditRefusesAnotherKey},
		{"DecideCompareAndSetOnPending", testDecideCAS},
		{"ApprovalExpiry", testApprovalExpiry},
		{"CheckpointRecordsExecutedArgs", testCheckpointRecordsExecutedArgs},
		{"ApprovalGetUnknownIsNotFound", testApprovalGetNotFound},
		{"ApprovalListFilters", testApprovalList},
		{"OutboxClaimsInThreadOrder", testOutboxThreadOrder},
		{"OutboxSkipsLeasedAndNotDue", testOutboxLeasedAndDue},
		{"OutboxChunkSentGuardedByOwner", testOutboxChunkSent},
		{"OutboxLastChunkSentIsChunkThenDone", testOutboxLastChunkSent},
		{"OutboxRetryDeadRequeue", testOutboxRetryDead},
		{"OutboxCardRef", testOutboxCardRef},
		{"MessageThreadsFollowEveryChunk", testMessageThreads},
		{"ThreadSeenFromInboxAndOutbox", testThreadSeen},
		{"LeaseTakeoverOnlyAfterExpiry", testLease},
		{"SendLeaseHandsStateToTheNextHolder", testSendLease},
		{"StatePutGetOverwrite", testStatePutGet},
		{"StateGetAbsentIsNotFound", testStateGetAbsent},
		{"StateConcurrentPuts", testStateConcurrentPuts},
		{"ThreadMessagesMergedNewestFirst", testThreadMessagesMerged},
		{"ThreadMessagesPaginate", testThreadMessagesPaginate},
		{"ThreadListByChannelNewestFirst", testThreadList},
		{"ThreadListSameInstant", testThreadListSameInstant},
		{"SubscribeCoalescesAndCancels", testSubscribe},
		{"Ping", testPing},
		{"ConsoleSessionRevokeAndCheck", testConsoleSessionRevoke},
		{"ConsoleSessionPruneKeepsLive", testConsoleSessionPrune},
		{"ConsoleSigninReadBackUntilEnded", testConsoleSignin},
		{"ConsoleStateSingleUse", testConsoleStateSingleUse},
		{"OverviewCountsWhatWaitsRanAndFailed", testOverview},
		{"RunListFilters", testRunListFilters},
		{"ApprovalListIDPrefixToolDecided", testApprovalListMoreFilters},
		{"ListByShortID", testListByShortID},
		{"AuditListNewestFirst", testAuditListNewest},
		{"AgentCallCreateWithCheckpoint", testAgentCallCreateWithCheckpoint},
		{"AgentCallChangeAtomic", testAgentCallChangeAtomic},
		{"AgentSessionRoundTrip", testAgentSessionRoundTrip},
		{"AgentSessionListByTokenNewestFirst", testAgentSessionListByTokenNewestFirst},
		{"AgentAttendanceHoldRenewLapse", testAgentAttendanceHoldRenewLapse},
		{"AgentAttendanceReleasePerHolder", testAgentAttendanceReleasePerHolder},
		{"ScheduleInitKeepsStateUntilSpecChanges", testScheduleInit},
		{"ScheduleTickRecordsRunInSameTx", testScheduleTickRecordsRunInSameTx},
		{"ScheduleTickAbortedWritesNothing", testScheduleTickAbortedWritesNothing},
		{"ScheduleTickConcurrentOneWins", testScheduleTickConcurrentOneWins},
		{"SchedulePauseHoldsAndIsAudited", testSchedulePause},
		{"ScheduleManualRunLeavesNextTick", testScheduleManualRun},
		{"ScheduleTickSkippedKeepsLastRun", testScheduleTickSkippedKeepsLastRun},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, open(t))
		})
	}
}

// t0 is the suite's clock: fixed, microsecond precision (what stores keep).
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)

var idCounter atomic.Int64

// newID returns a process-unique id with a readable prefix.
func newID(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, idCounter.Add(1))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func thread(key string) core.Thread { return core.Thread{Channel: "console", Key: key} }

// event makes an inbound event in th.
func event(th core.Thread) core.ChannelEvent {
	return core.ChannelEvent{Channel: th.Channel, EventID: newID("ev"), Actor: core.Actor{ID: "console:alice"},
		Thread: th, Text: "deploy api 1.2.3", Raw: json.RawMessage(`{"text":"deploy api 1.2.3"}`), ReceivedAt: t0}
}

// newRun makes a run to be created by InboxRecord.
func newRun(th core.Thread) *core.Run {
	return &core.Run{ID: newID("run"), Flow: "deploy", Thread: th, Requester: "console:alice",
		Args: map[string]any{"service": "api", "version": "1.2.3"}, Reason: "deploy api 1.2.3", CreatedAt: t0}
}

// queueRun records a fresh event starting a run in th and returns its id.
func queueRun(t *testing.T, s core.Store, th core.Thread) string {
	t.Helper()
	r := newRun(th)
	res, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: event(th), Run: r})
	if err != nil {
		t.Fatalf("InboxRecord: %v", err)
	}
	if res.Duplicate || res.RunID != r.ID {
		t.Fatalf("InboxRecord = %+v, want new run %s", res, r.ID)
	}
	return r.ID
}

// claim claims up to limit runs for owner at t0 and returns their ids.
func claim(t *testing.T, s core.Store, owner string, limit int) []string {
	t.Helper()
	runs, err := s.RunClaim(ctx(t), core.RunClaimParams{Owner: owner, Limit: limit, Now: t0, LeaseUntil: t0.Add(time.Minute)})
	if err != nil {
		t.Fatalf("RunClaim: %v", err)
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		if r.Status != core.RunRunning || r.Owner != owner {
			t.Errorf("claimed run %s: status %s owner %q, want running by %q", r.ID, r.Status, r.Owner, owner)
		}
		ids[i] = r.ID
	}
	return ids
}

// finish ends a run held by owner.
func finish(t *testing.T, s core.Store, runID, owner string) {
	t.Helper()
	if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: runID, Owner: owner, Now: t0, Status: core.RunSucceeded,
		Release: true}); err != nil {
		t.Fatalf("finish %s: %v", runID, err)
	}
}

func getRun(t *testing.T, s core.Store, id string) *core.Run {
	t.Helper()
	r, err := s.RunGet(ctx(t), id)
	if err != nil {
		t.Fatalf("RunGet %s: %v", id, err)
	}
	return r
}

func mustEqual[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func sameIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// waitWake reports whether ch delivers within d.
func waitWake(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// allOutbox lists every outbox message.
func allOutbox(t *testing.T, s core.Store) []*core.Delivery {
	t.Helper()
	items, _, err := s.OutboxList(ctx(t), core.OutboxListParams{Limit: 1000})
	if err != nil {
		t.Fatalf("OutboxList: %v", err)
	}
	return items
}

// allAudit lists the audit log from the start.
func allAudit(t *testing.T, s core.Store) []approvals.AuditEntry {
	t.Helper()
	var out []approvals.AuditEntry
	var after int64
	for {
		page, err := s.AuditList(ctx(t), approvals.AuditListParams{After: after, Limit: 100})
		if err != nil {
			t.Fatalf("AuditList: %v", err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].Seq
	}
}
