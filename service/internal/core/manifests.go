package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/manifest"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/state"
)

// Input manifests (package manifest) live in the registry under
// manifest/NAME/PARTITION. The service computes sizes and digests itself
// from the files, within the server's --file-roots, and never changes a
// manifest once written.

// CreateManifest builds the manifest req names from the files as they are
// now and records it. When (name, partition) exists already with the same
// content it returns the existing one and created false (a retry is a
// no-op); with other content it refuses with MANIFEST_EXISTS.
func (s *Core) CreateManifest(req manifest.Request) (m *manifest.Manifest, created bool, err error) {
	var check func(string) error
	if s.Opts.Access != nil && s.Opts.Access.Files != nil {
		check = s.Opts.Access.Files.CheckPattern
	}
	m, err = manifest.Build(req, check, s.Now())
	if err != nil {
		return nil, false, errcode.Errorf(manifestCode(err), "%w", err)
	}
	err = s.Update(func(tx *Tx) error {
		old, err := s.GetManifest(m.Name, m.Partition)
		if err == nil {
			if old.Digest == m.Digest {
				m = old
				return nil
			}
			return errcode.Errorf(errcode.ManifestExists, "manifest %s partition %s exists with other inputs (digest %s, these files give %s): a manifest is immutable; create the new input under a new partition or a new name", m.Name, m.Partition, old.Digest, m.Digest)
		}
		var ce *errcode.Error
		if !errors.As(err, &ce) || ce.Code != errcode.ManifestNotFound {
			return err
		}
		w := &state.Write{}
		if err := PutJSON(w, manifest.Key(m.Name, m.Partition), m); err != nil {
			return err
		}
		if err := tx.Apply(w); err != nil {
			return errcode.Internalf("recording manifest %s partition %s: %w", m.Name, m.Partition, err)
		}
		created = true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return m, created, nil
}

// manifestCode is the code of an error building or checking a manifest.
func manifestCode(err error) errcode.Code {
	switch {
	case errors.Is(err, manifest.ErrChanged):
		return errcode.ManifestChanged
	case errors.Is(err, manifest.ErrNotFound):
		return errcode.ManifestNotFound
	}
	if c := AccessCode(err); c != errcode.InvalidPipeline {
		return c
	}
	return errcode.InvalidRequest
}

// GetManifest returns manifest (name, partition); MANIFEST_NOT_FOUND when
// there is none.
func (s *Core) GetManifest(name, partition string) (*manifest.Manifest, error) {
	return GetJSON[manifest.Manifest](s, manifest.Key(name, partition), fmt.Sprintf("manifest %s partition %s", name, partition),
		errcode.Errorf(errcode.ManifestNotFound, "no manifest %s has a partition %q: %w (weir manifests list)", name, partition, manifest.ErrNotFound))
}

// ListManifests returns every manifest, or those of name when name is
// not empty, by name then partition. A name without any is
// MANIFEST_NOT_FOUND.
func (s *Core) ListManifests(name string) ([]*manifest.Manifest, error) {
	prefix := "manifest/"
	if name != "" {
		prefix += name + "/"
	}
	out := []*manifest.Manifest{}
	err := s.Store.Scan(prefix, func(key string, v []byte) error {
		var m manifest.Manifest
		if err := json.NewDecoder(bytes.NewReader(v)).Decode(&m); err != nil {
			return fmt.Errorf("decoding %s: %w", key, err)
		}
		out = append(out, &m)
		return nil
	})
	if err != nil {
		return nil, errcode.Internalf("listing manifests: %w", err)
	}
	if name != "" && len(out) == 0 {
		return nil, errcode.Errorf(errcode.ManifestNotFound, "no manifest is named %q (weir manifests list)", name)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// VerifiedManifest returns manifest (name, partition) after checking that
// every one of its files still has its recorded size and digest
// (MANIFEST_CHANGED naming the first that does not).
func (s *Core) VerifiedManifest(name, partition string) (*manifest.Manifest, error) {
	m, err := s.GetManifest(name, partition)
	if err != nil {
		return nil, err
	}
	if err := m.Verify(m.All()); err != nil {
		return nil, errcode.Errorf(manifestCode(err), "%w", err)
	}
	return m, nil
}

// checkBinding checks a submission's --manifest and --partition: a
// manifest needs a partition, and the manifest (name, partition) must
// exist with every file unchanged. It returns the manifest's digest ("" for
// a partition without --manifest, whose sources name their manifests).
func (s *Core) checkBinding(name, partition string) (string, error) {
	if partition == "" {
		return "", errcode.Errorf(errcode.InvalidRequest, "manifest %s needs a partition: give --partition P", name)
	}
	if err := manifest.ValidateName("partition", partition); err != nil {
		return "", errcode.Errorf(errcode.InvalidRequest, "%w", err)
	}
	if name == "" {
		return "", nil
	}
	m, err := s.VerifiedManifest(name, partition)
	if err != nil {
		return "", err
	}
	return m.Digest, nil
}

// manifestStore gives the loader the registry's manifests.
type manifestStore struct{ s *Core }

// Manifest implements yamlpipe.ManifestStore.
func (m manifestStore) Manifest(name, partition string) (*manifest.Manifest, error) {
	return m.s.GetManifest(name, partition)
}

// closeSinks closes the transactional sinks of prog after their restored
// final checkpoint was committed.
func closeSinks(ctx context.Context, prog *contract.Program) error {
	var errs []error
	for name, code := range prog.Code {
		if ts, ok := code.(contract.TransactionalSink); ok {
			if err := ts.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("closing sink %q: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// releaseSinks releases the sinks of prog that hold committed rows out of
// sight (contract.ReleasingSink), as an execution's ReleaseSinks does:
// for a build that only committed a checkpoint again. Nothing publishes.
func releaseSinks(ctx context.Context, prog *contract.Program) error {
	var errs []error
	for name, code := range prog.Code {
		if rs, ok := code.(contract.ReleasingSink); ok {
			if err := rs.Release(ctx); err != nil {
				errs = append(errs, fmt.Errorf("releasing sink %q: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// partitionBusy turns the refusal err of a new job of an active name into
// PARTITION_BUSY when the active job runs the same partition as req: one
// writer per partition, the name's active job being its lease.
func (s *Core) partitionBusy(req SubmitRequest, err error) error {
	var ce *errcode.Error
	if req.Partition == "" || !errors.As(err, &ce) || ce.Code != errcode.JobNameActive {
		return err
	}
	l, lerr := s.ReadLineage(req.Name)
	if lerr != nil || l.ActiveJobID == "" {
		return err
	}
	active, aerr := s.ReadJob(l.ActiveJobID)
	if aerr != nil || active.Partition != req.Partition {
		return err
	}
	return errcode.Errorf(errcode.PartitionBusy, "partition %s of job %s is being written by job %s (%s): one writer per partition; wait for it to end or cancel it, then run the partition again", req.Partition, req.Name, active.ID, active.State)
}
