-- DEV ONLY. Example applications for the local stack (`npm start`), so that the messages of
-- `npm run produce:sample` and the sample events in events/ (`sls invoke local`) resolve. Never run against a real database: in production the App
-- API registers applications.
INSERT INTO apps_registry_application (id, package_name, is_active) VALUES
  (1, 'com.example.weather', TRUE),
  (2, 'com.example.chat', TRUE),
  (3, 'com.example.retired', FALSE),
  (4, 'com.example.notes', TRUE),
  (5, 'com.example.chess', TRUE)
ON CONFLICT DO NOTHING;
