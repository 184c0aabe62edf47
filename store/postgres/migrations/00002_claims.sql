-- +goose Up
-- Claims: the engine (owner) that polls a task until lease_until, and the
-- fence, raised by every claim, that a write of a poll result must carry.
-- server: the record's server name, since an engine claims only tasks of
-- servers it has in its config.
ALTER TABLE taskdeck_tasks
    ADD COLUMN server      text,
    ADD COLUMN owner       text,
    ADD COLUMN lease_until timestamptz,
    ADD COLUMN fence       bigint NOT NULL DEFAULT 0;
UPDATE taskdeck_tasks SET server = convert_from(body, 'UTF8')::jsonb -> 'server' ->> 'name';
ALTER TABLE taskdeck_tasks ALTER COLUMN server SET NOT NULL;
CREATE INDEX taskdeck_tasks_claimable ON taskdeck_tasks (server, lease_until);

-- +goose Down
DROP INDEX taskdeck_tasks_claimable;
ALTER TABLE taskdeck_tasks DROP COLUMN fence, DROP COLUMN lease_until, DROP COLUMN owner, DROP COLUMN server;
