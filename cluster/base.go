package cluster

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The log does not grow for ever. Once the leader appended
// Config.BaseEvery bytes since the last base image, its store hands it a
// checkpoint of itself at one log sequence (state.BaseTaker); the leader
// stores it in the cluster's object store (WEIR_CLUSTER_BASE_<name>,
// object "base", a tar of the checkpoint's files) and then removes the
// log's entries up to it that every member that is up already holds. A
// member whose store is older than the log's first entry (it was down
// meanwhile, or is new) restores the base image first (RestoreBase) and
// applies the log from there.

// DefaultBaseEvery is how many bytes of log entries the leader appends
// between two base images.
const DefaultBaseEvery = 64 << 20

// baseObject is the base image's name in the object store; seqMeta the
// metadata key of the log sequence it holds.
const (
	baseObject = "base"
	seqMeta    = "weir-log-sequence"
)

// ErrReplicaBehind: the member's store is older than the log's first
// entry: it restores the base image (RestoreBase), then campaigns again.
var ErrReplicaBehind = errors.New("the data directory's replica is older than the cluster's log: it needs the base image first")

// ErrNoBase: the object store holds no base image.
var ErrNoBase = errors.New("the cluster has no base image")

// WantBase implements state.BaseTaker: true once BaseEvery bytes were
// appended since the last base image, none being stored.
func (l *Leadership) WantBase() bool {
	every := l.m.cfg.BaseEvery
	if every < 0 {
		return false
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.sinceBase >= every && !l.basing && l.Err() == nil
}

// TakeBase implements state.BaseTaker: it stores the checkpoint in dir,
// which holds the log up to seq, in the background, then cuts the log.
func (l *Leadership) TakeBase(dir string, seq uint64) {
	l.appendMu.Lock()
	l.basing, l.sinceBase = true, 0
	l.appendMu.Unlock()
	go func() {
		defer func() {
			l.appendMu.Lock()
			l.basing = false
			l.appendMu.Unlock()
		}()
		defer os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		began := time.Now()
		size, err := l.m.storeBase(ctx, dir, seq)
		if err != nil {
			l.m.log.Warn("could not store a base image of the log; the next write tries again later", "log_sequence", seq, "error", err)
			l.appendMu.Lock()
			l.sinceBase = l.m.cfg.BaseEvery / 2
			l.appendMu.Unlock()
			return
		}
		cut, err := l.m.cutLog(ctx, seq)
		if err != nil {
			l.m.log.Warn("stored a base image but could not cut the log", "log_sequence", seq, "error", err)
			return
		}
		l.m.log.Info("stored a base image of the log", "log_sequence", seq, "bytes", size, "log_starts_at", cut+1, "took", time.Since(began).Round(time.Millisecond).String())
	}()
}

// storeBase puts the checkpoint in dir into the object store as the base
// image at seq, and returns its size.
func (m *Member) storeBase(ctx context.Context, dir string, seq uint64) (int64, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, dir)) }()
	info, err := m.obs.Put(ctx, jetstream.ObjectMeta{Name: baseObject, Description: "a checkpoint of the leader's store",
		Metadata: map[string]string{seqMeta: strconv.FormatUint(seq, 10)}}, pr)
	pr.CloseWithError(err) // ends the writer if Put stopped early
	if err != nil {
		return 0, err
	}
	return int64(info.Size), nil
}

// cutLog removes the log's entries up to seq that every member that is up
// holds already, and returns the last sequence removed.
func (m *Member) cutLog(ctx context.Context, seq uint64) (uint64, error) {
	members, err := m.Members(ctx)
	if err != nil {
		return 0, err
	}
	cut := seq
	for _, mem := range members {
		if mem.Up && !mem.Leader && mem.LogSequence < cut {
			cut = mem.LogSequence
		}
	}
	if cut == 0 {
		return 0, nil
	}
	if err := m.stream.Purge(ctx, jetstream.WithPurgeSequence(cut+1)); err != nil {
		return 0, err
	}
	return cut, nil
}

// RestoreBase writes the cluster's base image into dir (which must not
// exist) and returns the log sequence it holds: a store opened on dir
// then campaigns from there.
func (m *Member) RestoreBase(ctx context.Context, dir string) (uint64, error) {
	info, err := m.obs.GetInfo(ctx, baseObject)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return 0, fmt.Errorf("cluster %s: %w", m.cfg.Name, ErrNoBase)
	}
	if err != nil {
		return 0, fmt.Errorf("cluster %s: reading the base image's description: %w", m.cfg.Name, err)
	}
	seq, err := strconv.ParseUint(info.Metadata[seqMeta], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cluster %s: the base image names no log sequence (%q)", m.cfg.Name, info.Metadata[seqMeta])
	}
	r, err := m.obs.Get(ctx, baseObject)
	if err != nil {
		return 0, fmt.Errorf("cluster %s: reading the base image: %w", m.cfg.Name, err)
	}
	defer r.Close()
	if err := os.Mkdir(dir, 0o700); err != nil {
		return 0, fmt.Errorf("cluster %s: restoring the base image: %w", m.cfg.Name, err)
	}
	if err := readTar(r, dir); err != nil {
		return 0, fmt.Errorf("cluster %s: restoring the base image into %s: %w", m.cfg.Name, dir, err)
	}
	m.log.Info("restored the base image", "log_sequence", seq, "bytes", info.Size)
	return seq, nil
}

// writeTar writes the regular files of dir (a Pebble checkpoint is flat)
// as a tar stream.
func writeTar(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if err := addTarFile(tw, filepath.Join(dir, e.Name()), e.Name()); err != nil {
			return err
		}
	}
	return tw.Close()
}

func addTarFile(tw *tar.Writer, path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: st.Size(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// readTar writes a writeTar stream's files into dir, refusing any name
// that is not a plain file name.
func readTar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg || h.Name == "" || h.Name != filepath.Base(h.Name) || strings.HasPrefix(h.Name, ".") {
			return fmt.Errorf("unexpected entry %q in the base image", h.Name)
		}
		f, err := os.OpenFile(filepath.Join(dir, h.Name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}
