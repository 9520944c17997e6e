-- The console's home page (core.OverviewStore) reads index ranges only:
-- runs of the last hour by creation time, and each channel's newest
-- inbound event. Keep in step with store/postgres/migrations/0014_console_overview.sql.
CREATE INDEX runs_created ON runs (created_at);
CREATE INDEX events_channel_at ON events (channel, received_at);
