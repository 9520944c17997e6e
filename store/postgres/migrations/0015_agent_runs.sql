-- Agent runs (issue 12): a session's conversation is the agent.message
-- events of its thread's runs; this index serves AgentHistory. Keep in
-- step with the other backend's 0015_agent_runs.sql.
CREATE INDEX run_events_agent ON run_events (run_id, seq) WHERE type = 'agent.message';
