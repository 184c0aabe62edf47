-- +goose Up
-- The audit log: one entry per committed change, at the change's revision,
-- chained by hash (model.ChainHash: sha256(previous hash || rev as 8
-- big-endian bytes || body)). audit is the chain's head, kept in the
-- counter's row that every writer locks, so each entry is chained in
-- revision order. A pruned log starts after the checkpoint (audit_cp_*);
-- a database older than the log starts it after its last revision.
ALTER TABLE taskdeck_meta
    ADD COLUMN audit         bytea  NOT NULL DEFAULT ''::bytea,
    ADD COLUMN audit_cp_rev  bigint NOT NULL DEFAULT 0,
    ADD COLUMN audit_cp_hash bytea  NOT NULL DEFAULT ''::bytea;
UPDATE taskdeck_meta SET audit_cp_rev = rev;
CREATE TABLE taskdeck_audit (
    rev  bigint PRIMARY KEY,
    at   timestamptz NOT NULL,
    task text COLLATE "C" NOT NULL,
    body bytea NOT NULL,
    hash bytea NOT NULL
);

-- taskdeck_put as in 00003, and each write that commits appends its audit
-- entry (p_audit, made at p_audit_at) to the chain.
DROP FUNCTION taskdeck_put(text[], text[], text[], timestamptz[], bytea[], text[], bigint[], bigint[], text[]);
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

-- +goose Down
DROP FUNCTION taskdeck_put(text[], text[], text[], timestamptz[], bytea[], text[], bigint[], bigint[], text[], bytea[], timestamptz[]);
DROP TABLE taskdeck_audit;
ALTER TABLE taskdeck_meta DROP COLUMN audit_cp_hash, DROP COLUMN audit_cp_rev, DROP COLUMN audit;
