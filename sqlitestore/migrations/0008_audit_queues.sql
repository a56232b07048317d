-- rdq SQLite schema, version 8: the queues each audit entry touched.
--
-- An entry records the queues of the tasks its mutation changed (or the
-- queue it paused), whatever the selection (ids, a group, a filter), so
-- the audit log filtered by queue finds a redrive or purge selected by id.
-- A JSON array of names, sorted; entries written before this version keep
-- the empty array and readers fall back on the queue their filter names.
ALTER TABLE rdq_audit ADD COLUMN queues TEXT NOT NULL DEFAULT '[]';
