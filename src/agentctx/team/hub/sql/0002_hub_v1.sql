-- The members' interface, version 1: SECURITY DEFINER functions of the schema hub_v1, JSON in and
-- JSON out (an HTTP front could carry the same calls). Every function checks the client's version
-- against the hub's minimum, then the caller's team role (session_user, never an argument).
-- Errors carry our own SQLSTATEs: AX001 client too old, AX002 not allowed, AX003 project not
-- listed, AX004 bad input.

SET LOCAL ROLE agentctx_hub_owner;

CREATE OR REPLACE FUNCTION agentctx_hub.check_client(p_client text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_min text := (SELECT value FROM agentctx_hub.meta WHERE key = 'min_client');
  v_have int[];
  v_need int[];
BEGIN
  IF p_client IS NULL OR p_client !~ '^[0-9]+(\.[0-9]+)*' THEN
    RAISE EXCEPTION 'this hub needs agentctx % or newer; upgrade: pip install -U "agentctx-cc[team]"', v_min
      USING ERRCODE = 'AX001';
  END IF;
  v_have := string_to_array(substring(p_client FROM '^[0-9]+(?:\.[0-9]+)*'), '.')::int[];
  v_need := string_to_array(v_min, '.')::int[];
  IF v_have < v_need THEN
    RAISE EXCEPTION 'agentctx % is older than this hub''s minimum %: upgrade with pip install -U "agentctx-cc[team]"', p_client, v_min
      USING ERRCODE = 'AX001';
  END IF;
END
$$;

-- the caller's role, or AX002 (the same message whether the team exists or not: no guessing)
CREATE OR REPLACE FUNCTION agentctx_hub.need(p_team text, p_rank int, p_what text) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_role text := agentctx_hub.role_in(p_team);
BEGIN
  IF v_role IS NULL THEN
    RAISE EXCEPTION 'role % is not a member of team %', session_user, p_team USING ERRCODE = 'AX002';
  END IF;
  IF agentctx_hub.rank(v_role) < p_rank THEN
    RAISE EXCEPTION 'role % is a % of team %: it may not %', session_user, v_role, p_team, p_what
      USING ERRCODE = 'AX002';
  END IF;
  RETURN v_role;
END
$$;

CREATE OR REPLACE FUNCTION agentctx_hub.listed(p_team text, p_project text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM agentctx_hub.projects WHERE team = p_team AND project = p_project) THEN
    RAISE EXCEPTION 'project % is not listed in team %: its admin adds it with `agentctx team project add`', p_project, p_team
      USING ERRCODE = 'AX003';
  END IF;
END
$$;

-- the tripwire for an older client's unredacted text: obvious secrets only (the client redacts
-- with the full, current rules before anything leaves)
CREATE OR REPLACE FUNCTION agentctx_hub.secret_in(p_text text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT p_text ~ '-----BEGIN [A-Z ]*PRIVATE KEY-----'
      OR p_text ~ '(^|[^A-Z0-9])(AKIA|ASIA)[0-9A-Z]{16}([^A-Z0-9]|$)'
      OR p_text ~ 'gh[pousr]_[A-Za-z0-9]{36}'
      OR p_text ~ 'github_pat_[A-Za-z0-9_]{40,}'
      OR p_text ~ 'sk-ant-[A-Za-z0-9_-]{20,}'
      OR p_text ~ 'sk-(proj-)?[A-Za-z0-9]{32,}'
      OR p_text ~ 'xox[baprs]-[A-Za-z0-9-]{10,}'
      OR p_text ~ 'glpat-[A-Za-z0-9_-]{20}'
      OR p_text ~ 'AIza[0-9A-Za-z_-]{35}'
$$;

CREATE OR REPLACE FUNCTION agentctx_hub.epoch() RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  -- a dump restored into another database gets another oid: members reset their cursors
  SELECT (SELECT value FROM agentctx_hub.meta WHERE key = 'epoch') || '/'
      || (SELECT oid::text FROM pg_database WHERE datname = current_database())
$$;

-- who am I: role, team, head, epoch and the hub's versions
CREATE OR REPLACE FUNCTION hub_v1.whoami(p_team text, p_client text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_role text;
BEGIN
  PERFORM agentctx_hub.check_client(p_client);
  v_role := agentctx_hub.need(p_team, 1, 'read');
  RETURN jsonb_build_object(
    'role_name', session_user, 'role', v_role, 'team', p_team,
    'head', (SELECT head FROM agentctx_hub.teams WHERE team = p_team),
    'epoch', agentctx_hub.epoch(),
    'min_client', (SELECT value FROM agentctx_hub.meta WHERE key = 'min_client'),
    'schema', (SELECT value FROM agentctx_hub.meta WHERE key = 'schema'),
    'projects', (SELECT coalesce(jsonb_agg(jsonb_build_object('project', project, 'name', name)
                   ORDER BY project), '[]'::jsonb)
                 FROM agentctx_hub.projects WHERE team = p_team));
END
$$;

-- the log of a project after a cursor: {epoch, head, items, more}
CREATE OR REPLACE FUNCTION hub_v1.pull(
  p_team text, p_project text, p_after bigint, p_limit int, p_client text
) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_limit int := least(greatest(coalesce(p_limit, 500), 1), 2000);
  v_items jsonb;
  v_count int;
BEGIN
  PERFORM agentctx_hub.check_client(p_client);
  PERFORM agentctx_hub.need(p_team, 1, 'read');
  PERFORM agentctx_hub.listed(p_team, p_project);
  SELECT coalesce(jsonb_agg(jsonb_build_object(
           'seq', l.seq, 'kind', l.kind, 'id', l.id, 'successor', l.successor,
           'author', l.author, 'hash', l.hash, 'item', l.item, 'at', l.at) ORDER BY l.seq), '[]'),
         count(*)
    INTO v_items, v_count
    FROM (SELECT * FROM agentctx_hub.log
           WHERE team = p_team AND project = p_project AND seq > coalesce(p_after, 0)
           ORDER BY seq LIMIT v_limit) l;
  RETURN jsonb_build_object(
    'epoch', agentctx_hub.epoch(),
    'head', (SELECT head FROM agentctx_hub.teams WHERE team = p_team),
    'items', v_items, 'more', v_count = v_limit);
END
$$;

-- the end of a chain from a version: the version no event ends yet, or NULL when the chain was
-- retired (or runs into an erased version)
CREATE OR REPLACE FUNCTION agentctx_hub.chain_tip(p_team text, p_id text) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_id text := p_id;
  v_end record;
  v_steps int := 0;
BEGIN
  LOOP
    IF EXISTS (SELECT 1 FROM agentctx_hub.erased WHERE team = p_team AND id = v_id) THEN
      RETURN NULL;
    END IF;
    SELECT kind, successor INTO v_end FROM agentctx_hub.log
     WHERE team = p_team AND id = v_id AND kind IN ('supersede', 'retire');
    IF NOT FOUND THEN
      RETURN v_id;
    END IF;
    IF v_end.kind = 'retire' THEN
      RETURN NULL;
    END IF;
    v_id := v_end.successor;
    v_steps := v_steps + 1;
    IF v_steps > 100000 THEN
      RAISE EXCEPTION 'chain from % does not end', p_id USING ERRCODE = 'AX004';
    END IF;
  END LOOP;
END
$$;

-- a batch of items in the client's write order; one ack per item, in order:
-- {ref, status: ok | dup | rebased | refused, seq, reason, onto}
CREATE OR REPLACE FUNCTION hub_v1.push(p_team text, p_project text, p_items jsonb, p_client text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_role text;
  v_head bigint;
  v_item jsonb;
  v_kind text;
  v_id text;
  v_new text;
  v_acks jsonb := '[]'::jsonb;
  v_row record;
  v_tip text;
  v_text text;
BEGIN
  PERFORM agentctx_hub.check_client(p_client);
  v_role := agentctx_hub.need(p_team, 2, 'push');
  PERFORM agentctx_hub.listed(p_team, p_project);
  IF jsonb_typeof(p_items) IS DISTINCT FROM 'array' OR jsonb_array_length(p_items) > 500
     OR octet_length(p_items::text) > 4 * 1024 * 1024 THEN
    RAISE EXCEPTION 'a push is an array of at most 500 items and 4 MB' USING ERRCODE = 'AX004';
  END IF;
  -- the team's counter row, locked until commit: pushes serialise and commit in sequence order
  SELECT head INTO v_head FROM agentctx_hub.teams WHERE team = p_team FOR UPDATE;
  FOR v_item IN SELECT * FROM jsonb_array_elements(p_items) LOOP
    v_kind := v_item->>'kind';
    v_id := v_item->>'id';
    IF v_id IS NULL OR length(v_id) NOT BETWEEN 1 AND 64 THEN
      v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'refused', 'reason', 'bad id');
      CONTINUE;
    END IF;
    IF v_kind = 'version' THEN
      IF EXISTS (SELECT 1 FROM agentctx_hub.erased WHERE team = p_team AND id = v_id) THEN
        v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'refused', 'reason', 'erased');
        CONTINUE;
      END IF;
      SELECT seq, hash, project INTO v_row FROM agentctx_hub.log
       WHERE team = p_team AND id = v_id AND kind = 'version';
      IF FOUND THEN
        IF v_row.hash = v_item->>'hash' AND v_row.project = p_project THEN
          v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'dup', 'seq', v_row.seq);
        ELSE
          v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'refused',
                                                 'reason', 'another version has this id');
        END IF;
        CONTINUE;
      END IF;
      IF jsonb_typeof(v_item->'record') IS DISTINCT FROM 'object' OR v_item->>'hash' IS NULL THEN
        v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'refused', 'reason', 'bad version');
        CONTINUE;
      END IF;
      v_text := concat_ws(' ', v_item->'record'->>'title', v_item->'record'->>'body',
                          v_item->'record'->>'rationale', v_item->'record'->>'keywords',
                          v_item->'record'->>'cues');
      IF agentctx_hub.secret_in(v_text) THEN
        v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'refused', 'reason', 'secret');
        CONTINUE;
      END IF;
      v_head := v_head + 1;
      INSERT INTO agentctx_hub.log (team, seq, kind, id, project, author, hash, item)
      VALUES (p_team, v_head, 'version', v_id, p_project, session_user, v_item->>'hash',
              v_item->'record');
      v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'ok', 'seq', v_head);
      -- one current version per key: a keyed version ends the current one of its key (hub order)
      IF v_item->'record'->>'key' IS NOT NULL THEN
        FOR v_row IN
          SELECT l.id FROM agentctx_hub.log l
           WHERE l.team = p_team AND l.project = p_project AND l.kind = 'version' AND l.id <> v_id
             AND l.item->>'type' = v_item->'record'->>'type'
             AND l.item->>'key' = v_item->'record'->>'key'
             AND NOT EXISTS (SELECT 1 FROM agentctx_hub.log e WHERE e.team = p_team AND e.id = l.id
                               AND e.kind IN ('supersede', 'retire'))
           ORDER BY l.seq
        LOOP
          IF EXISTS (SELECT 1 FROM agentctx_hub.log e WHERE e.team = p_team AND e.successor = v_id
                       AND e.kind = 'supersede') THEN
            -- the new version already ends something: retire the older keyed one instead
            v_head := v_head + 1;
            INSERT INTO agentctx_hub.log (team, seq, kind, id, project, author, item)
            VALUES (p_team, v_head, 'retire', v_row.id, p_project, session_user,
                    jsonb_build_object('by_key', v_id));
          ELSE
            v_head := v_head + 1;
            INSERT INTO agentctx_hub.log (team, seq, kind, id, successor, project, author, item)
            VALUES (p_team, v_head, 'supersede', v_row.id, v_id, p_project, session_user,
                    jsonb_build_object('by_key', true));
          END IF;
        END LOOP;
      END IF;
    ELSIF v_kind = 'supersede' THEN
      v_new := v_item->>'successor';
      IF v_new IS NULL OR v_new = v_id OR NOT EXISTS (SELECT 1 FROM agentctx_hub.log WHERE team = p_team AND project = p_project
                       AND id = v_id AND kind = 'version')
         OR NOT EXISTS (SELECT 1 FROM agentctx_hub.log WHERE team = p_team AND project = p_project
                          AND id = v_new AND kind = 'version' AND author = session_user) THEN
        v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'refused',
                    'reason', 'both versions must be at the hub, the new one pushed by you');
        CONTINUE;
      END IF;
      IF EXISTS (SELECT 1 FROM agentctx_hub.log WHERE team = p_team AND kind = 'supersede'
                   AND id = v_id AND successor = v_new) THEN
        v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'dup');
        CONTINUE;
      END IF;
      IF EXISTS (SELECT 1 FROM agentctx_hub.log WHERE team = p_team AND kind = 'supersede'
                   AND successor = v_new) THEN
        -- the new version already continues the chain elsewhere (a rebase acked earlier)
        v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'dup');
        CONTINUE;
      END IF;
      v_tip := agentctx_hub.chain_tip(p_team, v_id);
      IF v_tip IS NULL THEN
        v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'refused',
                                               'reason', 'retired or erased');
        CONTINUE;
      END IF;
      IF v_tip = v_new THEN
        v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'dup');
        CONTINUE;
      END IF;
      v_head := v_head + 1;
      INSERT INTO agentctx_hub.log (team, seq, kind, id, successor, project, author, item)
      VALUES (p_team, v_head, 'supersede', v_tip, v_new, p_project, session_user,
              CASE WHEN v_tip = v_id THEN NULL ELSE jsonb_build_object('rebased_from', v_id) END);
      v_acks := v_acks || jsonb_build_object(
        'ref', v_id, 'status', CASE WHEN v_tip = v_id THEN 'ok' ELSE 'rebased' END,
        'seq', v_head, 'onto', v_tip);
    ELSIF v_kind IN ('retire', 'erase', 'cues') THEN
      SELECT author INTO v_row FROM agentctx_hub.log
       WHERE team = p_team AND project = p_project AND id = v_id AND kind = 'version';
      IF NOT FOUND THEN
        v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'refused', 'reason', 'unknown version');
        CONTINUE;
      END IF;
      IF v_row.author <> session_user AND agentctx_hub.rank(v_role) < 3 THEN
        v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'refused',
                    'reason', 'only its author or a maintainer may ' || v_kind || ' it');
        CONTINUE;
      END IF;
      IF EXISTS (SELECT 1 FROM agentctx_hub.erased WHERE team = p_team AND id = v_id) THEN
        v_acks := v_acks || jsonb_build_object('ref', v_id,
                    'status', CASE WHEN v_kind = 'erase' THEN 'dup' ELSE 'refused' END,
                    'reason', 'erased');
        CONTINUE;
      END IF;
      IF v_kind = 'retire' THEN
        IF EXISTS (SELECT 1 FROM agentctx_hub.log WHERE team = p_team AND id = v_id
                     AND kind IN ('supersede', 'retire')) THEN
          v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'dup');
          CONTINUE;
        END IF;
        v_head := v_head + 1;
        INSERT INTO agentctx_hub.log (team, seq, kind, id, project, author)
        VALUES (p_team, v_head, 'retire', v_id, p_project, session_user);
      ELSIF v_kind = 'erase' THEN
        v_head := v_head + 1;
        INSERT INTO agentctx_hub.erased (team, id, seq, author) VALUES (p_team, v_id, v_head, session_user);
        -- the one update in place: the text of an erased version is gone for good
        UPDATE agentctx_hub.log SET item = NULL WHERE team = p_team AND id = v_id AND kind = 'version';
        UPDATE agentctx_hub.log SET item = NULL WHERE team = p_team AND id = v_id AND kind = 'cues';
        INSERT INTO agentctx_hub.log (team, seq, kind, id, project, author)
        VALUES (p_team, v_head, 'erase', v_id, p_project, session_user);
      ELSE
        IF jsonb_typeof(v_item->'cues') IS DISTINCT FROM 'array'
           OR agentctx_hub.secret_in((v_item->'cues')::text) THEN
          v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'refused', 'reason', 'bad cues');
          CONTINUE;
        END IF;
        v_head := v_head + 1;
        INSERT INTO agentctx_hub.log (team, seq, kind, id, project, author, item)
        VALUES (p_team, v_head, 'cues', v_id, p_project, session_user,
                jsonb_build_object('cues', v_item->'cues'));
      END IF;
      v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'ok', 'seq', v_head);
    ELSE
      v_acks := v_acks || jsonb_build_object('ref', v_id, 'status', 'refused', 'reason', 'unknown kind');
    END IF;
  END LOOP;
  UPDATE agentctx_hub.teams SET head = v_head WHERE team = p_team;
  RETURN jsonb_build_object('acks', v_acks, 'head', v_head);
