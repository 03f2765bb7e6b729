// Package tier moves closed partition segments to an object store (S3) and
// reads them back.
//
// A segment object holds the segment's record batches verbatim followed by
// a sparse offset and time index (24-byte entries: batch base offset, byte
// position, and the largest timestamp of the batches before it), so a read
// of any offset, or a search by time, is one small ranged GET of the index
// (cached) and ranged GETs of the batches. Objects are named
// <topic-id>/<partition>/<base-offset>-<leader-epoch>.log, created with
// If-None-Match, and become part of the log only when the partition's
// manifest in the metastore references them; the manifest write is
// conditioned on the uploader's leader epoch, so a deposed leader's upload
// is never referenced. Objects no manifest references are collected after
// a grace period: by the partition's leader (Collect), and, for those no
// leader reaches (a deleted topic whose removal was cut short, the WAL
// objects of a node or incarnation that is gone), by the one broker that
// ManagerOptions.Sweep picks (sweep.go).
//
// The manifest is paged in the metastore (metastore.Manifest); the Manager
// keeps each led partition's manifest in memory, so reads and uploads do
// not read it back.
package tier

import (
	"log/slog"
	"sync"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/objstore"
)

// Options configures a Tier.
type Options struct {
	Store objstore.Store
	Meta  *metastore.Meta
	// IndexInterval is the batch bytes between offset index entries.
	IndexInterval int
	// ChunkSize is the unit of ranged reads and of the read-ahead cache.
	ChunkSize int
	// CacheBytes bounds the read-ahead cache.
	CacheBytes int64
	// OrphanGrace is how old an unreferenced object must be before it is
	// collected (an upload in flight has its object before its manifest
	// entry).
	OrphanGrace time.Duration
	Logger      *slog.Logger
	Now         func() time.Time
}

// Defaults.
const (
	DefaultIndexInterval = 64 << 10
	DefaultChunkSize     = 4 << 20
	DefaultCacheBytes    = 256 << 20
	DefaultOrphanGrace   = 10 * time.Minute
	indexEntry           = 24
)

// ErrFenced is returned when a newer leader epoch owns the manifest.
var ErrFenced = metastore.ErrFenced

// Tier uploads, reads, expires and collects tiered segments.
type Tier struct {
	opts  Options
	cache *chunkCache

	mu      sync.Mutex
	indexes map[string][]indexEntryT // object -> decoded offset index
	aborted map[string][]AbortedTxn  // aborted-transaction object -> its entries
}

type indexEntryT struct{ offset, pos, maxTsBefore int64 }

// New returns a Tier over opts.Store.
func New(opts Options) *Tier {
	if opts.IndexInterval <= 0 {
		opts.IndexInterval = DefaultIndexInterval
	}
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = DefaultCacheBytes
	}
	if opts.OrphanGrace <= 0 {
		opts.OrphanGrace = DefaultOrphanGrace
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Tier{opts: opts, cache: newChunkCache(opts.CacheBytes), indexes: map[string][]indexEntryT{}, aborted: map[string][]AbortedTxn{}}
}
