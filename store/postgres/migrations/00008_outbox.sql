-- +goose Up
-- The outbox (issue 27): the events of the changes some configured
-- endpoint wants, one row per event and endpoint, committed with the
-- change that made them (rev is its revision). A row goes once delivered
-- or past its retry window; due is when it may be tried again, and a
-- deliverer claims it until lease_until (FOR UPDATE SKIP LOCKED), so
-- that one engine of the fleet delivers each. taskdeck_notify counts
-- what each endpoint was told.
CREATE TABLE taskdeck_outbox (
    rev         bigint NOT NULL,
    endpoint    text COLLATE "C" NOT NULL,
    event_id    text NOT NULL,
    at          timestamptz NOT NULL,
    body        bytea NOT NULL,
    attempts    integer NOT NULL DEFAULT 0,
    due         timestamptz NOT NULL DEFAULT '-infinity',
    lease_until timestamptz NOT NULL DEFAULT '-infinity',
    PRIMARY KEY (rev, endpoint)
);
CREATE TABLE taskdeck_notify (
    endpoint      text COLLATE "C" PRIMARY KEY,
    delivered     bigint NOT NULL DEFAULT 0,
    expired       bigint NOT NULL DEFAULT 0,
    last_ok       timestamptz,
    last_error    text NOT NULL DEFAULT '',
    last_error_at timestamptz,
    failing       boolean NOT NULL DEFAULT false
);

-- taskdeck_put as in 00007, and each write that commits with an event
-- (p_ev_id not NULL) adds its outbox rows, one per endpoint of the
-- comma-separated p_ev_endpoints.
DROP FUNCTION taskdeck_put(text[], text[], text[], timestamptz[], bytea[], text[], bigint[], bigint[], text[], bytea[], timestamptz[]);
-- +goose StatementBegin
CREATE FUNCTION taskdeck_put(p_id text[], p_key text[], p_status text[], p_updated_at timestamptz[],
    p_body bytea[], p_server text[], p_prev bigint[], p_fence bigint[], p_owner text[],
    p_audit bytea[], p_audit_at timestamptz[],
    p_ev_id text[], p_ev_endpoints text[], p_ev_body bytea[])
RETURNS TABLE (o_rev bigint, o_code text, o_constraint text)
LANGUAGE plpgsql AS $$
DECLARE
    n bigint := coalesce(array_length(p_id, 1), 0);
    base bigint;
    head bytea;
    done bigint := 0;
BEGIN
    UPDATE taskdeck_meta SET rev = rev + n RETURNING rev - n, audit INTO base, head;
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
            UPDATE taskdeck_tasks
            SET idem_key = p_key[i], status = p_status[i], updated_at = p_updated_at[i], body = p_body[i], revision = o_rev
            WHERE id = p_id[i] AND revision = p_prev[i] AND taskdeck_holds(fence, owner, lease_until, p_fence[i], p_owner[i]);
            IF NOT FOUND THEN
                o_code := 'TD001';
            END IF;
        END IF;
        IF o_code IS NULL THEN
            done := done + 1;
            head := sha256(head || int8send(o_rev) || p_audit[i]);
            INSERT INTO taskdeck_audit (rev, at, task, body, hash) VALUES (o_rev, p_audit_at[i], p_id[i], p_audit[i], head);
            IF p_ev_id[i] IS NOT NULL THEN
                INSERT INTO taskdeck_outbox (rev, endpoint, event_id, at, body)
                SELECT o_rev, ep, p_ev_id[i], p_audit_at[i], p_ev_body[i] FROM unnest(string_to_array(p_ev_endpoints[i], ',')) AS ep;
            END IF;
        ELSE
            o_rev := NULL;
        END IF;
        RETURN NEXT;
    END LOOP;
    UPDATE taskdeck_meta SET rev = base + done, audit = head;
    IF done > 0 THEN
        PERFORM pg_notify('taskdeck_changes', (base + done)::text);
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION taskdeck_put(text[], text[], text[], timestamptz[], bytea[], text[], bigint[], bigint[], text[], bytea[], timestamptz[], text[], text[], bytea[]);
-- +goose StatementBegin
CREATE FUNCTION taskdeck_put(p_id text[], p_key text[], p_status text[], p_updated_at timestamptz[],
    p_body bytea[], p_server text[], p_prev bigint[], p_fence bigint[], p_owner text[],
    p_audit bytea[], p_audit_at timestamptz[])
RETURNS TABLE (o_rev bigint, o_code text, o_constraint text)
LANGUAGE plpgsql AS $$
DECLARE
    n bigint := coalesce(array_length(p_id, 1), 0);
    base bigint;
    head bytea;
    done bigint := 0;
BEGIN
    UPDATE taskdeck_meta SET rev = rev + n RETURNING rev - n, audit INTO base, head;
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
            UPDATE taskdeck_tasks
            SET idem_key = p_key[i], status = p_status[i], updated_at = p_updated_at[i], body = p_body[i], revision = o_rev
            WHERE id = p_id[i] AND revision = p_prev[i] AND taskdeck_holds(fence, owner, lease_until, p_fence[i], p_owner[i]);
            IF NOT FOUND THEN
                o_code := 'TD001';
            END IF;
        END IF;
        IF o_code IS NULL THEN
            done := done + 1;
            head := sha256(head || int8send(o_rev) || p_audit[i]);
            INSERT INTO taskdeck_audit (rev, at, task, body, hash) VALUES (o_rev, p_audit_at[i], p_id[i], p_audit[i], head);
        ELSE
            o_rev := NULL;
        END IF;
        RETURN NEXT;
    END LOOP;
    UPDATE taskdeck_meta SET rev = base + done, audit = head;
    IF done > 0 THEN
        PERFORM pg_notify('taskdeck_changes', (base + done)::text);
    END IF;
END
$$;
-- +goose StatementEnd
DROP TABLE taskdeck_notify;
DROP TABLE taskdeck_outbox;