END
$$;

-- admin functions ----------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION hub_v1.team_create(p_team text, p_client text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM agentctx_hub.check_client(p_client);
  IF NOT agentctx_hub.is_operator() THEN
    RAISE EXCEPTION 'only the hub''s operator (who ran hub-init) creates teams' USING ERRCODE = 'AX002';
  END IF;
  IF p_team !~ '^[a-z0-9][a-z0-9_.-]{0,62}$' THEN
    RAISE EXCEPTION 'a team name is lowercase letters, digits, "_", "." and "-" (at most 63)'
      USING ERRCODE = 'AX004';
  END IF;
  INSERT INTO agentctx_hub.teams (team) VALUES (p_team) ON CONFLICT DO NOTHING;
  INSERT INTO agentctx_hub.members (team, role_name, role, added_by)
  VALUES (p_team, session_user, 'admin', session_user)
  ON CONFLICT (team, role_name) DO UPDATE SET role = 'admin';
  EXECUTE format('GRANT agentctx_hub_member TO %I', session_user);
  RETURN jsonb_build_object('team', p_team, 'admin', session_user);
END
$$;

CREATE OR REPLACE FUNCTION hub_v1.member_add(p_team text, p_role_name text, p_role text, p_client text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM agentctx_hub.check_client(p_client);
  PERFORM agentctx_hub.need(p_team, 4, 'add members');
  IF p_role NOT IN ('reader', 'writer', 'maintainer', 'admin') THEN
    RAISE EXCEPTION 'a member is a reader, writer, maintainer or admin' USING ERRCODE = 'AX004';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = p_role_name AND rolcanlogin) THEN
    RAISE EXCEPTION 'no login role % in this server: create it first (CREATE ROLE % LOGIN PASSWORD ...)', p_role_name, p_role_name
      USING ERRCODE = 'AX004';
  END IF;
  INSERT INTO agentctx_hub.members (team, role_name, role, added_by)
  VALUES (p_team, p_role_name, p_role, session_user)
  ON CONFLICT (team, role_name) DO UPDATE SET role = EXCLUDED.role, added_by = EXCLUDED.added_by;
  EXECUTE format('GRANT agentctx_hub_member TO %I', p_role_name);
  RETURN jsonb_build_object('team', p_team, 'role_name', p_role_name, 'role', p_role);
END
$$;

CREATE OR REPLACE FUNCTION hub_v1.member_remove(p_team text, p_role_name text, p_client text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_gone int;
BEGIN
  PERFORM agentctx_hub.check_client(p_client);
  PERFORM agentctx_hub.need(p_team, 4, 'remove members');
  DELETE FROM agentctx_hub.members WHERE team = p_team AND role_name = p_role_name;
  GET DIAGNOSTICS v_gone = ROW_COUNT;
  RETURN jsonb_build_object('team', p_team, 'role_name', p_role_name, 'removed', v_gone = 1);
END
$$;

CREATE OR REPLACE FUNCTION hub_v1.project_add(p_team text, p_project text, p_name text, p_client text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM agentctx_hub.check_client(p_client);
  PERFORM agentctx_hub.need(p_team, 4, 'list projects');
  INSERT INTO agentctx_hub.projects (team, project, name, added_by)
  VALUES (p_team, p_project, p_name, session_user) ON CONFLICT DO NOTHING;
  RETURN jsonb_build_object('team', p_team, 'project', p_project, 'name', p_name);
END
$$;

CREATE OR REPLACE FUNCTION hub_v1.set_min_client(p_version text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NOT agentctx_hub.is_operator() THEN
    RAISE EXCEPTION 'only the hub''s operator sets the minimum client' USING ERRCODE = 'AX002';
  END IF;
  IF p_version !~ '^[0-9]+(\.[0-9]+)*$' THEN
    RAISE EXCEPTION 'a version is numbers and dots' USING ERRCODE = 'AX004';
  END IF;
  UPDATE agentctx_hub.meta SET value = p_version WHERE key = 'min_client';
END
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA hub_v1 FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA agentctx_hub FROM PUBLIC;
GRANT EXECUTE ON FUNCTION hub_v1.whoami(text, text), hub_v1.pull(text, text, bigint, int, text),
  hub_v1.push(text, text, jsonb, text), hub_v1.member_add(text, text, text, text),
  hub_v1.member_remove(text, text, text), hub_v1.project_add(text, text, text, text)
  TO agentctx_hub_member;
-- what the policies call (only the caller's own role; useless without USAGE on agentctx_hub,
-- which members do not have): granted so that RLS filters rather than errs if a table grant
-- is ever given by mistake
GRANT EXECUTE ON FUNCTION agentctx_hub.role_in(text), agentctx_hub.is_operator(),
  agentctx_hub.rank(text) TO agentctx_hub_member;

RESET ROLE;
-- the operator's own calls (team_create, set_min_client) run through the owner's membership
