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
	// Pruned says the version's directory was removed after a later
	// publication of the partition replaced it (the log keeps the entry).
	Pruned bool
}

// FilePublications is the publication manifest of a partition run's
// staged file sink: where it is, and its publication log.
type FilePublications struct {
	// Manifest is the publication manifest's path.
	Manifest string
	// Published is the publication log, oldest first; the last entry of
	// a partition is the version readers read now.
	Published []FilePublication
}

// PublishingFileSink is a partition run's staged file sink (weir
// partitions list reads it).
type PublishingFileSink interface {
	// StagedVersion returns the path the sink publishes to and this run's
	// version directory, and whether that exists (the run wrote, and no
	// rerun's publication removed it). It reads no manifest.
	StagedVersion() (target, version string, staged bool)
	// FilePublications reads the target's publication manifest.
	FilePublications() (FilePublications, error)
}
