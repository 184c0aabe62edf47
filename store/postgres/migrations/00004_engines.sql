-- +goose Up
-- The engines alive on this database and the servers each can reach (its
-- configured names and the ad-hoc URLs it called), renewed with their
-- claims: a task of a server no live engine has is shown as unreachable.
CREATE TABLE taskdeck_engines (
    name        text PRIMARY KEY,
    servers     text[] NOT NULL,
    alive_until timestamptz NOT NULL
);
-- An ad-hoc (--url) call's task is claimed by its URL: the server column
-- holds the URL where the record has no server name.
UPDATE taskdeck_tasks SET server = convert_from(body, 'UTF8')::jsonb -> 'server' ->> 'url' WHERE server = '';

-- +goose Down
UPDATE taskdeck_tasks SET server = '' WHERE server LIKE '%://%';
DROP TABLE taskdeck_engines;
