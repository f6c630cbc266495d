package client

import (
	"context"
	"net/http"
	"net/url"
)

// Partition is one partition of a job name's partition runs in one target
// table or file (GET /v1/partitions/{name}).
type Partition struct {
	// Partition is the partition's name.
	Partition string `json:"partition"`
	// Status is "published" (in the publication log), "staged" (a staging
	// table without a log entry: the run failed or was cancelled before
	// publishing), "shadow" (a shadow run's kept staging table) or
	// "running".
	Status string `json:"status"`
	// Target is the table partitions are published to; Table is where this
	// partition's rows are (the target, or the run's staging table). For
	// a file sink Target is its path and Table the version directory.
	Target string `json:"target"`
	Table  string `json:"table"`
	// Driver is "sqlite" or "postgres", or "files" for a file sink.
	Driver string `json:"driver"`
	// JobID is the run; ManifestDigest the input manifest it read.
	JobID          string `json:"job_id"`
	ManifestDigest string `json:"manifest_digest,omitempty"`
	// OutputDigest, Rows, Replaced and PublishedAt are the publication
	// log's: the published rows' digest and count, the partition's rows
	// they replaced and the commit's time (published only).
	OutputDigest string `json:"output_digest,omitempty"`
	Rows         int64  `json:"rows"`
	Replaced     int64  `json:"replaced"`
	PublishedAt  string `json:"published_at,omitempty"`
	// Source and TargetSource are the weir diff specifiers of Table and
	// Target (sqlite:PATH#TABLE; postgres://USER@HOST/DB#TABLE, without
	// the DSN's password and the server's files: the client brings its
	// own; for a file sink the version directory and
	// PATH.manifest.json#PARTITION, the partition's published version).
	Source       string `json:"source,omitempty"`
	TargetSource string `json:"target_source,omitempty"`
}

// PartitionList is the body of GET /v1/partitions/{name}.
type PartitionList struct {
	Partitions []Partition `json:"partitions"`
}

// ListPartitions returns the partitions of job name's partition runs, by
// partition.
func (c *Client) ListPartitions(ctx context.Context, name string) ([]Partition, error) {
	var out PartitionList
	if err := c.do(ctx, http.MethodGet, "/v1/partitions/"+url.PathEscape(name), nil, &out); err != nil {
		return nil, err
	}
	return out.Partitions, nil
}

// PruneRequest is the body of POST /v1/partitions/{name}:prune.
type PruneRequest struct {
	// Partition, when not empty, prunes that partition only.
	Partition string `json:"partition,omitempty"`
	// Statuses are the statuses pruned: "staged", "shadow" (both when
	// empty).
	Statuses []string `json:"statuses,omitempty"`
	// DryRun lists what would be removed without removing it.
	DryRun bool `json:"dry_run,omitempty"`
}

// PruneResult is the reply of POST /v1/partitions/{name}:prune: the
// entries removed (with DryRun, that would be), as ListPartitions shows
// them.
type PruneResult struct {
	Removed []Partition `json:"removed"`
	DryRun  bool        `json:"dry_run"`
}

// PrunePartitions removes the staging tables and version directories
// that job name's partition runs left without publishing (the staged and
// shadow entries of ListPartitions), as req says.
func (c *Client) PrunePartitions(ctx context.Context, name string, req PruneRequest) (PruneResult, error) {
	var out PruneResult
	if err := c.do(ctx, http.MethodPost, "/v1/partitions/"+url.PathEscape(name)+":prune", req, &out); err != nil {
		return PruneResult{}, err
	}
	return out, nil
}
