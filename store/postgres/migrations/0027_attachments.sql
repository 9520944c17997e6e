-- Files that came with a message (issue 27): the attachments of an inbound
-- event and of the run it started, as JSON
-- [{"kind","ref","mimeType","name","size"}]; '' when none. Only the
-- references are stored: an agent's run fetches the content from the
-- platform on demand, within its agent's limits. Keep in step with
-- store/sqlite/migrations/0027_attachments.sql.
ALTER TABLE events ADD COLUMN attachments TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN attachments TEXT NOT NULL DEFAULT '';
