-- +goose Up
-- A watcher's pages (newest first, before a cursor, by status) walk one
-- status's ids in order; (status) alone left a sort of every match.
CREATE INDEX taskdeck_tasks_status_id ON taskdeck_tasks (status, id);
DROP INDEX taskdeck_tasks_status;

-- +goose Down
CREATE INDEX taskdeck_tasks_status ON taskdeck_tasks (status);
DROP INDEX taskdeck_tasks_status_id;
