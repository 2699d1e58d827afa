-- DEV / TEST ONLY. NOT A MIGRATION. NEVER RUN AGAINST A REAL DATABASE.
-- A stand-in for the App API's (Django) applications table, which this service only reads.
-- In production the App API owns and migrates this table; storage-consumer's migrations refuse
-- to run until it exists. Local development (`npm start`) and the tests create this copy.
CREATE TABLE IF NOT EXISTS apps_registry_application (
  id           BIGINT PRIMARY KEY,
  package_name VARCHAR(255) UNIQUE NOT NULL,
  is_active    BOOLEAN NOT NULL DEFAULT TRUE,
  created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
