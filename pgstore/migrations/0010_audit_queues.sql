-- rdq schema, version 10: the queues each audit entry touched.
--
-- An entry records the queues of the tasks its mutation changed (or the
-- queue it paused), whatever the selection (ids, a group, a filter), so
-- the audit log filtered by queue finds a redrive or purge selected by id.
-- Entries written before this version keep the empty array; readers fall
-- back on the queue their filter names. Adding a column with a constant
-- default rewrites no row.
ALTER TABLE {schema}.audit ADD COLUMN queues text[] NOT NULL DEFAULT '{}';
