-- +goose Up
-- The store-wide revision, one row: every write txn increments it, which
-- serializes writers and makes revisions commit-ordered. floor: replay
-- from below it could miss a deletion whose tombstone was dropped.
CREATE TABLE taskdeck_meta (
    one   boolean PRIMARY KEY DEFAULT true CHECK (one),
    rev   bigint NOT NULL,
    floor bigint NOT NULL
);
INSERT INTO taskdeck_meta (rev, floor) VALUES (0, 0);

-- body is the record's JSON without its revision (the revision column).
-- COLLATE "C": ids sort by bytes, as Badger's keys do.
CREATE TABLE taskdeck_tasks (
    id         text COLLATE "C" NOT NULL,
    idem_key   text COLLATE "C",
    status     text NOT NULL,
    revision   bigint NOT NULL,
    updated_at timestamptz NOT NULL,
    body       bytea NOT NULL,
    CONSTRAINT taskdeck_tasks_pkey PRIMARY KEY (id),
    CONSTRAINT taskdeck_tasks_idem_key UNIQUE (idem_key)
);
CREATE INDEX taskdeck_tasks_revision ON taskdeck_tasks (revision);
CREATE INDEX taskdeck_tasks_status ON taskdeck_tasks (status);

CREATE TABLE taskdeck_tombstones (
    rev bigint PRIMARY KEY,
    id  text COLLATE "C" NOT NULL
);

-- +goose Down
DROP TABLE taskdeck_tombstones;
DROP TABLE taskdeck_tasks;
DROP TABLE taskdeck_meta;
