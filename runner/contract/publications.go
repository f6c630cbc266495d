package contract

// FilePublication is one publication of a partition run's staged file
// sink, as its publication manifest records it.
type FilePublication struct {
	// Partition, JobID and ManifestDigest identify the run; Version is
	// the directory holding the published files.
	Partition, JobID, ManifestDigest, Version string
	// OutputDigest, Rows and Replaced describe what was published and the
	// rows of the partition's previous version; PublishedAt is RFC 3339.
	OutputDigest   string
	Rows, Replaced int64
	PublishedAt    string
}

// FilePublications is what a partition run's staged file sink knows of
// its target: the target path, its publication manifest, its publication
// log, and this run's own version.
type FilePublications struct {
	// Target is the sink's configured path; Manifest its publication
	// manifest.
	Target, Manifest string
	// Published is the publication log, oldest first; the last entry of
	// a partition is the version readers read now.
	Published []FilePublication
	// Version is this run's version directory; Staged says whether it
	// exists (the run wrote, and no rerun's publication removed it).
	Version string
	Staged  bool
}

// PublishingFileSink is a partition run's staged file sink (weir
// partitions list reads it).
type PublishingFileSink interface {
	FilePublications() (FilePublications, error)
}
