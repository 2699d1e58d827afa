-- network-metrics: one capture is analysed once; a real re-run has a new analysis_id.
CREATE TABLE network_metrics (
  id                  BIGSERIAL PRIMARY KEY,
  analysis_id         UUID NOT NULL,
  application_id      BIGINT NOT NULL REFERENCES apps_registry_application (id),
  captured_at         TIMESTAMPTZ NOT NULL,
  duration_ms         INTEGER NOT NULL CHECK (duration_ms >= 0),
  packet_count        BIGINT NOT NULL CHECK (packet_count >= 0),
  bytes_sent          BIGINT NOT NULL CHECK (bytes_sent >= 0),
  bytes_received      BIGINT NOT NULL CHECK (bytes_received >= 0),
  tcp_connections     INTEGER CHECK (tcp_connections >= 0),
  dns_queries         INTEGER CHECK (dns_queries >= 0),
  unique_hosts        INTEGER CHECK (unique_hosts >= 0),
  avg_rtt_ms          DOUBLE PRECISION CHECK (avg_rtt_ms >= 0),
  retransmission_rate DOUBLE PRECISION CHECK (retransmission_rate BETWEEN 0 AND 1),
  protocols           JSONB,
  analyzer_version    VARCHAR(64),
  source_partition    INTEGER,
  source_offset       BIGINT,
  ingested_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
  CONSTRAINT network_metrics_natural_key UNIQUE (analysis_id)
);

CREATE INDEX network_metrics_application_id_idx ON network_metrics (application_id);
