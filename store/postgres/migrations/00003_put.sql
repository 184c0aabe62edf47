-- +goose Up
-- taskdeck_put writes one record in the one statement that calls it, so a
-- durable write is one round trip (its implicit txn commits at the Sync).
-- It takes the next revision first (the counter's row lock, held to
-- commit, keeps revisions in commit order and gapless), then inserts the
-- record (p_prev NULL) or updates it if it is still at revision p_prev and,
-- with a fence, the claim still holds; then notifies. A stale update raises
-- SQLSTATE TD001, which rolls all of it back, the revision too.
-- +goose StatementBegin
CREATE FUNCTION taskdeck_put(p_id text, p_key text, p_status text, p_updated_at timestamptz,
    p_body bytea, p_server text, p_prev bigint, p_fence bigint, p_owner text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    r bigint;
BEGIN
    UPDATE taskdeck_meta SET rev = rev + 1 RETURNING rev INTO r;
    IF p_prev IS NULL THEN
        INSERT INTO taskdeck_tasks (id, idem_key, status, revision, updated_at, body, server)
        VALUES (p_id, p_key, p_status, r, p_updated_at, p_body, p_server);
    ELSE
        UPDATE taskdeck_tasks
        SET idem_key = p_key, status = p_status, updated_at = p_updated_at, body = p_body, revision = r
        WHERE id = p_id AND revision = p_prev
            AND (p_fence IS NULL OR (fence = p_fence AND owner = p_owner AND lease_until >= now()));
        IF NOT FOUND THEN
            RAISE EXCEPTION 'task % changed meanwhile', p_id USING ERRCODE = 'TD001';
        END IF;
    END IF;
    PERFORM pg_notify('taskdeck_changes', r::text);
    RETURN r;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION taskdeck_put(text, text, text, timestamptz, bytea, text, bigint, bigint, text);
