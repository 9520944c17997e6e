-- Conversations read back (core.ThreadStore): the inbound event keeps its
-- normalized text, so a message that started no run can be shown; indexes
-- make a thread's page and a channel's thread list index scans. Keep in
-- step with store/postgres/migrations/0004_thread_messages.sql.
ALTER TABLE events ADD COLUMN text TEXT NOT NULL DEFAULT '';
-- ThreadMessages: one thread, newest first (received_at, event_id).
CREATE INDEX events_thread ON events (thread, received_at, event_id);
-- ThreadList: every thread of a channel with its newest time and count,
-- read from the index alone.
CREATE INDEX events_channel_thread ON events (channel, thread, received_at);
-- ThreadMessages on the outbox side: (created_at, seq) newest first.
-- outbox_thread (thread, status, seq) serves delivery, not time order.
CREATE INDEX outbox_thread_at ON outbox (thread, created_at, seq);
CREATE INDEX outbox_channel_thread ON outbox (channel, thread, created_at);
