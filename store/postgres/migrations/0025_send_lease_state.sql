-- The send lease carries what its holder tells the next one (issue 32):
-- when it last sent and the 429 pauses still running, written at every
-- renewal and when it hands over. A hand-over sets until_at to 0 instead
-- of deleting the row, so the next holder reads the state and starts where
-- the last one stopped rather than waiting a full refill. Keep in step with
-- store/sqlite/migrations/0025_send_lease_state.sql.
ALTER TABLE leases ADD COLUMN state TEXT NOT NULL DEFAULT '';
