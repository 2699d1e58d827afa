-- DEV ONLY. Example applications for the local stack (`npm start`), so that the messages of
-- `npm run produce:sample` resolve. Never run against a real database: in production the App
-- API registers applications.
INSERT INTO apps_registry_application (id, package_name, is_active) VALUES
  (1, 'com.example.weather', TRUE),
  (2, 'com.example.chat', TRUE),
  (3, 'com.example.retired', FALSE)
ON CONFLICT DO NOTHING;
