package service

import "github.com/weir-dev/weir/manifest"

// ManifestRequest is a new input manifest: file patterns (absolute paths
// or globs, within the server's --file-roots) and side inputs NAME → path.
type ManifestRequest = manifest.Request

// CreateManifest records the manifest req names, computing every file's
// size and SHA-256 itself. created is false when an identical manifest
// (name, partition) existed (it is returned); one with other content is
// refused (MANIFEST_EXISTS).
func (s *Service) CreateManifest(req ManifestRequest) (m *manifest.Manifest, created bool, err error) {
	return s.core.CreateManifest(req)
}

// GetManifest returns manifest (name, partition) (MANIFEST_NOT_FOUND).
func (s *Service) GetManifest(name, partition string) (*manifest.Manifest, error) {
	return s.core.GetManifest(name, partition)
}

// ListManifests returns every manifest, or every partition of name's.
func (s *Service) ListManifests(name string) ([]*manifest.Manifest, error) {
	return s.core.ListManifests(name)
}
