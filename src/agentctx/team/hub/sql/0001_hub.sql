-- The team hub, schema version 1 (docs/team-hub.md). Applied by `agentctx team hub-init`, which
-- runs it in one transaction under an advisory lock, as a role that may create roles and schemas
-- (a superuser, or a managed service's admin role with CREATEROLE). Idempotent: every statement can
-- run again, so an upgrade re-applies the files after the hub's recorded version.
--
-- Two walls. (1) Members hold no table privilege: they may only EXECUTE the functions of the
-- versioned schema hub_v1, SECURITY DEFINER functions that check the caller's team role (read from
-- `members` by session_user) and write the author as session_user. (2) The tables are owned by the
-- NOLOGIN role agentctx_hub_owner, which has no BYPASSRLS, with FORCE ROW LEVEL SECURITY: even the
-- functions (which run as the owner) see only the rows of the teams session_user belongs to, and
-- can insert only rows whose author is session_user.
--
-- Sequence numbers: push locks its team's row (SELECT ... FOR UPDATE) before it assigns any and
-- writes the new head at the end, so pushes to a team serialise and commit in sequence order: a
-- reader never sees sequence n+1 committed while n is not yet, and a pull cursor never skips a row.

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'agentctx_hub_owner') THEN
    CREATE ROLE agentctx_hub_owner NOLOGIN NOBYPASSRLS;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'agentctx_hub_member') THEN
    CREATE ROLE agentctx_hub_member NOLOGIN NOBYPASSRLS;
  END IF;
END
$$;
-- the operator (whoever runs hub-init) may create teams and act for the owner; the owner may grant
-- the member role (team admins add members through a function that runs as the owner)
GRANT agentctx_hub_owner TO CURRENT_USER;
GRANT agentctx_hub_member TO agentctx_hub_owner WITH ADMIN OPTION;

CREATE SCHEMA IF NOT EXISTS agentctx_hub AUTHORIZATION agentctx_hub_owner;
CREATE SCHEMA IF NOT EXISTS hub_v1 AUTHORIZATION agentctx_hub_owner;
REVOKE ALL ON SCHEMA agentctx_hub FROM PUBLIC;
REVOKE ALL ON SCHEMA hub_v1 FROM PUBLIC;
GRANT USAGE ON SCHEMA hub_v1 TO agentctx_hub_member;

SET LOCAL ROLE agentctx_hub_owner;

CREATE TABLE IF NOT EXISTS agentctx_hub.meta (
  key   text PRIMARY KEY,
  value text NOT NULL
);
INSERT INTO agentctx_hub.meta VALUES ('epoch', gen_random_uuid()::text) ON CONFLICT DO NOTHING;
INSERT INTO agentctx_hub.meta VALUES ('min_client', '0.1.0') ON CONFLICT DO NOTHING;

