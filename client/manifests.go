package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// ManifestFile is one input file of a manifest: its absolute path, size
// and hex SHA-256 digest when the manifest was created.
type ManifestFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ManifestSideInput is a named side-input file of a manifest.
type ManifestSideInput struct {
	Name string `json:"name"`
	ManifestFile
}

// Manifest is an immutable input manifest: the exact files of a partition.
type Manifest struct {
	Name       string              `json:"name"`
	Partition  string              `json:"partition"`
	Files      []ManifestFile      `json:"files"`
	SideInputs []ManifestSideInput `json:"side_inputs,omitempty"`
	CreateTime time.Time           `json:"create_time"`
	// Digest is "sha256:" and the hex digest of the manifest's content
	// (name, partition, files, side inputs).
	Digest string `json:"digest"`
	// Existed is set in the reply to a create when an identical manifest
	// existed already (nothing was written).
	Existed bool `json:"existed,omitempty"`
}

// CreateManifestRequest is the body of POST /v1/manifests.
type CreateManifestRequest struct {
	Name      string `json:"name"`
	Partition string `json:"partition"`
	// Files are absolute paths or globs, read by the server (within its
	// --file-roots).
	Files []string `json:"files"`
	// SideInputs maps a side input's name to its file's absolute path.
	SideInputs map[string]string `json:"side_inputs,omitempty"`
}

// ManifestList is the reply to GET /v1/manifests and GET
// /v1/manifests/{name}.
type ManifestList struct {
	Manifests []*Manifest `json:"manifests"`
}

// CreateManifest creates an input manifest; an identical existing one is
// returned with Existed set.
func (c *Client) CreateManifest(ctx context.Context, req CreateManifestRequest) (*Manifest, error) {
	var out Manifest
	if err := c.do(ctx, http.MethodPost, "/v1/manifests", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListManifests returns every manifest, or every partition of name's.
func (c *Client) ListManifests(ctx context.Context, name string) ([]*Manifest, error) {
	path := "/v1/manifests"
	if name != "" {
		path += "/" + url.PathEscape(name)
	}
	var out ManifestList
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.Manifests, nil
}

// GetManifest returns manifest (name, partition).
func (c *Client) GetManifest(ctx context.Context, name, partition string) (*Manifest, error) {
	var out Manifest
	path := "/v1/manifests/" + url.PathEscape(name) + "?partition=" + url.QueryEscape(partition)
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
