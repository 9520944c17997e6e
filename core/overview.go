package core

import (
	"context"
	"time"
)

// OverviewStore reads the numbers of the web console's home page in one
// call: what waits for a person, what ran lately, what failed to deliver,
// and whether each channel is alive. store/sqlite and store/postgres
// implement it (store/storetest checks both); it is not part of Store, so a
// test double of Store need not.
type OverviewStore interface {
	Overview(ctx context.Context, p OverviewParams) (*Overview, error)
}

// OverviewParams fixes the windows of an Overview.
type OverviewParams struct {
	// Since: runs created at or after it are counted by status.
	Since time.Time
	// SoonBefore: pending approvals that expire before it are "expiring
	// soon".
	SoonBefore time.Time
	// Channels are the channels to report on (the configured ones, so a
	// channel that never saw a message still shows). Empty: every channel
	// with an inbound event or an outbox message.
	Channels []string
}

// Overview is the console's home page.
type Overview struct {
	PendingApprovals int
	// OldestPendingAt is when the oldest pending approval was created;
	// zero when none is pending.
	OldestPendingAt time.Time
	// ExpiringSoon counts pending approvals expiring before SoonBefore;
	// NextExpiryAt is the earliest expiry of any pending approval.
	ExpiringSoon int
	NextExpiryAt time.Time
	// RunsByStatus counts the runs created since Since, by status (absent
	// statuses are zero).
	RunsByStatus map[RunStatus]int
	DeadLetters  int
	Channels     []ChannelHealth
}

// ChannelHealth is one channel's line on the home page.
type ChannelHealth struct {
	Channel string
	// LastEventAt is the newest inbound event of the channel; zero when it
	// never received one.
	LastEventAt time.Time
	// Backlog counts messages waiting to be delivered (pending), the
	// oldest created at OldestPendingAt; Dead counts dead letters.
	Backlog         int
	OldestPendingAt time.Time
	Dead            int
}
