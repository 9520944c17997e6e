-- Conversations follow replies (issue 27). A reply to one of opsgate's
-- messages continues the conversation of the thread that message went to:
-- message_threads maps each platform reference the outbox recorded (every
-- chunk) to its thread, written with the reference, and filled here from
-- the messages already sent. outbox.replaces names the outbox message a
-- message edits in place (an answered question's update). Keep in step
-- with store/sqlite/migrations/0026_conversations.sql.
ALTER TABLE outbox ADD COLUMN replaces TEXT NOT NULL DEFAULT '';

CREATE TABLE message_threads (
    channel TEXT NOT NULL,
    ref     TEXT NOT NULL,
    thread  TEXT NOT NULL,
    PRIMARY KEY (channel, ref)
);

INSERT INTO message_threads (channel, ref, thread)
    SELECT o.channel, r.value->>'id', o.thread
    FROM outbox o, jsonb_array_elements(o.refs::jsonb) r
    WHERE o.chunks_sent > 0 AND r.value->>'id' IS NOT NULL
    ON CONFLICT DO NOTHING;