CREATE TABLE IF NOT EXISTS agentctx_hub.teams (
  team       text PRIMARY KEY CHECK (team ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
  head       bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS agentctx_hub.members (
  team      text NOT NULL REFERENCES agentctx_hub.teams ON DELETE CASCADE,
  role_name text NOT NULL,
  role      text NOT NULL CHECK (role IN ('reader', 'writer', 'maintainer', 'admin')),
  added_by  text NOT NULL,
  added_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (team, role_name)
);
CREATE INDEX IF NOT EXISTS members_by_role ON agentctx_hub.members (role_name);

CREATE TABLE IF NOT EXISTS agentctx_hub.projects (
  team     text NOT NULL REFERENCES agentctx_hub.teams ON DELETE CASCADE,
  project  text NOT NULL CHECK (length(project) BETWEEN 1 AND 128),
  name     text NOT NULL,
  added_by text NOT NULL,
  added_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (team, project)
);

-- The append-only log: versions (immutable; only an erasure blanks one's text) and the events that
-- change which version is current.
CREATE TABLE IF NOT EXISTS agentctx_hub.log (
  team      text NOT NULL REFERENCES agentctx_hub.teams ON DELETE CASCADE,
  seq       bigint NOT NULL,
  kind      text NOT NULL CHECK (kind IN ('version', 'supersede', 'retire', 'erase', 'cues')),
  id        text NOT NULL CHECK (length(id) BETWEEN 1 AND 64),
  successor text CHECK ((kind = 'supersede') = (successor IS NOT NULL)),
  project   text NOT NULL,
  author    text NOT NULL,
  hash      text,
  item      jsonb,
  at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (team, seq)
);
-- one version per id; one end (supersede or retire) per version; one predecessor per version:
-- together, one linear chain, enforced by the server whatever the clients do
CREATE UNIQUE INDEX IF NOT EXISTS log_one_version ON agentctx_hub.log (team, id)
  WHERE kind = 'version';
CREATE UNIQUE INDEX IF NOT EXISTS log_one_end ON agentctx_hub.log (team, id)
  WHERE kind IN ('supersede', 'retire');
CREATE UNIQUE INDEX IF NOT EXISTS log_one_predecessor ON agentctx_hub.log (team, successor)
  WHERE kind = 'supersede';
CREATE INDEX IF NOT EXISTS log_by_project ON agentctx_hub.log (team, project, seq);
-- the current version of a key (profile facts), looked up by every keyed push
CREATE INDEX IF NOT EXISTS log_by_key ON agentctx_hub.log (team, project, (item->>'key'))
  WHERE kind = 'version' AND item->>'key' IS NOT NULL;

-- tombstones, kept forever: an erased id never comes back
CREATE TABLE IF NOT EXISTS agentctx_hub.erased (
  team   text NOT NULL REFERENCES agentctx_hub.teams ON DELETE CASCADE,
  id     text NOT NULL,
  seq    bigint NOT NULL,
  author text NOT NULL,
  PRIMARY KEY (team, id)
);

-- the operator: a member of agentctx_hub_owner (who ran hub-init), not a team member
CREATE OR REPLACE FUNCTION agentctx_hub.is_operator() RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT pg_has_role(session_user, 'agentctx_hub_owner', 'MEMBER')
$$;

-- the caller's role in a team (NULL: not a member); reads only the caller's own row
CREATE OR REPLACE FUNCTION agentctx_hub.role_in(p_team text) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT m.role FROM agentctx_hub.members m WHERE m.team = p_team AND m.role_name = session_user
$$;

CREATE OR REPLACE FUNCTION agentctx_hub.rank(p_role text) RETURNS int
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE p_role WHEN 'reader' THEN 1 WHEN 'writer' THEN 2 WHEN 'maintainer' THEN 3
    WHEN 'admin' THEN 4 ELSE 0 END
$$;

ALTER TABLE agentctx_hub.meta ENABLE ROW LEVEL SECURITY;
ALTER TABLE agentctx_hub.meta FORCE ROW LEVEL SECURITY;
ALTER TABLE agentctx_hub.teams ENABLE ROW LEVEL SECURITY;
ALTER TABLE agentctx_hub.teams FORCE ROW LEVEL SECURITY;
ALTER TABLE agentctx_hub.members ENABLE ROW LEVEL SECURITY;
ALTER TABLE agentctx_hub.members FORCE ROW LEVEL SECURITY;
ALTER TABLE agentctx_hub.projects ENABLE ROW LEVEL SECURITY;
ALTER TABLE agentctx_hub.projects FORCE ROW LEVEL SECURITY;
ALTER TABLE agentctx_hub.log ENABLE ROW LEVEL SECURITY;
ALTER TABLE agentctx_hub.log FORCE ROW LEVEL SECURITY;
ALTER TABLE agentctx_hub.erased ENABLE ROW LEVEL SECURITY;
ALTER TABLE agentctx_hub.erased FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS meta_read ON agentctx_hub.meta;
CREATE POLICY meta_read ON agentctx_hub.meta FOR SELECT USING (true);
DROP POLICY IF EXISTS meta_write ON agentctx_hub.meta;
CREATE POLICY meta_write ON agentctx_hub.meta FOR ALL
  USING (agentctx_hub.is_operator()) WITH CHECK (agentctx_hub.is_operator());

DROP POLICY IF EXISTS teams_member ON agentctx_hub.teams;
CREATE POLICY teams_member ON agentctx_hub.teams FOR SELECT
  USING (agentctx_hub.role_in(team) IS NOT NULL OR agentctx_hub.is_operator());
DROP POLICY IF EXISTS teams_head ON agentctx_hub.teams;
CREATE POLICY teams_head ON agentctx_hub.teams FOR UPDATE
  USING (agentctx_hub.rank(agentctx_hub.role_in(team)) >= 2);
DROP POLICY IF EXISTS teams_create ON agentctx_hub.teams;
CREATE POLICY teams_create ON agentctx_hub.teams FOR INSERT WITH CHECK (agentctx_hub.is_operator());

DROP POLICY IF EXISTS members_own ON agentctx_hub.members;
CREATE POLICY members_own ON agentctx_hub.members FOR SELECT
  USING (role_name = session_user OR agentctx_hub.is_operator());
DROP POLICY IF EXISTS members_admin_add ON agentctx_hub.members;
CREATE POLICY members_admin_add ON agentctx_hub.members FOR INSERT
  WITH CHECK (agentctx_hub.is_operator() OR agentctx_hub.role_in(team) = 'admin');
DROP POLICY IF EXISTS members_admin_change ON agentctx_hub.members;
CREATE POLICY members_admin_change ON agentctx_hub.members FOR UPDATE
  USING (agentctx_hub.is_operator() OR agentctx_hub.role_in(team) = 'admin');
DROP POLICY IF EXISTS members_admin_remove ON agentctx_hub.members;
CREATE POLICY members_admin_remove ON agentctx_hub.members FOR DELETE
  USING (agentctx_hub.is_operator() OR agentctx_hub.role_in(team) = 'admin');

DROP POLICY IF EXISTS projects_member ON agentctx_hub.projects;
CREATE POLICY projects_member ON agentctx_hub.projects FOR SELECT
  USING (agentctx_hub.role_in(team) IS NOT NULL OR agentctx_hub.is_operator());
DROP POLICY IF EXISTS projects_admin ON agentctx_hub.projects;
CREATE POLICY projects_admin ON agentctx_hub.projects FOR INSERT
  WITH CHECK (agentctx_hub.role_in(team) = 'admin' OR agentctx_hub.is_operator());
DROP POLICY IF EXISTS projects_admin_remove ON agentctx_hub.projects;
CREATE POLICY projects_admin_remove ON agentctx_hub.projects FOR DELETE
  USING (agentctx_hub.role_in(team) = 'admin' OR agentctx_hub.is_operator());

DROP POLICY IF EXISTS log_member ON agentctx_hub.log;
CREATE POLICY log_member ON agentctx_hub.log FOR SELECT
  USING (agentctx_hub.role_in(team) IS NOT NULL);
DROP POLICY IF EXISTS log_writer ON agentctx_hub.log;
CREATE POLICY log_writer ON agentctx_hub.log FOR INSERT
  WITH CHECK (author = session_user AND agentctx_hub.rank(agentctx_hub.role_in(team)) >= 2);
DROP POLICY IF EXISTS log_erase ON agentctx_hub.log;
CREATE POLICY log_erase ON agentctx_hub.log FOR UPDATE
  USING (kind = 'version' AND agentctx_hub.rank(agentctx_hub.role_in(team)) >= 2)
  WITH CHECK (item IS NULL);

DROP POLICY IF EXISTS erased_member ON agentctx_hub.erased;
CREATE POLICY erased_member ON agentctx_hub.erased FOR SELECT
  USING (agentctx_hub.role_in(team) IS NOT NULL);
DROP POLICY IF EXISTS erased_writer ON agentctx_hub.erased;
CREATE POLICY erased_writer ON agentctx_hub.erased FOR INSERT
  WITH CHECK (author = session_user AND agentctx_hub.rank(agentctx_hub.role_in(team)) >= 2);
