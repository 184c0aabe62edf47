-- +goose Up
-- taskdeck_holds says whether a write fenced by p_fence for p_owner may
-- change a record whose claim columns these are: unfenced (NULL) always;
-- fence 0 is no claim, which writes only while no engine holds one.
-- +goose StatementBegin
CREATE FUNCTION taskdeck_holds(fence bigint, owner text, lease_until timestamptz, p_fence bigint, p_owner text)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT p_fence IS NULL OR CASE WHEN p_fence = 0 THEN lease_until IS NULL OR lease_until < now()
        ELSE fence = p_fence AND owner IS NOT DISTINCT FROM p_owner AND lease_until >= now() END
$$;
-- +goose StatementEnd

-- taskdeck_stale refuses a lone write's update (the store's updateSQL)
-- with TD001: the error rolls back the revision its statement took.
-- +goose StatementBegin
CREATE FUNCTION taskdeck_stale() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the record is no longer at the revision read, or its claim no longer holds' USING ERRCODE = 'TD001';
END
$$;
-- +goose StatementEnd

-- taskdeck_put writes a batch of two or more records (a lone write is one
-- plain statement of the store's) in the one statement that calls it, so that the concurrent writes of a process share one round trip and
-- one commit (its implicit txn commits at the Sync). It takes the counter's
-- row lock first (held to commit: revisions are in commit order), then
-- inserts each record (p_prev NULL) or updates it if it is still at revision
-- p_prev and, with a fence, the claim still holds (fence 0: no claim does). A write refused (its key
-- or id taken, or stale) writes nothing and takes no revision; the others
-- get the next revisions in turn, gapless, and one notification wakes the
-- listeners. Each row of the result answers the write of the same place.
-- +goose StatementBegin
CREATE FUNCTION taskdeck_put(p_id text[], p_key text[], p_status text[], p_updated_at timestamptz[],
    p_body bytea[], p_server text[], p_prev bigint[], p_fence bigint[], p_owner text[])
RETURNS TABLE (o_rev bigint, o_code text, o_constraint text)
LANGUAGE plpgsql AS $$
DECLARE
    n bigint := coalesce(array_length(p_id, 1), 0);
    base bigint;
    done bigint := 0;
BEGIN
    -- One update of the counter when every write commits; a second only
    -- when some were refused.
    UPDATE taskdeck_meta SET rev = rev + n RETURNING rev - n INTO base;
    FOR i IN 1 .. n LOOP
        o_rev := base + done + 1;
        o_code := NULL;
        o_constraint := NULL;
        IF p_prev[i] IS NULL THEN
            INSERT INTO taskdeck_tasks (id, idem_key, status, revision, updated_at, body, server)
            VALUES (p_id[i], p_key[i], p_status[i], o_rev, p_updated_at[i], p_body[i], p_server[i])
            ON CONFLICT DO NOTHING;
            IF NOT FOUND THEN
                o_code := '23505';
                o_constraint := CASE WHEN EXISTS (SELECT 1 FROM taskdeck_tasks WHERE id = p_id[i])
                    THEN 'taskdeck_tasks_pkey' ELSE 'taskdeck_tasks_idem_key' END;
            END IF;
        ELSE
            -- An update can only drop the key (store.CheckUpdate): no
            -- unique constraint can refuse it.
            UPDATE taskdeck_tasks
            SET idem_key = p_key[i], status = p_status[i], updated_at = p_updated_at[i], body = p_body[i], revision = o_rev
            WHERE id = p_id[i] AND revision = p_prev[i] AND taskdeck_holds(fence, owner, lease_until, p_fence[i], p_owner[i]);
            IF NOT FOUND THEN
                o_code := 'TD001';
            END IF;
        END IF;
        IF o_code IS NULL THEN
            done := done + 1;
        ELSE
            o_rev := NULL;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF done < n THEN
        UPDATE taskdeck_meta SET rev = base + done;
    END IF;
    IF done > 0 THEN
        PERFORM pg_notify('taskdeck_changes', (base + done)::text);
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION taskdeck_put(text[], text[], text[], timestamptz[], bytea[], text[], bigint[], bigint[], text[]);
DROP FUNCTION taskdeck_stale();
DROP FUNCTION taskdeck_holds(bigint, text, timestamptz, bigint, text);
