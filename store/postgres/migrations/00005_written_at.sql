-- +goose Up
-- written_at is when a record's body was last written, by the database's
-- clock: the age of another engine's intent is judged on this one clock,
-- never on the timestamps its maker's (maybe skewed) clock wrote.
ALTER TABLE taskdeck_tasks ADD COLUMN written_at timestamptz NOT NULL DEFAULT now();

-- +goose StatementBegin
CREATE FUNCTION taskdeck_written() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.written_at := now();
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- A claim sets owner, lease and fence only: it is no write of the record.
CREATE TRIGGER taskdeck_written BEFORE INSERT OR UPDATE OF body ON taskdeck_tasks
    FOR EACH ROW EXECUTE FUNCTION taskdeck_written();

-- +goose Down
DROP TRIGGER taskdeck_written ON taskdeck_tasks;
DROP FUNCTION taskdeck_written();
ALTER TABLE taskdeck_tasks DROP COLUMN written_at;
