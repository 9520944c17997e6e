-- Agent API attendance across replicas: which replica (holder) holds an
-- event stream of an Agent API session, and until when. A holder renews
-- held_until while its stream is open (every few seconds) and deletes its
-- row when its last stream closes; a crashed replica's hold lapses at
-- held_until (about three renewals later). A session is attended while any
-- of its rows has held_until in the future. held_until is Unix microseconds,
-- as every other timestamp. Keep in step with
-- store/sqlite/migrations/0018_agent_attendance.sql.
CREATE TABLE agent_attendance (
    session_id TEXT   NOT NULL,
    holder     TEXT   NOT NULL,
    held_until BIGINT NOT NULL,
    PRIMARY KEY (session_id, holder)
);
